"""The OpenAI Agents SDK on savepointd (the ``openai-agents`` extra).

``SavepointSession`` is the SDK's ``Session`` protocol stored durably in
savepointd: ``Runner.run(agent, input, session=SavepointSession("my-id"))``
in place of an ``SQLiteSession``. docs/frameworks/openai-agents.md says what
is guaranteed.
"""

from savepoint.openai_agents._session import SavepointSession

__all__ = ["SavepointSession"]
