"""The OpenAI Agents SDK on savepointd (the ``openai-agents`` extra).

``SavepointSession`` is the SDK's ``Session`` protocol stored durably in
savepointd: ``Runner.run(agent, input, session=SavepointSession("my-id"))``
in place of an ``SQLiteSession``. ``durable_function_tool`` is the SDK's
``function_tool`` with savepointd's side-effects ledger: after a crash, a
resumed run gets each interrupted call's recorded output, a re-run where
that is safe, or an error output saying its outcome is unknown.
docs/frameworks/openai-agents.md says what is guaranteed.
"""

from savepoint.errors import DurableToolError
from savepoint.openai_agents._session import SavepointSession, SessionClosedError
from savepoint.openai_agents._tools import Effect, apply_decisions, durable_function_tool, idempotency_key

__all__ = ["DurableToolError", "Effect", "SavepointSession", "SessionClosedError", "apply_decisions", "durable_function_tool", "idempotency_key"]
