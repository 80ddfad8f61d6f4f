"""python -m savepoint_demo against a real savepointd: the seed's transcript,
line for line equal to the Go demo's for the same runs, a real kill -9, a
daemon killed under it, and sessions handed between the two languages."""

from __future__ import annotations

import io
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, Daemon
from demo_helpers import PY_DEMO, check_pairing, count_writes, history, run_demo, workdir

import savepoint
from savepoint import Decision
from savepoint_demo.__main__ import main
from savepoint_demo.model import FINAL_ANSWER, REPORT_TEXT, SCRIPTS
from savepoint_demo.points import parse_point
from savepoint_demo.tools import run_tool, sample_notes
from savepoint.v1 import savepoint_pb2 as pb


def test_seed_transcript(daemon: Daemon, tmp_path: Path) -> None:
    wd = workdir(tmp_path)
    r = run_demo(PY_DEMO, daemon.addr, wd, "py.seed-transcript", crash="after-effect-write:3")
    assert (r.code, r.stdout) == (137, (
        "[turn 1][save A] pending=read_notes\n"
        "[turn 1][save B]\n"
        "[turn 2][save A] pending=count_words\n"
        "[turn 2][save B]\n"
        "[turn 3][save A] pending=write_report\n"
        "[kill] simulated kill at after-effect-write:3\n"
    )), r
    r = run_demo(PY_DEMO, daemon.addr, wd, "py.seed-transcript", resume=True)
    assert (r.code, r.stdout) == (0, (
        "[resume] read turn=3 pending=write_report\n"
        "[resume][reconcile] tool_use_id=toolu_03 name=write_report ledger hit, reusing result, not re-running\n"
        "[turn 3][save B] filled in this turn's tool result after resume\n"
        f"[done] {FINAL_ANSWER}\n"
    )), r
    assert count_writes(wd) == 1
    assert (wd / "report.txt").read_text() == REPORT_TEXT
    check_completed(daemon.addr, "py.seed-transcript")
    # A fresh run over the completed session replaces it, and completes the new one.
    r = run_demo(PY_DEMO, daemon.addr, wd, "py.seed-transcript")
    assert r.code == 0 and r.stdout.startswith("[turn 1][save A]"), r
    check_completed(daemon.addr, "py.seed-transcript")


def check_completed(addr: str, sid: str) -> None:
    """The session is completed with the final answer, as savepoint ls shows it."""
    cp, _ = history(addr, sid)
    assert (cp.status, cp.final_output) == (pb.SESSION_STATUS_COMPLETED, FINAL_ANSWER), cp


# Each scenario: the CRASH_AFTER of the first (fresh) run, then of each
# resume ("" for a run that finishes).
SCENARIOS = [
    ("seed", ["after-effect-write:3", ""]),
    ("seed", ["after-tool:3", ""]),
    ("seed", ["after-begin:3", ""]),
    ("seed", ["after-save-a:3", "after-begin:3", ""]),
    ("seed", ["after-tool:1", ""]),
    ("seed", ["after-save-b:4", "", ""]),  # not applicable, then a resume of a finished session
    ("parallel", ["after-begin:2:write_report", ""]),
    ("parallel", ["after-tool:2:count_words", "after-begin:2", ""]),
    ("parallel", ["after-effect-write:2:write_report", ""]),
]


@pytest.mark.parametrize(("script", "crashes"), SCENARIOS, ids=[f"{s}-{'-then-'.join(c[:-1]) or 'none'}" for s, c in SCENARIOS])
def test_transcript_equals_go_demo(daemon: Daemon, binaries: tuple[str, str], tmp_path: Path, script: str, crashes: list[str]) -> None:
    out = {}
    for lang, cmd in (("go", [binaries[1]]), ("py", PY_DEMO)):
        base = tmp_path / lang
        base.mkdir()
        sid = f"cmp.{lang}.{script}.{'.'.join(c for c in crashes if c)}"
        # A relative work directory without notes, so that the [setup] line
        # is the same for both.
        runs = [run_demo(cmd, daemon.addr, Path("w"), sid, script, resume=i > 0, crash=c, cwd=base) for i, c in enumerate(crashes)]
        _, msgs = history(daemon.addr, sid)
        out[lang] = (runs, [(m.role, m.content_json) for m in msgs], count_writes(base / "w"), (base / "w" / "report.txt").read_text()
                     if (base / "w" / "report.txt").exists() else None)
    for i, (g, p) in enumerate(zip(out["go"][0], out["py"][0])):
        assert (p.code, p.stdout.splitlines()) == (g.code, g.stdout.splitlines()), f"run {i + 1}:\ngo: {g}\npy: {p}"
    assert out["py"][1] == out["go"][1], "the histories differ"
    assert out["py"][2:] == out["go"][2:], "report.writes or report.txt differ"


def test_seed_lines_and_missing_session(daemon: Daemon, tmp_path: Path) -> None:
    r = run_demo(PY_DEMO, daemon.addr, workdir(tmp_path), "py.never-started", resume=True)
    assert r.code == 1 and 'session "py.never-started" does not exist, run without --resume to start it' in r.stderr, r


@pytest.mark.parametrize(
    ("args", "env", "want"),
    [
        ([], {"CRASH_AFTER": "after-lunch:1"}, 'unknown label "after-lunch"'),
        ([], {"CRASH_AFTER": "after-tool"}, "want LABEL:N or LABEL:N:TOOL"),
        ([], {"CRASH_AFTER": "after-tool:0"}, "the turn must be a number from 1"),
        ([], {"CRASH_AFTER": "after-tool:1:"}, "empty tool name"),
        ([], {"PAUSE_AFTER": "after-tool:x"}, "PAUSE_AFTER"),
        (["--script", "poem"], {}, 'unknown --script "poem"'),
        (["resume"], {}, "unexpected arguments"),
        (["--addr", "nonsense"], {}, "neither unix:PATH nor HOST:PORT"),
        (["--frobnicate"], {}, "unrecognized arguments"),
    ],
)
def test_bad_invocations(args: list[str], env: dict[str, str], want: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, env, io.StringIO(), out, err)
    assert code == 2 and want in err.getvalue(), (code, err.getvalue())


def test_help() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["--help"], {}, io.StringIO(), out, err) == 0


def test_points_and_tools(tmp_path: Path) -> None:
    p = parse_point("after-tool:2:write_report")
    assert p is not None and p.matches("after-tool", 2, "write_report")
    assert not p.matches("after-tool", 2, "count_words") and not p.matches("after-tool", 3, "write_report")
    q = parse_point("after-tool:2")
    assert q is not None and q.matches("after-tool", 2, "count_words") and not q.matches("after-begin", 2, "x")
    assert parse_point("") is None
    # The sample notes are the Go demo's one copy (the package's
    # sales-notes.txt links to cmd/savepoint-demo's and the build copies it
    # in), and the scripted report states what count_words finds in them.
    go_notes = REPO / "cmd" / "savepoint-demo" / "sales-notes.txt"
    assert sample_notes() == go_notes.read_text()
    packaged = REPO / "client" / "python" / "demo" / "savepoint_demo" / "sales-notes.txt"
    assert packaged.is_symlink() and packaged.resolve() == go_notes.resolve()
    wd = workdir(tmp_path)
    run = run_tool(str(wd))
    out = run(savepoint.ToolUse("x", "count_words", '{"file":"sales-notes.txt"}'), "")
    assert out + "." in REPORT_TEXT
    for bad in ('{"file":"../x"}', '{"file":"a/b"}', '{"file":""}', '{"file":".."}'):
        with pytest.raises(ValueError):
            run(savepoint.ToolUse("x", "read_notes", bad), "")
    with pytest.raises(ValueError):
        run(savepoint.ToolUse("x", "rm_rf", "{}"), "")
    for name, replies in SCRIPTS.items():
        assert replies[-1].stop_reason == "end_turn" and replies[-1].text() == FINAL_ANSWER, name


def test_kill_9_and_resume_with_a_ledger_hit(daemon: Daemon, tmp_path: Path) -> None:
    """The demo paused after the ledger write of turn 3 is killed with
    SIGKILL; a resume reuses the recorded write instead of writing again."""
    wd = workdir(tmp_path)
    sid = "py.kill-9"
    env = {**os.environ, "CRASH_AFTER": "", "PAUSE_AFTER": "after-effect-write:3"}
    p = subprocess.Popen([*PY_DEMO, "--addr", daemon.addr, "--workdir", str(wd), "--session", sid],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("[pause] "):
            break
    os.kill(p.pid, signal.SIGKILL)
    assert p.wait(10) == -signal.SIGKILL, lines
    assert lines[-1] == "[pause] paused at after-effect-write:3; press Enter to continue\n"
    assert count_writes(wd) == 1

    decided: list[tuple[str, Decision]] = []
    with savepoint.Client(daemon.addr, tool_hook=lambda ev: decided.append((ev.call.name, ev.decision))) as c:
        s = c.resume(sid)
        ran: list[str] = []
        results = s.reconcile(lambda call, key: ran.append(call.tool_use_id) or "ran again")  # type: ignore[func-returns-value]
        assert decided == [("write_report", Decision.REUSE)] and ran == []
        assert results[0].content == f"Wrote {len(REPORT_TEXT)} bytes to report.txt"
    r = run_demo(PY_DEMO, daemon.addr, wd, sid, resume=True)
    assert r.code == 0 and "ledger hit, reusing result, not re-running" in r.stdout and count_writes(wd) == 1, r


@pytest.mark.parametrize(
    ("pause", "stderr", "writes", "decision"),
    [
        ("after-save-a:3", ['not run: BeginEffect:', "is unavailable: start it, then run again with --resume"], 0,
         "ledger miss, side-effecting tool was never started (not begun), running it safely"),
        ("after-tool:3", ["[ledger write failed] tool_use_id=toolu_03 name=write_report", "[error] turn 3: saving Point B:",
                          "is unavailable: start it, then run again with --resume"], 1,
         "begun but not recorded: in doubt, not re-running, appending is_error"),
    ],
)
def test_daemon_killed_mid_run(fresh_daemon: Daemon, tmp_path: Path, pause: str, stderr: list[str], writes: int, decision: str) -> None:
    wd = workdir(tmp_path)
    env = {**os.environ, "CRASH_AFTER": "", "PAUSE_AFTER": pause}
    p = subprocess.Popen([*PY_DEMO, "--addr", fresh_daemon.addr, "--workdir", str(wd), "--session", "daemon-killed"],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    for line in p.stdout:
        if line.startswith("[pause] "):
            break
    fresh_daemon.kill()
    out, err = p.communicate("\n", timeout=60)
    assert p.returncode == 1, (out, err)
    for want in stderr:
        assert want in err, err
    assert "[done]" not in out and count_writes(wd) == writes
    fresh_daemon.restart()
    r = run_demo(PY_DEMO, fresh_daemon.addr, wd, "daemon-killed", resume=True)
    assert r.code == 0 and decision in r.stdout and count_writes(wd) == 1, r
    _, msgs = history(fresh_daemon.addr, "daemon-killed")
    assert check_pairing(msgs) == []


@pytest.mark.parametrize("first,second", [("py", "ts"), ("ts", "go"), ("go", "py"), ("py", "go"), ("go", "ts"), ("ts", "py")])
def test_session_handed_between_languages(daemon: Daemon, binaries: tuple[str, str], ts_demo: list[str], tmp_path: Path,
                                          first: str, second: str) -> None:
    """Started by one language's demo (Python, TypeScript or Go), killed at
    after-effect-write:3 (and, in another session, at after-tool:3), finished
    by another's: the report is written once and the history is the uncrashed
    run's."""
    cmds = {"py": PY_DEMO, "go": [binaries[1]], "ts": ts_demo}
    base_wd = workdir(tmp_path, "base")
    assert run_demo(cmds[first], daemon.addr, base_wd, f"x.base.{first}").code == 0
    _, base = history(daemon.addr, f"x.base.{first}")
    for crash, want, in_doubt in (("after-effect-write:3", "ledger hit", False), ("after-tool:3", "in doubt", True)):
        sid = f"x.{first}.{second}.{crash}"
        wd = workdir(tmp_path, sid)
        assert run_demo(cmds[first], daemon.addr, wd, sid, crash=crash).code == 137
        r = run_demo(cmds[second], daemon.addr, wd, sid, resume=True)
        assert r.code == 0 and want in r.stdout and f"[done] {FINAL_ANSWER}" in r.stdout, r
        assert count_writes(wd) == 1
        if second != "ts":  # the TypeScript demo does not complete its session yet
            check_completed(daemon.addr, sid)
        _, msgs = history(daemon.addr, sid)
        assert check_pairing(msgs) == []
        if not in_doubt:
            assert [(m.role, m.content_json) for m in msgs] == [(m.role, m.content_json) for m in base]
        else:
            assert len(msgs) == len(base) and msgs[-1] == base[-1]
