"""savepoint.anthropic's DurableAgent (sync and async) running the seed's
agent against a local fake of the Messages API (fake_anthropic.py), killed
with SIGKILL at every crash moment of every turn and resumed by a new
process: report.txt is written exactly once (never where the tool was begun
and killed before it wrote), IN_DOUBT only where write_report began and was
not recorded, the final transcript passes the fake's pairing check, and the
session is completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import beta_tool
from conftest import Daemon
from fake_anthropic import FINAL, REPORT, UNSURE, Fake, pairing_error

import savepoint
from savepoint import EffectClass, SessionStatus
from savepoint.anthropic import DurableAgent, MaxTurnsError, StopReasonError, durable
from savepoint.v1 import savepoint_pb2 as pb

AGENT = str(Path(__file__).with_name("anthropic_agent.py"))
NOTES = "Closed deals with Acme, Globex and Initech this week."

# Every crash moment of every turn: (CRASH_AT, report.txt writes, in doubt).
MOMENTS = [
    *[(f"before-point-a:{n}", 1, False) for n in (1, 2, 3, 4)],
    *[(f"after-point-a:{n}", 1, False) for n in (1, 2, 3)],
    ("after-point-a:4", 1, False),  # the final answer is saved, the session not completed
    ("after-begin:1", 0, True),  # write_report begun, killed before it wrote
    ("in-tool:1", 1, True),  # killed inside write_report, after its side effect
    *[(f"after-record:{n}", 1, False) for n in (1, 2, 3)],
    *[(f"after-point-b:{n}", 1, False) for n in (1, 2, 3)],
]


@pytest.fixture(scope="module")
def fake() -> Iterator[Fake]:
    f = Fake()
    yield f
    f.close()


def run_agent(daemon: Daemon, fake: Fake, work: Path, sid: str, asyncio: bool, crash: str = "", mode: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CRASH_AT": crash, "AGENT_MODE": mode}
    args = [sys.executable, AGENT, daemon.addr, fake.url, str(work), sid, *(["--async"] if asyncio else [])]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def transcript(daemon: Daemon, sid: str) -> tuple[Any, list[dict[str, Any]]]:
    with savepoint.Client(daemon.addr) as c:
        cp, msgs = c.get_session(sid)
    return cp, [{"role": m.role, "content": json.loads(m.content_json)} for m in msgs]


# Every moment with the sync agent; the async agent at the moments where its
# code differs (the tools, the final answer), each process is a second or more.
# The SDK's tool runner (durable_tool_runner) at the moments around its tools.
SOME = ("after-begin:1", "in-tool:1", "after-record:3", "after-point-a:4", "before-point-a:1")
CASES = ([(*m, False, "") for m in MOMENTS] + [(*m, True, "") for m in MOMENTS if m[0] in SOME]
         + [(*m, False, "runner") for m in MOMENTS if m[0] in (*SOME, "after-point-a:3", "after-point-b:2")]
         + [(*m, True, "runner") for m in MOMENTS if m[0] in ("in-tool:1", "after-record:3", "after-point-a:4")])

# make test's short form: each reconcile branch once with the sync agent
# (nothing saved yet; a read-only call pending, re-run; write_report pending
# and never begun, run; begun and killed before or after its side effect, in
# doubt; recorded, reused; after Point B; the final answer saved, the session
# not completed), and each other mode at its tools. The rest are marked
# crash_matrix and run with --crash-matrix (make crash-matrix).
SHORT = {
    ("", False): ("before-point-a:1", "after-point-a:1", "after-point-a:3", "after-begin:1", "in-tool:1",
                  "after-record:3", "after-point-b:2", "after-point-a:4"),
    ("", True): ("in-tool:1", "after-record:3"),
    ("runner", False): ("after-begin:1", "after-record:3"),
    ("runner", True): ("in-tool:1",),
}


def _case(m: tuple[str, int, bool, bool, str]) -> Any:
    marks = () if m[0] in SHORT[(m[4], m[3])] else (pytest.mark.crash_matrix,)
    return pytest.param(*m, marks=marks, id=f"{m[0]}-{m[4]}{'async' if m[3] else 'sync'}")


@pytest.mark.parametrize(("crash", "writes", "in_doubt", "asyncio", "mode"), [_case(m) for m in CASES])
def test_crash_and_resume(daemon: Daemon, fake: Fake, tmp_path: Path, sid: str, asyncio: bool, mode: str, crash: str, writes: int, in_doubt: bool) -> None:
    (tmp_path / "sales-notes.txt").write_text(NOTES)
    first = run_agent(daemon, fake, tmp_path, sid, asyncio, crash, mode)
    assert first.returncode == -9, first.stdout + first.stderr
    second = run_agent(daemon, fake, tmp_path, sid, asyncio, "", mode)
    assert second.returncode == 0, second.stdout + second.stderr
    report = tmp_path / "report.txt"
    assert (report.read_text().splitlines() if report.exists() else []) == [REPORT] * writes
    cp, msgs = transcript(daemon, sid)
    assert pairing_error(msgs) == ""
    assert cp.status == SessionStatus.COMPLETED and not cp.pending_tool_uses
    result = next(b for m in msgs if m["role"] == "user" for b in m["content"] if isinstance(b, dict) and b.get("tool_use_id") == "toolu_03")
    assert bool(result.get("is_error")) == in_doubt
    assert cp.final_output == (UNSURE if in_doubt else FINAL)
    assert second.stdout.strip().endswith(cp.final_output)
    if crash != "in-tool:1":
        return
    # A third run returns the final answer without calling the model.
    n = len(fake.requests)
    third = run_agent(daemon, fake, tmp_path, sid, asyncio, "", mode)
    assert third.returncode == 0 and third.stdout.strip() == f"[done] {cp.final_output}" and len(fake.requests) == n


def test_crash_during_resume(daemon: Daemon, fake: Fake, tmp_path: Path, sid: str) -> None:
    (tmp_path / "sales-notes.txt").write_text(NOTES)
    assert run_agent(daemon, fake, tmp_path, sid, False, "after-record:3").returncode == -9
    assert run_agent(daemon, fake, tmp_path, sid, True, "resume:1").returncode == -9
    last = run_agent(daemon, fake, tmp_path, sid, False)
    assert last.returncode == 0, last.stderr
    assert (tmp_path / "report.txt").read_text().splitlines() == [REPORT]
    cp, msgs = transcript(daemon, sid)
    assert cp.status == SessionStatus.COMPLETED and cp.final_output == FINAL and pairing_error(msgs) == ""


def test_no_crash_exact_history(daemon: Daemon, fake: Fake, tmp_path: Path, sid: str) -> None:
    """The saved history is what the API returned: no null fields, the
    thinking block with its signature (the fake refuses anything else)."""
    (tmp_path / "sales-notes.txt").write_text(NOTES)
    r = run_agent(daemon, fake, tmp_path, sid, False)
    assert r.returncode == 0, r.stderr
    cp, msgs = transcript(daemon, sid)
    assert msgs[1]["content"][0] == {"type": "thinking", "thinking": "Read the notes first.", "signature": "sig-0"}
    assert "null" not in json.dumps([m["content"] for m in msgs if m["role"] == "assistant"])
    assert cp.tokens_used == 4 * 15 and cp.turn == 4


def test_effect_classes() -> None:
    @beta_tool
    def plain(x: str) -> str:
        """Do."""
        return x

    agent = DurableAgent(
        anthropic.Anthropic(api_key="x"), "s",
        tools=[plain, durable(effect="read_only")(beta_tool(lambda y: y, name="ro", description="d")),
               durable({"name": "idem", "input_schema": {"type": "object"}}, function=lambda i: "ok", effect="idempotent"),
               {"name": "mcp", "input_schema": {"type": "object"}, "function": lambda i: "", "annotations": {"readOnlyHint": True}}],
        trust_mcp_annotations=True,
    )
    assert {n: t.effect for n, t in agent.tools.items()} == {
        "plain": EffectClass.SIDE_EFFECT, "ro": EffectClass.READ_ONLY, "idem": EffectClass.IDEMPOTENT, "mcp": EffectClass.READ_ONLY,
    }
    untrusted = DurableAgent(anthropic.Anthropic(api_key="x"), "s", tools=[{"name": "mcp", "input_schema": {}, "function": print, "annotations": {"readOnlyHint": True}}])
    assert untrusted.tools["mcp"].effect == EffectClass.SIDE_EFFECT
    with pytest.raises(ValueError, match="effect must be one of"):
        durable(effect="sometimes")
    with pytest.raises(ValueError, match="two tools"):
        DurableAgent(anthropic.Anthropic(api_key="x"), "s", tools=[plain, plain])


class Scripted:
    """A stand-in for client.messages: hands out replies in order and keeps
    each create's parameters."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []
        self.messages = self
        self.beta = self

    def create(self, **kw: Any) -> Any:
        self.calls.append(kw)
        r = self.replies.pop(0)
        return anthropic.types.beta.BetaMessage.model_validate(
            {"id": "m", "type": "message", "role": "assistant", "model": "x", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 2}, **r}
        )


def test_params_pass_through_and_stop_reasons(daemon: Daemon, sid: str) -> None:
    pause = {"content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}], "stop_reason": "pause_turn"}
    cut = {"content": [{"type": "text", "text": "The rep"}], "stop_reason": "max_tokens"}
    done = {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    model = Scripted(pause, cut, done)
    with savepoint.Client(daemon.addr) as sp:
        agent = DurableAgent(model, sid, savepoint=sp)
        params = {"model": "m", "max_tokens": 5, "system": "be brief", "tool_choice": {"type": "auto"}, "metadata": {"user_id": "u"},
                  "thinking": {"type": "enabled", "budget_tokens": 1024}, "betas": ["b1"]}
        with pytest.raises(StopReasonError, match="cut off") as e:
            agent.run("go", **params)
        assert e.value.stop_reason == "max_tokens"
        # pause_turn saved and sent back; the cut-off reply not saved.
        assert [m["role"] for m in model.calls[1]["messages"]] == ["user", "assistant"]
        assert agent.run("go", **params) == "done"
        assert all({k: c[k] for k in params} == params for c in model.calls)
        assert model.calls[2]["messages"][1]["content"] == pause["content"]
        assert (agent.usage.input_tokens, agent.usage.output_tokens) == (3, 6)  # three replies
        with pytest.raises(TypeError, match="messages"):
            agent.run("go", messages=[])


def test_max_turns(daemon: Daemon, sid: str) -> None:
    loop = {"content": [{"type": "tool_use", "id": "toolu_x", "name": "again", "input": {}}], "stop_reason": "tool_use"}
    model = Scripted(loop, {**loop, "content": [{**loop["content"][0], "id": "toolu_y"}]})
    with savepoint.Client(daemon.addr) as sp:
        agent = DurableAgent(model, sid, savepoint=sp, max_turns=2, tools=[{"name": "again", "input_schema": {}, "function": lambda i: "ok"}])
        with pytest.raises(MaxTurnsError):
            agent.run("go", model="m", max_tokens=5)
        s = sp.resume(sid)
        assert s.status == SessionStatus.ACTIVE and s.turn == 2 and not s.pending


def test_history_ending_in_final_answer_completes(daemon: Daemon, sid: str) -> None:
    with savepoint.Client(daemon.addr) as sp:
        s = sp.start(sid, "t", messages=[savepoint.Message("user", '"go"')])
        s.point_a(savepoint.Message("assistant", '[{"type":"text","text":"all done"}]'))
        model = Scripted()
        assert DurableAgent(model, sid, savepoint=sp).run("go", model="m", max_tokens=5) == "all done"
        assert model.calls == []
        assert sp.resume(sid).status == SessionStatus.COMPLETED


TS_AGENT = Path(__file__).resolve().parents[2] / "anthropic/dist/tests/agent.js"


@pytest.mark.parametrize("first_lang", ["python", "typescript"])
def test_cross_language_resume(daemon: Daemon, fake: Fake, tmp_path: Path, sid: str, first_lang: str) -> None:
    """A session started by one language's DurableAgent, killed inside
    write_report after RecordEffect, is finished by the other's: REUSE, no
    second write, one history both sides read the same."""
    if not TS_AGENT.is_file():
        pytest.fail(f"{TS_AGENT} is not built: run make clients-anthropic")
    (tmp_path / "sales-notes.txt").write_text(NOTES)

    def run(lang: str, crash: str = "") -> subprocess.CompletedProcess[str]:
        if lang == "python":
            return run_agent(daemon, fake, tmp_path, sid, False, crash)
        return subprocess.run(["node", str(TS_AGENT), daemon.addr, fake.url, str(tmp_path), sid],
                              env={**os.environ, "CRASH_AT": crash}, capture_output=True, text=True, timeout=60)

    assert run(first_lang, "after-record:3").returncode == -9
    second = run("typescript" if first_lang == "python" else "python")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (tmp_path / "report.txt").read_text().splitlines() == [REPORT]
    cp, msgs = transcript(daemon, sid)
    assert cp.status == SessionStatus.COMPLETED and cp.final_output == FINAL and pairing_error(msgs) == ""


def test_tool_runner_refusals() -> None:
    from savepoint.anthropic import durable_tool_runner

    client = anthropic.Anthropic(api_key="x")
    base: dict[str, Any] = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "go"}], "tools": []}
    with pytest.raises(TypeError, match="refuses run_tools_eagerly"):
        durable_tool_runner(client, "s", run_tools_eagerly=True, stream=True, **base)
    with pytest.raises(TypeError, match="refuses stream"):
        durable_tool_runner(client, "s", stream=True, **base)
    with pytest.raises(TypeError, match="thread=False"):
        durable_tool_runner(client, "s", thread=None, **base)


def test_refusal_fails_the_session(daemon: Daemon, sid: str) -> None:
    from savepoint.anthropic import RefusalError, SessionFailedError

    model = Scripted({"content": [{"type": "text", "text": "I can't help with that."}], "stop_reason": "refusal"})
    with savepoint.Client(daemon.addr) as sp:
        agent = DurableAgent(model, sid, savepoint=sp)
        with pytest.raises(RefusalError, match="can't help"):
            agent.run("go", model="m", max_tokens=5)
        s = sp.resume(sid)
        assert s.status == SessionStatus.FAILED and s.final_output == "I can't help with that." and len(s.messages) == 1
        with pytest.raises(SessionFailedError):
            agent.run("go", model="m", max_tokens=5)
        assert len(model.calls) == 1


def test_every_tool_use_of_a_reply_is_pending_before_any_runs(daemon: Daemon, sid: str) -> None:
    two = {"content": [{"type": "tool_use", "id": "toolu_a", "name": "look", "input": {"q": 1}},
                       {"type": "tool_use", "id": "toolu_b", "name": "send", "input": {"to": "x"}}], "stop_reason": "tool_use"}
    model = Scripted(two, {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"})
    seen: list[list[str]] = []
    with savepoint.Client(daemon.addr) as sp:

        def look(inp: dict[str, Any]) -> str:
            cp, _ = sp.get_session(sid)
            seen.append([p.tool_use_id for p in cp.pending_tool_uses])
            return "looked"

        tools = [durable({"name": "look", "input_schema": {"type": "object"}}, function=look, effect="read_only"),
                 {"name": "send", "input_schema": {"type": "object"}, "function": lambda inp: [{"type": "text", "text": "sent"}]}]
        assert DurableAgent(model, sid, savepoint=sp, tools=tools).run("go", model="m", max_tokens=5) == "done"
        assert seen == [["toolu_a", "toolu_b"]]
        results = model.calls[1]["messages"][-1]["content"]
        assert results == [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "looked"},
                           {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "sent"}]}]
        assert [p.effect_class for p in sp.raw.ListEffects(pb.ListEffectsRequest(session_id=sid)).entries] == [
            EffectClass.READ_ONLY, EffectClass.SIDE_EFFECT]
