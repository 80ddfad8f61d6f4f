"""One revision of a SavepointSession's savepointd session as a change is
planned on it (View), and what one save changes (Change): what the
session's compare-and-set loop (_session.py) and the durable tools' plans
(_tools.py) share."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.items import TResponseInputItem

from savepoint.v1 import savepoint_pb2 as pb

TASK = "openai-agents session"
"""The task a SavepointSession gives the savepointd session it creates."""

# The state_json key under which the durable tools keep their calls.
STATE_KEY = "openai_agents"


@dataclass
class View:
    """One revision of the session as a change is planned on it."""

    revision: int = 0
    epoch: int = 0
    count: int = 0
    task: str = TASK
    turn: int = 0
    tokens_used: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    state_json: str = ""
    pending: list[pb.ToolUse] = field(default_factory=list)
    items: list[TResponseInputItem] | None = None  # the whole history, when the change needs it

    def part(self) -> dict[str, Any]:
        """The durable tools' part of state_json (see _tools.py): a dict,
        empty when the session holds none."""
        try:
            st = json.loads(self.state_json) if self.state_json else {}
        except ValueError:
            return {}
        part = st.get(STATE_KEY) if isinstance(st, dict) else None
        return json.loads(json.dumps(part)) if isinstance(part, dict) else {}

    def with_part(self, part: Mapping[str, Any]) -> str:
        """state_json with the durable tools' part replaced (removed when it
        holds nothing); any other key a user stored is kept."""
        try:
            st = json.loads(self.state_json) if self.state_json else {}
        except ValueError:
            st = {}
        if not isinstance(st, dict):
            st = {}
        part = {k: v for k, v in part.items() if v}
        if part:
            st[STATE_KEY] = part
        else:
            st.pop(STATE_KEY, None)
        return json.dumps(st, separators=(",", ":"), sort_keys=True) if st else ""


@dataclass
class Change:
    """What one save does: keep the first ``keep`` messages (None: all), append
    ``append``, set the pending tool uses and state_json; ``result`` is what
    the operation returns once it is saved."""

    keep: int | None = None
    append: Sequence[TResponseInputItem] = ()
    pending: Sequence[pb.ToolUse] | None = None  # None: unchanged
    state_json: str | None = None  # None: unchanged
    result: Any = None
    nothing: bool = False  # True: save nothing and return result
