"""The Session against a real savepointd: the agent loop, every reconcile
rule of docs/protocol.md, fencing and revision errors as classes, and the
errors the Session raises itself."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import Daemon

import savepoint
from savepoint import Decision, EffectClass, Message, SessionStatus, ToolEvent, ToolResult, ToolStage, ToolUse
from savepoint.v1 import savepoint_pb2 as pb

PROMPT = Message("user", '[{"type":"text","text":"do the task"}]')


def assistant(text: str, *calls: ToolUse) -> Message:
    blocks: list[dict[str, object]] = [{"type": "text", "text": text}]
    blocks += [{"type": "tool_use", "id": c.tool_use_id, "name": c.name, "input": json.loads(c.input_json or "{}")} for c in calls]
    return Message("assistant", json.dumps(blocks))


READ = ToolUse("toolu_r", "read", '{"q":1}', EffectClass.READ_ONLY)
IDEM = ToolUse("toolu_i", "charge", '{"amount":5}', EffectClass.IDEMPOTENT)
SIDE = ToolUse("toolu_s", "send", '{"to":"x"}', EffectClass.SIDE_EFFECT)


class Tools:
    """A tool function that counts its runs and remembers the keys it got."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def __call__(self, call: ToolUse, key: str) -> str:
        self.runs.append((call.tool_use_id, key))
        if call.name == "fail":
            raise RuntimeError("tool failed: no such thing")
        return f"{call.name} done"


@pytest.fixture
def client(daemon: Daemon) -> Iterator[savepoint.Client]:
    with savepoint.Client(daemon.addr) as c:
        yield c


def test_agent_loop(client: savepoint.Client, sid: str) -> None:
    events: list[ToolEvent] = []
    with savepoint.Client(client.address, tool_hook=events.append) as c:
        s = c.start(sid, "the task", messages=[PROMPT], state_json='{"k":1}', labels={"team": "a"})
        assert (s.revision, s.turn, s.message_count, s.epoch > 0) == (1, 0, 1, True)
        tools = Tools()
        s.add_tokens(10)
        s.point_a(assistant("reading", READ, SIDE), [READ, SIDE])
        assert (s.revision, s.turn, [p.tool_use_id for p in s.pending]) == (2, 1, ["toolu_r", "toolu_s"])
        results = s.run_tools([READ, SIDE], tools)
        assert [r.content for r in results] == ["read done", "send done"]
        # The read-only tool gets no key; the side-effecting one its BeginEffect key.
        assert tools.runs[0] == ("toolu_r", "") and tools.runs[1][0] == "toolu_s" and len(tools.runs[1][1]) > 0
        assert [(e.stage, e.call.tool_use_id) for e in events] == [
            (ToolStage.RAN, "toolu_r"), (ToolStage.RECORDED, "toolu_r"),
            (ToolStage.BEGUN, "toolu_s"), (ToolStage.RAN, "toolu_s"), (ToolStage.RECORDED, "toolu_s"),
        ]
        assert all(e.session_id == sid for e in events)
        s.point_b(list(reversed(results)))  # any order; appended in the named order
        s.point_a(assistant("done"))
        assert (s.revision, s.turn, s.pending, s.message_count) == (4, 2, [], 4)

    r = client.resume(sid)
    assert (r.revision, r.turn, r.tokens_used, r.state_json, r.labels, r.task) == (4, 2, 10, '{"k":1}', {"team": "a"}, "the task")
    assert r.messages == s.messages
    assert r.epoch == s.epoch + 1
    blocks = json.loads(r.messages[2].content_json)
    assert [(b["tool_use_id"], b["content"]) for b in blocks] == [("toolu_r", "read done"), ("toolu_s", "send done")]
    assert r.reconcile(None) == []  # nothing pending
    r.point_b([])  # nothing to do
    assert r.revision == 4


def test_save_and_delete(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "t", messages=[PROMPT, Message("assistant", '"hi"')])
    s.save(state_json='{"step":2}', labels={"x": "y"}, task="t2", turn=7, tokens_used=3)
    s.save(keep_messages=1, append=[Message("user", '"again"')])
    r = client.resume(sid)
    assert (r.task, r.turn, r.tokens_used, r.state_json, r.labels) == ("t2", 7, 3, '{"step":2}', {"x": "y"})
    assert r.messages == [PROMPT, Message("user", '"again"')] == s.messages
    with pytest.raises(savepoint.SessionFencedError):
        s.delete()  # r owns it now
    r.delete()
    with pytest.raises(savepoint.SessionNotFoundError):
        client.resume(sid)


def test_start_existing(client: savepoint.Client, sid: str) -> None:
    first = client.start(sid, "t", messages=[PROMPT])
    with pytest.raises(savepoint.SessionExistsError) as e:
        client.start(sid, "t")
    assert e.value.reason == "SESSION_EXISTS"
    owner = client.resume(sid)
    # Once resumed, a create (epoch 0) is fenced: still "exists".
    with pytest.raises(savepoint.SessionExistsError) as e:
        client.start(sid, "t")
    assert e.value.reason == "SESSION_FENCED" and isinstance(e.value.__cause__, savepoint.SessionFencedError)
    fresh = client.start(sid, "new task", replace=True)
    assert (fresh.revision, fresh.task, fresh.epoch > owner.epoch) == (1, "new task", True)
    for old in (first, owner):
        with pytest.raises(savepoint.SessionFencedError):
            old.save(task="stale")


def test_fencing(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "t", messages=[PROMPT])
    s.point_a(assistant("send", SIDE), [SIDE])
    other = client.resume(sid)
    tools = Tools()
    with pytest.raises(savepoint.SessionFencedError) as e:
        s.run_tool(SIDE, lambda key: tools(SIDE, key))
    assert tools.runs == [], "a fenced process must not start a tool"
    assert e.value.current_epoch == other.epoch
    assert "not run: BeginEffect" in str(e.value)
    with pytest.raises(savepoint.SessionFencedError) as e:
        s.point_b([ToolResult(SIDE.tool_use_id, "made up")])
    assert e.value.code is not None and e.value.code.name == "ABORTED"
    # The new owner runs it (never begun) and finishes the turn.
    results = other.reconcile(tools)
    assert [r.decision for r in results] == [Decision.RUN] and len(tools.runs) == 1
    other.point_b(results)


def test_revision_mismatch(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "t", messages=[PROMPT])
    s.save(task="t2")
    with pytest.raises(savepoint.RevisionMismatchError) as e:
        client.raw.SaveCheckpoint(
            pb.SaveCheckpointRequest(session_id=sid, expected_revision=1, epoch=s.epoch, request_id="", task="stale")
        )
    assert (e.value.current_revision, e.value.current_epoch) == (2, s.epoch)
    # Reconcile notices a revision written by someone else.
    s.point_a(assistant("read", READ), [READ])
    t = client.resume(sid)
    t.point_b(t.reconcile(Tools()))
    with pytest.raises(savepoint.RevisionMismatchError):
        s.reconcile(Tools())


def test_field_errors(client: savepoint.Client) -> None:
    with pytest.raises(savepoint.InvalidSessionIdError) as e:
        client.start("bad id!", "t")
    assert isinstance(e.value, savepoint.InvalidArgumentError) and isinstance(e.value, savepoint.FieldError)
    assert e.value.field == "session_id"
    s = client.start("t.field-errors", "t", replace=True)
    with pytest.raises(savepoint.InvalidJsonError) as e2:
        s.save(state_json="{not json")
    assert e2.value.field == "state_json"
    with pytest.raises(savepoint.KeepMessagesOutOfRangeError):
        s.save(keep_messages=5)
    with pytest.raises(savepoint.DuplicateToolUseIdError):
        s.point_a(assistant("two"), [READ, READ])


def test_local_errors(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "t", messages=[PROMPT])
    tools = Tools()
    with pytest.raises(savepoint.CallNotPendingError) as e:
        s.run_tool(READ, lambda k: tools(READ, k))
    assert e.value.code is None
    s.point_a(assistant("read", READ, SIDE), [READ, SIDE])
    with pytest.raises(savepoint.ToolUsesPendingError):
        s.point_a(assistant("more"), [])
    with pytest.raises(savepoint.ToolUsesPendingError):
        s.save(append=[Message("user", '"x"')])
    with pytest.raises(savepoint.ToolNameMismatchError):
        s.run_tool(ToolUse(READ.tool_use_id, "other"), lambda k: "x")
    r1 = s.run_tool(READ, lambda k: tools(READ, k))
    with pytest.raises(savepoint.AlreadyRunError):
        s.run_tool(READ, lambda k: tools(READ, k))
    with pytest.raises(savepoint.ResultsMismatchError):
        s.point_b([r1])  # SIDE unanswered
    with pytest.raises(savepoint.ResultsMismatchError):
        s.point_b([r1, r1])
    with pytest.raises(savepoint.ResultsMismatchError):
        s.point_b([r1, ToolResult(SIDE.tool_use_id, "x"), ToolResult("toolu_other", "y")])
    # A hand-made result claiming a ledger error is never recorded.
    with pytest.raises(savepoint.NotRunError):
        s.point_b([r1, ToolResult(SIDE.tool_use_id, "fake", ledger_error=RuntimeError("record me"))])
    assert len(tools.runs) == 1
    s.point_b([r1, ToolResult(SIDE.tool_use_id, "answered by hand")])  # results may come from elsewhere
    assert s.pending == []


def test_tool_failure_is_recorded(client: savepoint.Client, sid: str) -> None:
    fail = ToolUse("toolu_f", "fail", "{}", EffectClass.SIDE_EFFECT)
    s = client.start(sid, "t", messages=[PROMPT])
    s.point_a(assistant("try", fail), [fail])
    (r,) = s.run_tools([fail], Tools())
    assert (r.is_error, r.content, r.ledger_error) == (True, "tool failed: no such thing", None)
    (again,) = client.resume(sid).reconcile(None)
    assert (again.decision, again.is_error, again.content) == (Decision.REUSE, True, "tool failed: no such thing")


def test_ledger_error(client: savepoint.Client, sid: str) -> None:
    """A tool that ran but whose record fails keeps its real result, is
    reported, and point_b tries the record once more."""
    reported: list[tuple[str, str]] = []
    with savepoint.Client(client.address, on_ledger_error=lambda call, r, err: reported.append((call.tool_use_id, type(err).__name__))) as c:
        s = c.start(sid, "t", messages=[PROMPT])
        s.point_a(assistant("send", SIDE), [SIDE])

        def tool(key: str) -> str:
            # Someone records another outcome first: the session's record
            # conflicts.
            c.raw.RecordEffect(pb.RecordEffectRequest(session_id=sid, tool_use_id=SIDE.tool_use_id, output="other"))
            return "real output"

        r = s.run_tool(SIDE, tool)
        assert r.content == "real output" and isinstance(r.ledger_error, savepoint.EffectConflictError)
        assert "ran but its outcome is not in the ledger" in str(r.ledger_error)
        s.point_b([r])  # tries once more (conflicts again), then saves the real result
        assert reported == [(SIDE.tool_use_id, "EffectConflictError"), (SIDE.tool_use_id, "EffectConflictError")]
        assert json.loads(s.messages[-1].content_json)[0]["content"] == "real output"


def crash_after_point_a(client: savepoint.Client, sid: str, *calls: ToolUse) -> savepoint.Session:
    s = client.start(sid, "t", messages=[PROMPT])
    s.point_a(assistant("go", *calls), list(calls))
    return s


def test_reconcile_reuse(client: savepoint.Client, sid: str) -> None:
    s = crash_after_point_a(client, sid, SIDE)
    s.run_tool(SIDE, lambda k: "sent")  # recorded, then "killed" before point_b
    tools = Tools()
    (r,) = client.resume(sid).reconcile(tools)
    assert (r.decision, r.content, r.is_error, tools.runs) == (Decision.REUSE, "sent", False, [])


def test_reconcile_read_only_runs(client: savepoint.Client, sid: str) -> None:
    crash_after_point_a(client, sid, READ)
    tools = Tools()
    (r,) = client.resume(sid).reconcile(tools)
    assert (r.decision, r.content, tools.runs) == (Decision.RUN, "read done", [(READ.tool_use_id, "")])


def test_reconcile_idempotent_reruns_with_its_key(client: savepoint.Client, sid: str) -> None:
    s = crash_after_point_a(client, sid, IDEMPOTENT := IDEM)
    # Begun, then killed while the tool ran.
    key = client.raw.BeginEffect(pb.BeginEffectRequest(session_id=sid, tool_use_id=IDEMPOTENT.tool_use_id, epoch=s.epoch)).idempotency_key
    events: list[ToolEvent] = []
    with savepoint.Client(client.address, tool_hook=events.append) as c:
        tools = Tools()
        (r,) = c.resume(sid).reconcile(tools)
    assert (r.decision, tools.runs) == (Decision.RUN, [(IDEMPOTENT.tool_use_id, key)])
    assert events[0].stage == ToolStage.DECIDED and events[0].begun and events[0].decision == Decision.RUN


def test_reconcile_side_effect_never_begun_runs_and_is_begun(client: savepoint.Client, sid: str) -> None:
    crash_after_point_a(client, sid, SIDE)
    tools = Tools()
    r1 = client.resume(sid)
    (r,) = r1.reconcile(tools)
    assert (r.decision, r.content, len(tools.runs)) == (Decision.RUN, "send done", 1)
    # Killed again before point_b, after the record: reused, not run twice.
    (again,) = client.resume(sid).reconcile(tools)
    assert (again.decision, again.content, len(tools.runs)) == (Decision.REUSE, "send done", 1)


def test_reconcile_side_effect_begun_is_in_doubt(client: savepoint.Client, sid: str) -> None:
    s = crash_after_point_a(client, sid, SIDE)
    client.raw.BeginEffect(pb.BeginEffectRequest(session_id=sid, tool_use_id=SIDE.tool_use_id, epoch=s.epoch))
    tools = Tools()
    r = client.resume(sid)
    (res,) = r.reconcile(tools)
    assert (res.decision, res.is_error, tools.runs) == (Decision.IN_DOUBT, True, [])
    assert "unknown" in res.content
    r.point_b([res])
    assert json.loads(r.messages[-1].content_json)[0]["is_error"] is True


def test_reconcile_not_begin_tracked_is_in_doubt(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "t", messages=[PROMPT])
    untracked = pb.ToolUse(tool_use_id="toolu_u", name="send", effect_class=pb.EFFECT_CLASS_SIDE_EFFECT, begin_tracked=False)
    client.raw.SaveCheckpoint(
        pb.SaveCheckpointRequest(
            session_id=sid, expected_revision=s.revision, epoch=s.epoch, request_id="", turn=1,
            append_messages=[pb.Message(role="assistant", content_json='"go"')], pending_tool_uses=[untracked],
        )
    )
    tools = Tools()
    (res,) = client.resume(sid).reconcile(tools)
    assert (res.decision, res.is_error, tools.runs) == (Decision.IN_DOUBT, True, [])


def test_reconcile_needs_a_run_function(client: savepoint.Client, sid: str) -> None:
    crash_after_point_a(client, sid, READ)
    r = client.resume(sid)
    with pytest.raises(savepoint.SavepointError, match="no run function"):
        r.reconcile(None)
    assert r.reconcile(Tools())[0].decision == Decision.RUN  # not marked run by the failed attempt


def test_reconcile_several_in_order(client: savepoint.Client, sid: str) -> None:
    s = crash_after_point_a(client, sid, READ, IDEM, SIDE)
    s.run_tool(IDEM, lambda k: "charged")
    tools = Tools()
    results = client.resume(sid).reconcile(tools)
    assert [(r.tool_use_id, r.decision) for r in results] == [
        (READ.tool_use_id, Decision.RUN), (IDEM.tool_use_id, Decision.REUSE), (SIDE.tool_use_id, Decision.RUN),
    ]


def test_custom_tool_results(client: savepoint.Client, sid: str) -> None:
    def openai(results: list[ToolResult]) -> list[Message]:  # type: ignore[type-arg]
        return [Message("tool", json.dumps({"tool_call_id": r.tool_use_id, "content": r.content})) for r in results]

    with savepoint.Client(client.address, tool_results=openai) as c:  # type: ignore[arg-type]
        s = c.start(sid, "t", messages=[PROMPT])
        s.point_a(assistant("r", READ, SIDE), [READ, SIDE])
        s.point_b(s.run_tools([READ, SIDE], Tools()))
    assert [m.role for m in s.messages[-2:]] == ["tool", "tool"]
    assert s.message_count == 4


def test_tools_of_one_turn_in_threads(client: savepoint.Client, sid: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    calls = [ToolUse(f"toolu_{i}", "send", "{}", EffectClass.SIDE_EFFECT) for i in range(8)]
    s = client.start(sid, "t", messages=[PROMPT])
    s.point_a(assistant("all at once", *calls), calls)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: s.run_tool(c, lambda key: f"{c.tool_use_id} with {key}"), calls))
    assert all(r.ledger_error is None and r.content.startswith(r.tool_use_id) for r in results)
    s.point_b(results)
    assert client.resume(sid).reconcile(None) == []  # nothing pending after Point B
    assert len({r.content.split(" with ")[1] for r in results}) == 8, "each tool use has its own idempotency key"


def test_complete(client: savepoint.Client, sid: str) -> None:
    s = client.start(sid, "report", messages=[PROMPT])
    assert (s.status, s.final_output) == (SessionStatus.ACTIVE, "")
    s.complete(SessionStatus.COMPLETED, "the report")
    assert (s.status, s.final_output) == (SessionStatus.COMPLETED, "the report")
    s.complete(SessionStatus.COMPLETED, "the report")  # the same completion again
    with pytest.raises(savepoint.SessionCompletedError):
        s.complete(SessionStatus.FAILED, "oops")
    with pytest.raises(savepoint.SessionCompletedError):
        s.save(append=[PROMPT])
    cp, _ = client.get_session(sid)
    assert (cp.status, cp.final_output) == (pb.SESSION_STATUS_COMPLETED, "the report")
    # Resume loads it without taking it over.
    r = client.resume(sid)
    assert (r.status, r.final_output, r.epoch, len(r.messages)) == (SessionStatus.COMPLETED, "the report", s.epoch, 1)
    # Resume with reopen makes it active again, under a new epoch, and it
    # continues where it stopped.
    o = client.resume(sid, reopen=True)
    assert (o.status, o.final_output, len(o.messages)) == (SessionStatus.ACTIVE, "", 1)
    assert o.epoch > s.epoch
    o.save(append=[PROMPT])
    cp, msgs = client.get_session(sid)
    assert (cp.status, cp.final_output, len(msgs)) == (pb.SESSION_STATUS_ACTIVE, "", 2)
    o.complete(SessionStatus.COMPLETED, "the report")
    # A completed session exists: start refuses it, and replaces it when asked.
    with pytest.raises(savepoint.SessionExistsError):
        client.start(sid, "again")
    fresh = client.start(sid, "again", replace=True)
    assert (fresh.status, fresh.revision, fresh.task) == (SessionStatus.ACTIVE, 1, "again")
