"""SavepointSession against a real savepointd: the coverage of the OpenAI
Agents SDK's own SQLiteSession tests (written anew for this session), with
the SDK's real Runner and its ScriptedModel, then what SQLite cannot give:
two processes sharing one session, and a daemon restart.

Run as a script (``python test_openai_agents_session.py add|pop ...``) this
file is the worker process of the race tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents.memory import Session, SessionSettings
from agents.testing import ScriptedModel, assistant_message

from savepoint import Client, InvalidSessionIdError, MessageTooLargeError, RequestTooLargeError, SavepointError
from savepoint.openai_agents import SavepointSession, SessionClosedError
from savepoint.v1 import savepoint_pb2 as pb

set_tracing_disabled(True)  # no network: the SDK would try to export traces

RUNNERS = ["run", "run_sync", "run_streamed"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def contents(items: list[Any]) -> list[Any]:
    return [it.get("content") for it in items]


async def run_agent(method: str, agent: Agent[Any], input: Any, **kw: Any) -> Any:
    """Runner.run, Runner.run_sync (in a thread with its own loop, as a sync
    caller would) or Runner.run_streamed, consumed to the end."""
    if method == "run":
        return await Runner.run(agent, input, **kw)
    if method == "run_sync":
        return await asyncio.to_thread(Runner.run_sync, agent, input, **kw)
    res = Runner.run_streamed(agent, input, **kw)
    async for _ in res.stream_events():
        pass
    return res


def text_items(model: ScriptedModel) -> list[list[Any]]:
    """The text of each message the model was given, call by call."""
    out = []
    for call in model.calls:
        out.append([it.get("content") if isinstance(it.get("content"), str) else it.get("type", "message") for it in call.input])
    return out


# -- the protocol -------------------------------------------------------------


def test_is_an_sdk_session(daemon: Any, sid: str) -> None:
    s = SavepointSession(sid, daemon.addr)
    assert isinstance(s, Session)
    assert s.session_id == sid
    assert isinstance(s.session_settings, SessionSettings) and s.session_settings.limit is None
    assert SavepointSession(sid, daemon.addr, session_settings=SessionSettings(limit=5)).session_settings.limit == 5  # type: ignore[union-attr]
    assert SavepointSession(sid, daemon.addr, session_settings={"limit": 7}).session_settings.limit == 7  # type: ignore[union-attr]


def test_add_get_clear(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        assert await s.get_items() == []
        await s.add_items([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}])
        got = await s.get_items()
        assert [(it["role"], it["content"]) for it in got] == [("user", "Hello"), ("assistant", "Hi there!")]
        await s.add_items([])  # nothing to save
        await s.clear_session()
        assert await s.get_items() == []
        await s.clear_session()  # clearing an empty session is fine
        await s.add_items([{"role": "user", "content": "again"}])
        assert contents(await s.get_items()) == ["again"]
        await s.close()

    run(go())


def test_pop_item(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        assert await s.pop_item() is None  # no session yet
        await s.add_items([{"role": "user", "content": c} for c in ("Hello", "Hi there!", "How are you?")])
        assert (await s.pop_item()) == {"role": "user", "content": "How are you?"}
        assert contents(await s.get_items()) == ["Hello", "Hi there!"]
        assert (await s.pop_item())["content"] == "Hi there!"  # type: ignore[index]
        assert (await s.pop_item())["content"] == "Hello"  # type: ignore[index]
        assert await s.pop_item() is None
        assert await s.get_items() == []

    run(go())


def test_close_from_sync_code(daemon: Any, sid: str) -> None:
    """close() called without await (as SQLiteSession.close() is) closes the
    session: every method then raises, nothing is written, and no coroutine
    is left unawaited."""
    import gc
    import warnings

    s = SavepointSession(sid, daemon.addr)
    run(s.add_items([{"role": "user", "content": "kept"}]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.close()
        s.close()  # a repeated call is a no-op
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert s.closed

    async def refused() -> None:
        for call in (
            lambda: s.add_items([{"role": "user", "content": "lost"}]),
            lambda: s.add_items([]),  # refused before the empty-list fast path, as SQLiteSession's
            s.get_items,
            s.pop_item,
            s.clear_session,
        ):
            with pytest.raises(SessionClosedError, match="is closed") as e:
                await call()
            assert isinstance(e.value, RuntimeError)  # what a closed SQLiteSession raises
            assert str(e.value).startswith("SavepointSession is closed")  # its class's name, as SQLiteSession's message

    run(refused())
    assert contents(run(SavepointSession(sid, daemon.addr).get_items())) == ["kept"]


def test_close_from_async_code(daemon: Any, sid: str) -> None:
    """close() awaited inside the loop that used the session closes its
    channel before returning, and refuses later writes; called without await
    inside a running loop it closes the channel on that loop."""

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": "a"}])
        ch = s.client()._channel
        await s.close()
        assert ch.get_state() == grpc.ChannelConnectivity.SHUTDOWN
        with pytest.raises(SessionClosedError):
            await s.add_items([{"role": "user", "content": "b"}])

        t = SavepointSession(sid, daemon.addr)
        assert contents(await t.get_items()) == ["a"]
        ch = t.client()._channel
        t.close()  # not awaited: the close runs on this loop
        await asyncio.sleep(0.05)
        assert ch.get_state() == grpc.ChannelConnectivity.SHUTDOWN

    run(go())


def test_sessions_are_separate(daemon: Any, sid: str) -> None:
    async def go() -> None:
        one, two = SavepointSession(sid + ".1", daemon.addr), SavepointSession(sid + ".2", daemon.addr)
        await one.add_items([{"role": "user", "content": "Session 1 message"}])
        await two.add_items([{"role": "user", "content": "Session 2 message 1"}, {"role": "user", "content": "Session 2 message 2"}])
        assert (await two.pop_item())["content"] == "Session 2 message 2"  # type: ignore[index]
        assert contents(await one.get_items()) == ["Session 1 message"]
        assert contents(await two.get_items()) == ["Session 2 message 1"]
        await one.clear_session()
        assert contents(await two.get_items()) == ["Session 2 message 1"]

    run(go())


def test_get_items_limit(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)])
        assert contents(await s.get_items()) == [f"m{i}" for i in range(6)]
        assert contents(await s.get_items(limit=2)) == ["m4", "m5"]
        assert contents(await s.get_items(limit=4)) == ["m2", "m3", "m4", "m5"]
        assert contents(await s.get_items(limit=10)) == [f"m{i}" for i in range(6)]
        assert await s.get_items(limit=0) == []
        # As SQLiteSession (whose LIMIT -1 is SQLite's "no limit"): every item.
        assert contents(await s.get_items(limit=-1)) == [f"m{i}" for i in range(6)]
        assert contents(await SavepointSession(sid, daemon.addr, session_settings=SessionSettings(limit=-3)).get_items()) == [
            f"m{i}" for i in range(6)
        ]

        by_settings = SavepointSession(sid, daemon.addr, session_settings=SessionSettings(limit=3))
        assert contents(await by_settings.get_items()) == ["m3", "m4", "m5"]
        assert contents(await by_settings.get_items(limit=1)) == ["m5"]  # the explicit limit wins

    run(go())


def test_unicode_and_special_characters(daemon: Any, sid: str) -> None:
    texts = ["こんにちは", "😊👍", "Привет", "O'Reilly", "DROP TABLE sessions;", '"SELECT * FROM users WHERE name = "admin";"',
             "Robert'); DROP TABLE students;--", "tab\there\nnewline \\ backslash \u0000 nul"]

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": t} for t in texts])
        assert contents(await SavepointSession(sid, daemon.addr).get_items()) == texts

    run(go())


def test_items_round_trip_whole(daemon: Any, sid: str) -> None:
    """Items other than messages (a function call and its output) come back
    exactly as added, and are stored as messages named by their type."""
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"x\":1}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "1"},
    ]

    async def go() -> None:
        await SavepointSession(sid, daemon.addr).add_items(items)
        assert await SavepointSession(sid, daemon.addr).get_items() == items

    run(go())
    with Client(daemon.addr) as c:
        _, msgs = c.get_session(sid)
    assert [m.role for m in msgs] == ["user", "function_call", "function_call_output"]
    assert [json.loads(m.content_json) for m in msgs] == items


def test_bad_input(daemon: Any) -> None:
    async def go() -> None:
        s = SavepointSession("has space", daemon.addr)
        with pytest.raises(InvalidSessionIdError):
            await s.add_items([{"role": "user", "content": "x"}])
        with pytest.raises(TypeError, match="must be a dict"):
            await SavepointSession("t.bad-item", daemon.addr).add_items(["not an item"])  # type: ignore[list-item]

    run(go())


def test_too_large_stores_nothing(daemon: Any, sid: str) -> None:
    """An item over the daemon's message limit, or a batch over its request
    limit, is refused whole: none of the batch is stored."""

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": "kept"}])
        with pytest.raises(MessageTooLargeError):
            await s.add_items([{"role": "user", "content": "small"}, {"role": "user", "content": "x" * (2 << 20)}])
        with pytest.raises(RequestTooLargeError):
            await s.add_items([{"role": "user", "content": "y" * (3 << 19)} for _ in range(3)])
        assert contents(await s.get_items()) == ["kept"]

    run(go())


# -- with the SDK's Runner ----------------------------------------------------


@pytest.mark.parametrize("method", RUNNERS)
def test_runner_keeps_history(daemon: Any, sid: str, method: str) -> None:
    async def go() -> None:
        model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
        agent = Agent(name="test", model=model)
        s = SavepointSession(sid, daemon.addr)
        r1 = await run_agent(method, agent, "What city is the Golden Gate Bridge in?", session=s)
        assert r1.final_output == "San Francisco"
        r2 = await run_agent(method, agent, "What state is it in?", session=SavepointSession(sid, daemon.addr))
        assert r2.final_output == "California"
        assert text_items(model)[1] == ["What city is the Golden Gate Bridge in?", "message", "What state is it in?"]
        model.assert_complete()
        stored = await s.get_items()
        assert [it.get("role") for it in stored] == ["user", "assistant", "user", "assistant"]

    run(go())


@pytest.mark.parametrize("method", RUNNERS)
def test_runner_separate_sessions(daemon: Any, sid: str, method: str) -> None:
    async def go() -> None:
        model = ScriptedModel([[assistant_message("cats")], [assistant_message("dogs")], [assistant_message("you said cats")]])
        agent = Agent(name="test", model=model)
        await run_agent(method, agent, "I like cats", session=SavepointSession(sid + ".1", daemon.addr))
        await run_agent(method, agent, "I like dogs", session=SavepointSession(sid + ".2", daemon.addr))
        r = await run_agent(method, agent, "What did I say I like?", session=SavepointSession(sid + ".1", daemon.addr))
        assert r.final_output == "you said cats"
        assert text_items(model)[2] == ["I like cats", "message", "What did I say I like?"]

    run(go())


@pytest.mark.parametrize("method", RUNNERS)
def test_runner_list_input_and_callback(daemon: Any, sid: str, method: str) -> None:
    history: list[Any] = [{"role": "user", "content": "Earlier message"}, {"role": "assistant", "content": "Saved reply"}]
    new: list[Any] = [{"role": "user", "content": "Test message"}]

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items(history)
        model = ScriptedModel([[assistant_message("ok")], [assistant_message("ok too")]])
        agent = Agent(name="test", model=model)
        await run_agent(method, agent, new, session=s)
        assert model.calls[0].input == history + new

        def users_only(hist: list[Any], inp: list[Any]) -> list[Any]:
            return [it for it in hist if it.get("role") == "user"] + inp

        await run_agent(method, agent, new, session=s, run_config=RunConfig(session_input_callback=users_only))
        assert contents(model.calls[1].input) == ["Earlier message", "Test message", "Test message"]

    run(go())


def test_runner_session_settings_override(daemon: Any, sid: str) -> None:
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr, session_settings=SessionSettings(limit=100))
        await s.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
        model = ScriptedModel([[assistant_message("Got it")]])
        await Runner.run(Agent(name="test", model=model), "New question", session=s,
                         run_config=RunConfig(session_settings=SessionSettings(limit=2)))
        assert contents(model.calls[0].input) == ["Turn 8", "Turn 9", "New question"]

    run(go())


# -- concurrency --------------------------------------------------------------


def test_concurrent_threads_one_object(daemon: Any, sid: str) -> None:
    """One SavepointSession used from several threads, each with its own
    event loop (the SDK's concurrent-access case): no item is lost."""
    s = SavepointSession(sid, daemon.addr)

    def add(i: int) -> None:
        asyncio.run(s.add_items([{"role": "user", "content": f"Message {i}"}]))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(contents(run(s.get_items()))) == sorted(f"Message {i}" for i in range(10))


def test_concurrent_writers_keep_batches_whole(daemon: Any, sid: str) -> None:
    """Writers that each hold a stale revision: every batch lands whole and
    in its writer's order, and a pop racing them removes exactly one item."""

    async def go() -> None:
        writers = [SavepointSession(sid, daemon.addr) for _ in range(4)]
        await writers[0].add_items([{"role": "user", "content": "first"}])
        for w in writers:
            await w.get_items()  # every writer now caches revision 1

        async def write(w: SavepointSession, n: int) -> None:
            for k in range(5):
                await w.add_items([{"role": "user", "content": f"w{n}.{k}.a"}, {"role": "user", "content": f"w{n}.{k}.b"}])

        await asyncio.gather(*(write(w, n) for n, w in enumerate(writers)))
        got = contents(await writers[0].get_items())
        assert len(got) == 1 + 4 * 5 * 2
        for n in range(4):
            mine = [x for x in got if x.startswith(f"w{n}.")]
            assert mine == [f"w{n}.{k}.{p}" for k in range(5) for p in "ab"]
        for i, x in enumerate(got):
            if x.endswith(".a"):
                assert got[i + 1] == x[:-1] + "b"  # a batch is never split

    run(go())


def test_no_fencing_and_resumed_session(daemon: Any, sid: str) -> None:
    """SavepointSession never resumes: the epoch stays that of the create.
    When something else does resume the session, its writes still land."""

    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": "one"}])
        await s.pop_item()
        await s.add_items([{"role": "user", "content": "two"}])
        with Client(daemon.addr) as c:
            cp, _ = c.get_session(sid)
            assert cp.epoch == 1
            assert c.raw.Resume(pb.ResumeRequest(session_id=sid)).epoch == 2  # a takeover by another tool
        await s.add_items([{"role": "user", "content": "three"}])  # cached epoch 1 is fenced: reload, retry
        assert contents(await s.get_items()) == ["two", "three"]

    run(go())


def test_gives_up_after_max_attempts(daemon: Any, sid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer whose every attempt finds the session changed gives up with
    a clear error after MAX_ATTEMPTS (here 1) instead of looping forever."""
    from savepoint.openai_agents import _session

    async def go() -> None:
        stale = SavepointSession(sid, daemon.addr)
        await stale.add_items([{"role": "user", "content": "one"}])
        await SavepointSession(sid, daemon.addr).add_items([{"role": "user", "content": "two"}])
        monkeypatch.setattr(_session, "MAX_ATTEMPTS", 1)
        with pytest.raises(SavepointError, match="changed under every one of 1 attempts"):
            await stale.add_items([{"role": "user", "content": "three"}])
        monkeypatch.setattr(_session, "MAX_ATTEMPTS", 200)
        await stale.add_items([{"role": "user", "content": "three"}])
        assert contents(await stale.get_items()) == ["one", "two", "three"]
        await stale.close()

    run(go())


def _spawn(daemon: Any, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, SAVEPOINT_ADDR=daemon.addr)
    return subprocess.Popen([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(procs: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"worker exited {p.returncode}:\n{err}"
        outs.append(out)
    return outs


def test_two_processes_append(daemon: Any, sid: str) -> None:
    """Two processes appending to one session at once, 40 batches each:
    every item is there once, each process's items in its own order, no
    process was fenced, and nobody resumed the session."""
    run(SavepointSession(sid, daemon.addr).add_items([{"role": "user", "content": "start"}]))
    procs = [_spawn(daemon, "add", sid, name, "40") for name in ("p", "q")]
    _wait(procs)
    got = contents(run(SavepointSession(sid, daemon.addr).get_items()))
    assert len(got) == 1 + 2 * 40 * 2
    for name in ("p", "q"):
        assert [x for x in got if x.startswith(name)] == [f"{name}{k}.{h}" for k in range(40) for h in "ab"]
    with Client(daemon.addr) as c:
        cp, _ = c.get_session(sid)
    assert cp.epoch == 1 and cp.revision >= 81


def test_two_processes_pop(daemon: Any, sid: str) -> None:
    """Two processes popping one session at once: every item is popped by
    exactly one of them, newest first, and none is left."""
    run(SavepointSession(sid, daemon.addr).add_items([{"role": "user", "content": f"i{k}"} for k in range(60)]))
    outs = _wait([_spawn(daemon, "pop", sid) for _ in range(2)])
    popped = [json.loads(line) for out in outs for line in out.splitlines()]
    assert sorted(popped) == sorted(f"i{k}" for k in range(60))
    for out in outs:
        mine = [int(json.loads(line)[1:]) for line in out.splitlines()]
        assert mine == sorted(mine, reverse=True)
    assert run(SavepointSession(sid, daemon.addr).get_items()) == []


# -- durability ---------------------------------------------------------------


def test_items_survive_daemon_restart(fresh_daemon: Any, sid: str) -> None:
    async def before() -> SavepointSession:
        s = SavepointSession(sid, fresh_daemon.addr)
        await s.add_items([{"role": "user", "content": "kept"}, {"role": "assistant", "content": "also kept"}])
        await s.add_items([{"role": "user", "content": "popped"}])
        assert (await s.pop_item())["content"] == "popped"  # type: ignore[index]
        return s

    s = run(before())
    fresh_daemon.kill()  # SIGKILL: only what was acknowledged can be there
    fresh_daemon.restart()

    async def after() -> None:
        assert contents(await SavepointSession(sid, fresh_daemon.addr).get_items()) == ["kept", "also kept"]
        await s.add_items([{"role": "user", "content": "after"}])  # the old object reconnects
        assert contents(await s.get_items()) == ["kept", "also kept", "after"]

    run(after())


# -- the worker process -------------------------------------------------------


async def _worker(argv: list[str]) -> None:
    s = SavepointSession(argv[1])  # the address from $SAVEPOINT_ADDR
    if argv[0] == "add":
        name, n = argv[2], int(argv[3])
        for k in range(n):
            await s.add_items([{"role": "user", "content": f"{name}{k}.a"}, {"role": "user", "content": f"{name}{k}.b"}])
    elif argv[0] == "pop":
        while (it := await s.pop_item()) is not None:
            print(json.dumps(it["content"]), flush=True)  # type: ignore[index]
    await s.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(_worker(sys.argv[1:]))


@pytest.mark.parametrize("operation", ["add", "pop", "clear"])
def test_cancel_during_a_save_propagates_once_its_outcome_is_known(daemon: Any, sid: str, operation: str) -> None:
    # As SQLiteSession's post-commit cancellation: a cancel that lands while a
    # save is on its way to the daemon raises CancelledError only after the
    # save's outcome is known, and the session goes on from that outcome.
    async def go() -> None:
        s = SavepointSession(sid, daemon.addr)
        await s.add_items([{"role": "user", "content": "kept"}, {"role": "user", "content": "last"}])
        raw = s.client().raw
        real = raw.SaveCheckpoint
        sent, release = asyncio.Event(), asyncio.Event()

        async def slow_save(req: Any, *a: Any, **kw: Any) -> Any:
            sent.set()
            await release.wait()  # the request is on its way: the daemon will make it
            return await real(req, *a, **kw)

        raw.SaveCheckpoint = slow_save
        call = {"add": lambda: s.add_items([{"role": "user", "content": "new"}]), "pop": s.pop_item, "clear": s.clear_session}[operation]
        task = asyncio.create_task(call())
        await sent.wait()
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        assert not task.done()  # waits for the save's outcome
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        raw.SaveCheckpoint = real
        expected = {"add": ["kept", "last", "new"], "pop": ["kept"], "clear": []}[operation]
        assert contents(await s.get_items()) == expected
        await s.add_items([{"role": "user", "content": "after"}])  # the session goes on from the saved revision
        assert contents(await SavepointSession(sid, daemon.addr).get_items()) == [*expected, "after"]
        await s.close()

    run(go())
