"""durable_function_tool with the SDK's real Runner and its ScriptedModel
against a real savepointd: an agent process killed with SIGKILL at each
point of a tool call, then resumed by a new process with
``Runner.run(agent, [], session=SavepointSession(id))``.

Run as a script (``python test_openai_agents_tools.py run|resume ...``) this
file is that agent process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, UserError, set_tracing_disabled
from agents.tool import default_tool_error_function
from agents.testing import ScriptedModel, assistant_message, function_call

from savepoint import Client, Verified
from savepoint.openai_agents import DurableToolError, SavepointSession, durable_function_tool, idempotency_key
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)  # no network: the SDK would try to export traces

IN_DOUBT = "is unknown"  # in the in-doubt output the model is given
DONE = "did report"  # the tool's real output

# point, effect, the effects the tool made in all (0, 1 or 2), the output the resumed model sees
CASES = [
    ("before-begin", "side_effect", 1, DONE),  # saved pending, never begun: certainly never started, run
    ("in-tool", "side_effect", 0, IN_DOUBT),  # begun: started, outcome unknown
    ("during", "side_effect", 1, IN_DOUBT),
    ("before-record", "side_effect", 1, IN_DOUBT),
    ("after-record", "side_effect", 1, DONE),  # recorded, still pending: the recorded output
    ("before-sdk-save", "side_effect", 1, DONE),  # recorded, no longer pending: the recorded output
    ("in-tool", "idempotent", 1, DONE),  # re-run with the same key
    ("before-record", "idempotent", 2, DONE),
    ("during", "read_only", 2, DONE),  # re-run
    ("before-record", "read_only", 2, DONE),
    ("before-sdk-save", "read_only", 1, DONE),
    ("none", "side_effect", 1, DONE),  # no crash: the resume has nothing to answer
]


# where the first process died, what verify says on resume, the effects made in all, the output the model sees
VERIFY_CASES = [
    ("during", "done", 1, "found: reported"),  # it took effect: the output found, not run again
    ("in-tool", "not_done", 1, DONE),  # it did not: run again, once
    ("during", "unknown", 1, IN_DOUBT),
    ("during", "raise", 1, IN_DOUBT),
]


@pytest.mark.parametrize(("point", "answer", "effects", "seen"), VERIFY_CASES)
def test_verify_on_resume(daemon: Any, sid: str, tmp_path: Path, point: str, answer: str, effects: int, seen: str) -> None:
    """Killed after BeginEffect, resumed with a verify hook on the tool."""
    assert _spawn(daemon, "run", sid, str(tmp_path), point, "side_effect").returncode == -signal.SIGKILL
    second = _spawn(daemon, "resume", sid, str(tmp_path), "none", "side_effect", answer)
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout.splitlines()[-1])
    lines = (tmp_path / "effects").read_text().splitlines() if (tmp_path / "effects").exists() else []
    assert len(lines) == effects, lines
    asked = (tmp_path / "asked").read_text().split()
    assert len(asked) == 2 and len(asked[0]) == 32 and json.loads(asked[1]) == {"text": "report"}, asked  # its key and args
    if answer == "not_done":
        assert lines[0].split()[1] == asked[0]  # run again with the key it was begun with
    outputs = _calls(out["model_input"], "function_call_output")
    assert len(outputs) == 1 and seen in outputs[0]["output"], outputs
    with Client(daemon.addr) as c:
        (entry,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    kind = pb.RESOLVER_KIND_VERIFY if answer in ("done", "not_done") else pb.RESOLVER_KIND_UNSPECIFIED
    assert entry.resolution.resolver_kind == kind


def _spawn(daemon: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SAVEPOINT_ADDR=daemon.addr)
    return subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=120)


def _calls(items: list[Any], kind: str) -> list[Any]:
    return [it for it in items if it.get("type") == kind]


@pytest.mark.parametrize(("point", "effect", "effects", "seen"), CASES)
def test_killed_and_resumed(daemon: Any, sid: str, tmp_path: Path, point: str, effect: str, effects: int, seen: str) -> None:
    first = _spawn(daemon, "run", sid, str(tmp_path), point, effect)
    if point == "none":
        assert first.returncode == 0, first.stderr
    else:
        assert first.returncode == -signal.SIGKILL, f"exit {first.returncode}:\n{first.stderr}"
    second = _spawn(daemon, "resume", sid, str(tmp_path), "none", effect)
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout.splitlines()[-1])
    assert out["final_output"] == "done"

    # The side effect: at most once for a side-effecting tool, exactly once unless in doubt.
    lines = (tmp_path / "effects").read_text().splitlines() if (tmp_path / "effects").exists() else []
    assert len(lines) == effects, lines
    if effect == "idempotent":
        assert len({ln.split()[1] for ln in lines}) == 1, lines  # every run got the call's one key
    if effect == "read_only":
        assert all(ln.split()[1:] == [] for ln in lines), lines  # no key for a read-only tool

    # The model asked on resume sees the call with exactly one output, and the answer is right.
    model_input = out["model_input"]
    assert [it.get("call_id") for it in _calls(model_input, "function_call")] == ["call_1"]
    outputs = _calls(model_input, "function_call_output")
    assert [it["call_id"] for it in outputs] == ["call_1"]
    assert seen in outputs[0]["output"], outputs[0]["output"]
    if seen == IN_DOUBT:
        assert "act call (tool_use_id call_1)" in outputs[0]["output"] and "not run again" in outputs[0]["output"]

    # The session: the prompt, the call, its one output, the final answer; nothing left pending.
    items = out["items"]
    kinds = [it.get("type", "message") if "role" not in it else it["role"] for it in items]
    assert kinds == ["user", "function_call", "function_call_output", "assistant"] + (["assistant"] if point == "none" else [])
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
        assert list(cp.pending_tool_uses) == []
        assert "calls" not in (json.loads(cp.state_json).get("openai_agents", {}) if cp.state_json else {})
        entries = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert [e.tool_use_id for e in entries] == ["call_1"]
    assert entries[0].effect_class == {"side_effect": 3, "idempotent": 2, "read_only": 1}[effect]
    if seen == DONE:
        assert entries[0].effect.output == DONE and not entries[0].effect.is_error


def test_killed_again_while_resuming(daemon: Any, sid: str, tmp_path: Path) -> None:
    """A crash during a resume is just another crash: the call the first
    resume began to run (it had never started) is in doubt at the second
    resume, never run a third time."""
    assert _spawn(daemon, "run", sid, str(tmp_path), "before-begin", "side_effect").returncode == -signal.SIGKILL
    assert _spawn(daemon, "resume", sid, str(tmp_path), "during", "side_effect").returncode == -signal.SIGKILL
    last = _spawn(daemon, "resume", sid, str(tmp_path), "none", "side_effect")
    assert last.returncode == 0, last.stderr
    out = json.loads(last.stdout.splitlines()[-1])
    outputs = _calls(out["items"], "function_call_output")
    assert len(outputs) == 1 and IN_DOUBT in outputs[0]["output"]
    assert len(_calls(out["items"], "function_call")) == 1
    assert len((tmp_path / "effects").read_text().splitlines()) == 1  # the first resume's run, once


def test_failed_tool_is_recorded_not_in_doubt(daemon: Any, sid: str) -> None:
    """A tool that raises ran and failed: the model gets function_tool's
    error output, the ledger records the failure (is_error), and a resume
    has nothing to answer."""

    @durable_function_tool
    def explode(x: int) -> str:
        """Fail."""
        raise RuntimeError(f"boom {x}")

    async def go() -> None:
        model = ScriptedModel([[function_call("explode", {"x": 7}, call_id="c1")], [assistant_message("sorry")]])
        r = await Runner.run(Agent(name="a", model=model, tools=[explode]), "go", session=SavepointSession(sid, daemon.addr))
        assert r.final_output == "sorry"
        out = _calls(model.calls[1].input, "function_call_output")
        assert [o["output"] for o in out] == [default_tool_error_function(None, RuntimeError("boom 7"))]  # type: ignore[arg-type]
        items = await SavepointSession(sid, daemon.addr).get_items()
        assert len(_calls(items, "function_call_output")) == 1

    asyncio.run(go())
    with Client(daemon.addr) as c:
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
        cp, _ = c.get_session(sid)
    assert e.begun and e.effect.is_error and e.effect.output == default_tool_error_function(None, RuntimeError())  # type: ignore[arg-type]
    assert list(cp.pending_tool_uses) == [] and cp.state_json == ""


def test_failure_error_function_none_reraises(daemon: Any, sid: str) -> None:
    @durable_function_tool(failure_error_function=None, name_override="strict")
    async def fails() -> str:
        """Fail."""
        raise ValueError("no")

    async def go() -> None:
        model = ScriptedModel([[function_call("strict", {}, call_id="c1")]])
        with pytest.raises(Exception, match="no"):
            await Runner.run(Agent(name="a", model=model, tools=[fails]), "go", session=SavepointSession(sid, daemon.addr))

    asyncio.run(go())
    with Client(daemon.addr) as c:
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert e.effect.is_error  # recorded before re-raising


def test_needs_a_savepoint_session(daemon: Any) -> None:
    @durable_function_tool(effect="read_only")
    def lookup() -> str:
        """Look up."""
        return "x"

    async def go() -> None:
        # A call id no other test uses: a run resumed from a RunState finds
        # its session as the SavepointSession of this process whose history
        # holds the call, and another test's session may still be alive.
        model = ScriptedModel([[function_call("lookup", {}, call_id="c-needs-a-savepoint-session")], [assistant_message("x")]])
        with pytest.raises(UserError) as e:
            await Runner.run(Agent(name="a", model=model, tools=[lookup]), "go", session=SQLiteSession("plain"))
        assert isinstance(e.value.__cause__, DurableToolError)
        assert "session is not a SavepointSession" in str(e.value.__cause__)

    asyncio.run(go())


def test_decorator_forms_and_bad_effect() -> None:
    def f(a: int) -> str:
        """Add one."""
        return str(a + 1)

    assert durable_function_tool(f).name == "f"
    assert durable_function_tool(effect="idempotent")(f).name == "f"
    assert durable_function_tool(f, name_override="g").name == "g"
    assert durable_function_tool(f).params_json_schema["properties"]["a"]["type"] == "integer"
    with pytest.raises(ValueError, match="effect must be"):
        durable_function_tool(f, effect="sideeffect")  # type: ignore[arg-type]


def test_parallel_calls_and_call_id_reuse(daemon: Any, sid: str) -> None:
    """Two calls of one turn run concurrently, each once, each answered once;
    a later call reusing a recorded call id is refused, not run."""
    ran: list[str] = []

    @durable_function_tool
    async def send(to: str) -> str:
        """Send."""
        ran.append(to)
        await asyncio.sleep(0.05)
        return f"sent to {to}"

    async def go() -> None:
        model = ScriptedModel([
            [function_call("send", {"to": "a"}, call_id="c1"), function_call("send", {"to": "b"}, call_id="c2")],
            [assistant_message("ok")],
        ])
        s = SavepointSession(sid, daemon.addr)
        await Runner.run(Agent(name="a", model=model, tools=[send]), "go", session=s)
        assert sorted(ran) == ["a", "b"]
        items = await s.get_items()
        assert sorted(it["call_id"] for it in _calls(items, "function_call_output")) == ["c1", "c2"]
        again = ScriptedModel([[function_call("send", {"to": "c"}, call_id="c1")]])
        with pytest.raises(UserError) as e:
            await Runner.run(Agent(name="a", model=again, tools=[send]), "go", session=s)
        assert isinstance(e.value.__cause__, DurableToolError) and "reused call id" in str(e.value.__cause__)
        assert sorted(ran) == ["a", "b"]

    asyncio.run(go())


@pytest.mark.parametrize("method", ["run_sync", "run_streamed"])
def test_sync_and_streamed_runs(daemon: Any, sid: str, method: str) -> None:
    """Runner.run_sync and Runner.run_streamed give the session its run too:
    the durable tool runs under the ledger (recorded, nothing left pending)."""

    @durable_function_tool(effect="idempotent")
    def charge(amount: int) -> str:
        """Charge."""
        return f"charged {amount} with key {idempotency_key()}"

    async def go() -> None:
        model = ScriptedModel([[function_call("charge", {"amount": 5}, call_id="c1")], [assistant_message("ok")]])
        agent = Agent(name="a", model=model, tools=[charge])
        s = SavepointSession(sid, daemon.addr)
        if method == "run_sync":
            await asyncio.to_thread(Runner.run_sync, agent, "go", session=s)
        else:
            res = Runner.run_streamed(agent, "go", session=s)
            async for _ in res.stream_events():
                pass
        (out,) = _calls(await s.get_items(), "function_call_output")
        assert out["output"].startswith("charged 5 with key ") and len(out["output"]) > len("charged 5 with key ")

    asyncio.run(go())
    with Client(daemon.addr) as c:
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
        cp, _ = c.get_session(sid)
    assert e.begun and e.effect.output == f"charged 5 with key {e.idempotency_key}"
    assert list(cp.pending_tool_uses) == [] and cp.state_json == ""


def _listed_call(daemon: Any, sid: str, owner: dict[str, Any], *, name: str = "act", begun: bool = True) -> None:
    """A session whose call c1 (side_effect, begun unless told) is listed as
    run by owner."""
    state = {"openai_agents": {"calls": {"c1": {"name": name, "arguments": "{}", "owner": owner}}}}
    tu = pb.ToolUse(tool_use_id="c1", name=name, input_json="{}", effect_class=pb.EFFECT_CLASS_SIDE_EFFECT, begin_tracked=True)
    with Client(daemon.addr) as c:
        r = c.raw.SaveCheckpoint(pb.SaveCheckpointRequest(
            session_id=sid, expected_revision=0, request_id="00000000-0000-4000-8000-000000000001", task="t",
            append_messages=[pb.Message(role="user", content_json=json.dumps({"role": "user", "content": "go"}))],
            pending_tool_uses=[tu], state_json=json.dumps(state),
        ))
        if begun:
            c.raw.BeginEffect(pb.BeginEffectRequest(session_id=sid, tool_use_id="c1", epoch=r.epoch))


def test_recorded_call_saved_by_its_owner_meanwhile(daemon: Any, sid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save refused with CALL_ALREADY_RECORDED for a call whose owner then
    saves it as no longer pending (before this writer can settle it) is
    planned again on the new revision, not failed."""
    from savepoint.openai_agents import _tools

    _listed_call(daemon, sid, {"host": "elsewhere", "pid": 1, "start": ""})
    with Client(daemon.addr) as c:
        c.raw.RecordEffect(pb.RecordEffectRequest(session_id=sid, tool_use_id="c1", name="act", output="done"))
    s = SavepointSession(sid, daemon.addr)
    asyncio.run(s._load(history=False))  # s now plans on the revision with c1 pending and recorded
    orig = _tools._resolutions

    async def owner_saves_first(sess: SavepointSession) -> dict[str, pb.Resolution]:
        with Client(daemon.addr) as c:
            cp, _ = c.get_session(sid)
            c.raw.SaveCheckpoint(pb.SaveCheckpointRequest(
                session_id=sid, expected_revision=cp.revision, epoch=cp.epoch, request_id="00000000-0000-4000-8000-000000000002",
                task=cp.task, state_json=cp.state_json,
            ))
        return await orig(sess)

    monkeypatch.setattr(_tools, "_resolutions", owner_saves_first)
    asyncio.run(s.add_items([{"role": "user", "content": "meanwhile"}]))
    monkeypatch.setattr(_tools, "_resolutions", orig)
    items = asyncio.run(s.get_items())
    assert [it.get("content") for it in items[:2]] == ["go", "meanwhile"]
    assert items[3] == {"type": "function_call_output", "call_id": "c1", "output": "done"}


def test_interrupted_call_of_an_unknown_tool(daemon: Any, sid: str) -> None:
    """A call that never started, of a tool this process does not have, is
    answered with an error output saying it was not run, not run blindly."""
    _listed_call(daemon, sid, {"host": "elsewhere", "pid": 1, "start": ""}, name="no_such_tool", begun=False)
    items = asyncio.run(SavepointSession(sid, daemon.addr).get_items())
    assert items[2]["call_id"] == "c1" and "was interrupted before it ran and was not run again" in items[2]["output"]
    with Client(daemon.addr) as c:
        assert list(c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries) == []  # never begun, nothing recorded


def test_clear_session_forgets_listed_calls_keeps_ledger(daemon: Any, sid: str) -> None:
    _listed_call(daemon, sid, {"host": "elsewhere", "pid": 1, "start": ""})
    s = SavepointSession(sid, daemon.addr)
    asyncio.run(s.clear_session())
    with Client(daemon.addr) as c:
        cp, msgs = c.get_session(sid)
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert msgs == [] and list(cp.pending_tool_uses) == [] and cp.state_json == ""
    assert e.tool_use_id == "c1" and e.begun  # the ledger still knows the call began
    assert asyncio.run(s.get_items()) == []  # nothing left to answer


def test_non_text_output_is_recorded_as_json(daemon: Any, sid: str) -> None:
    @durable_function_tool(effect="read_only")
    def stats() -> dict[str, int]:
        """Count."""
        return {"words": 3}

    async def go() -> None:
        model = ScriptedModel([[function_call("stats", {}, call_id="c1")], [assistant_message("ok")]])
        s = SavepointSession(sid, daemon.addr)
        await Runner.run(Agent(name="a", model=model, tools=[stats]), "go", session=s)
        (out,) = _calls(await s.get_items(), "function_call_output")
        assert out["output"] == '{"words": 3}'

    asyncio.run(go())
    with Client(daemon.addr) as c:
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert e.effect.output == '{"words": 3}' and not e.begun  # read-only: never begun


IMAGE = "data:image/png;base64,iVBORw0KGgo="


def test_content_blocks_recorded_and_reused(daemon: Any, sid: str) -> None:
    """A tool that returns text and an image: the model gets them as
    structured output, the ledger holds their JSON, and a call interrupted
    after RecordEffect is answered on resume with the same blocks."""
    from agents import ToolOutputImage, ToolOutputText

    @durable_function_tool(effect="read_only")
    def chart() -> list[Any]:
        """Chart."""
        return [ToolOutputText(text="sales by month"), ToolOutputImage(image_url=IMAGE)]

    want = [{"type": "input_text", "text": "sales by month"}, {"type": "input_image", "image_url": IMAGE}]

    async def go() -> None:
        model = ScriptedModel([[function_call("chart", {}, call_id="c1")], [assistant_message("ok")]])
        s = SavepointSession(sid, daemon.addr)
        await Runner.run(Agent(name="a", model=model, tools=[chart]), "go", session=s)
        (out,) = _calls(await s.get_items(), "function_call_output")
        assert out["output"] == want

    asyncio.run(go())
    with Client(daemon.addr) as c:
        (e,) = c.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries
    assert json.loads(e.effect.output) == [{"type": "text", "text": "sales by month"}, {"type": "image", "image_url": IMAGE}]

    # Interrupted after RecordEffect: the resume answers with the same blocks.
    other = sid + ".2"
    _listed_call(daemon, other, {"host": "elsewhere", "pid": 1, "start": ""})
    with Client(daemon.addr) as c:
        c.raw.RecordEffect(pb.RecordEffectRequest(session_id=other, tool_use_id="c1", name="act", output=e.effect.output))
    items = asyncio.run(SavepointSession(other, daemon.addr).get_items())
    assert items[2]["call_id"] == "c1" and items[2]["output"] == want


def test_call_of_a_live_process_is_left_to_it(daemon: Any, sid: str) -> None:
    """A call listed by a process still running on this host is not answered
    by another process's get_items; once that process is gone, it is (in
    doubt, since it had begun)."""
    import socket

    from savepoint.openai_agents._tools import _start_time

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _listed_call(daemon, sid, {"host": socket.gethostname(), "pid": other.pid, "start": _start_time(other.pid)})
        s = SavepointSession(sid, daemon.addr)
        assert asyncio.run(s.get_items()) == [{"role": "user", "content": "go"}]
    finally:
        other.kill()
        other.wait()
    items = asyncio.run(s.get_items())
    assert [it.get("type") for it in items[1:]] == ["function_call", "function_call_output"]
    assert IN_DOUBT in items[2]["output"] and "it was started" in items[2]["output"]


def test_recorded_pending_call_is_settled_by_any_writer(daemon: Any, sid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after RecordEffect, before the save that stops the call
    pending: a plain add_items from another process (which the daemon first
    refuses with CALL_ALREADY_RECORDED) settles it and lands, and the next
    get_items answers the call with its recorded output."""
    first = _spawn(daemon, "run", sid, str(tmp_path), "after-record", "side_effect")
    assert first.returncode == -signal.SIGKILL, first.stderr

    from savepoint.openai_agents import _tools

    settled: list[bool] = []
    orig = _tools.settle_recorded

    async def counting(s: SavepointSession) -> bool:
        settled.append(await orig(s))
        return settled[-1]

    monkeypatch.setattr(_tools, "settle_recorded", counting)

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": "meanwhile"}])
        assert settled == [True]
        items = await s.get_items()
        assert [it.get("content") or it.get("type") for it in items] == ["go", "meanwhile", "function_call", "function_call_output"]
        assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": DONE}

    asyncio.run(go())
    assert len((tmp_path / "effects").read_text().splitlines()) == 1


def test_two_agent_processes_share_a_session(daemon: Any, sid: str, tmp_path: Path) -> None:
    """Two agent processes running turns with durable tools on one session at
    once: every turn of each is in the history, every call with exactly one
    output, its real one (neither process took the other's running call for
    an interrupted one), and each tool ran once per call."""
    env = dict(os.environ, SAVEPOINT_ADDR=daemon.addr)
    procs = [subprocess.Popen([sys.executable, __file__, "share", sid, str(tmp_path), name, "side_effect"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("p", "q")]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    items = asyncio.run(SavepointSession(sid, daemon.addr).get_items())
    calls = [it["call_id"] for it in _calls(items, "function_call")]
    outputs = {it["call_id"]: it["output"] for it in _calls(items, "function_call_output")}
    want = {f"{n}{k}" for n in "pq" for k in range(4)}
    assert sorted(calls) == sorted(want) and outputs.keys() == want
    assert all(outputs[c] == DONE for c in want), outputs
    assert len(_calls(items, "function_call_output")) == len(want)
    assert sorted((tmp_path / "effects").read_text().split()) == sorted(want)


# -- the agent process --------------------------------------------------------


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def _agent(mode: str, sid: str, workdir: str, point: str, effect: str, answer: str = "") -> None:
    from savepoint.aio import AsyncRaw

    def crash(at: str) -> None:
        if at == point:
            _kill()

    async def act(text: str) -> str:
        """Do the thing the report needs."""
        crash("in-tool")
        with open(os.path.join(workdir, "effects"), "a") as f:
            f.write(f"{text} {idempotency_key()}".rstrip() + "\n")
        crash("during")
        return DONE

    def verify(key: str, args: Any) -> Verified:
        with open(os.path.join(workdir, "asked"), "w") as f:
            f.write(f"{key} {json.dumps(args, separators=(',', ':'))}")
        if answer == "raise":
            raise RuntimeError("cannot look")
        return {"done": Verified.done("found: reported"), "not_done": Verified.not_done()}.get(answer, Verified.unknown())

    tool = durable_function_tool(act, effect=effect, verify=verify if answer else None)  # type: ignore[arg-type]

    if point in ("before-begin", "before-record", "after-record"):
        orig_begin, orig_record = AsyncRaw.BeginEffect, AsyncRaw.RecordEffect

        async def begin(self: AsyncRaw, req: Any, timeout: float | None = None) -> Any:
            crash("before-begin")
            return await orig_begin(self, req, timeout)

        async def record(self: AsyncRaw, req: Any, timeout: float | None = None) -> Any:
            crash("before-record")
            r = await orig_record(self, req, timeout)
            crash("after-record")
            return r

        AsyncRaw.BeginEffect, AsyncRaw.RecordEffect = begin, record  # type: ignore[method-assign]
    if point == "before-sdk-save":
        orig_add = SavepointSession.add_items

        async def add(self: SavepointSession, items: list[Any], *, wrapper: Any = None) -> None:
            if any(it.get("type") == "function_call_output" for it in items):
                _kill()
            await orig_add(self, items, wrapper=wrapper)

        SavepointSession.add_items = add  # type: ignore[method-assign]

    session = SavepointSession(sid)
    if mode == "share":  # point is this process's name: four turns, each with one slow call

        async def slow(text: str) -> str:
            """Do the thing slowly."""
            await asyncio.sleep(0.2)
            with open(os.path.join(workdir, "effects"), "a") as f:
                f.write(text + "\n")
            return DONE

        share = durable_function_tool(slow, effect=effect)  # type: ignore[arg-type]
        for k in range(4):
            cid = f"{point}{k}"
            model = ScriptedModel([[function_call("slow", {"text": cid}, call_id=cid)], [assistant_message(f"{cid} done")]])
            await Runner.run(Agent(name="a", model=model, tools=[share]), f"turn {cid}", session=session)
        return
    if mode == "run":
        model = ScriptedModel([[function_call("act", {"text": "report"}, call_id="call_1")], [assistant_message("done")]])
        await Runner.run(Agent(name="a", model=model, tools=[tool]), "go", session=session)
        return
    model = ScriptedModel([[assistant_message("done")]])
    r = await Runner.run(Agent(name="a", model=model, tools=[tool]), [], session=session)
    print(json.dumps({"final_output": r.final_output, "model_input": model.calls[0].input, "items": await session.get_items()}))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(_agent(*sys.argv[1:7]))
