# docrun prelude: what docs/frameworks/anthropic.md's examples take as
# given: the seed's three tools as @beta_tool functions, MODEL, TASK, a
# client, a charge function, and Anthropic's client pointed at a local fake of the Messages
# API (tests/fake_messages_api.py) that calls read_notes, then write_report,
# then answers.
import os
import sys

sys.path.insert(0, os.environ["DOCRUN_TESTS"])
from fake_messages_api import FakeMessagesAPI  # noqa: E402

_api = FakeMessagesAPI(tool_prefix="")
os.environ["ANTHROPIC_BASE_URL"] = _api.url
os.environ["ANTHROPIC_API_KEY"] = "sk-fake"

import anthropic  # noqa: E402
from anthropic import beta_tool  # noqa: E402

from savepoint.anthropic import DurableAgent, durable, durable_tool_runner  # noqa: E402

MODEL = "claude-sonnet-4-5"
TASK = "Turn sales-notes.txt into a short report and write it to report.txt."
client = anthropic.Anthropic()


@durable(effect="read_only")
@beta_tool
def read_notes(path: str) -> str:
    """Read the sales notes."""
    return "sales up 12%"


@durable(effect="read_only")
@beta_tool
def count_words(text: str) -> str:
    """Count the words of a text."""
    return str(len(text.split()))


@beta_tool
def write_report(text: str) -> str:
    """Write the report to report.txt."""
    with open("report.txt", "a") as f:
        f.write(text + "\n")
    return "report.txt written"


def charge(amount: int) -> str:
    return f"charged {amount}"
