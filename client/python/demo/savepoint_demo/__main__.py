"""python -m savepoint_demo: the seed's agent on Savepoint.

It turns sales-notes.txt into a short report with three tools, read_notes
and count_words (read-only) and write_report (side-effecting),
checkpointing every turn at Point A and Point B in savepointd and recording
every tool's outcome in its ledger. Kill it anywhere, run it again with
--resume, and it finishes without writing the report twice and without
pretending to know what it cannot.

Simulated kills: CRASH_AFTER=LABEL:N[:TOOL] prints "[kill] simulated kill at
LABEL:N" and exits with status 137 at once (os._exit: no cleanup, as with a
real kill). PAUSE_AFTER=LABEL:N[:TOOL] instead waits there for a line on
stdin. Exit status: 0 when the task is complete, 1 on an error, 2 for bad
flags or environment, 137 after a simulated kill.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import savepoint
from savepoint import Client, Decision, EffectClass, Message, Session, SessionStatus, ToolEvent, ToolResult, ToolStage, ToolUse
from savepoint_demo.model import Scripted, script_names, SCRIPTS, text_block
from savepoint_demo.points import LABELS, Point, matches, parse_point
from savepoint_demo.tools import NOTES_FILE, WRITES_FILE, run_tool, sample_notes
from savepoint.types import compact_json

TASK = "Turn sales-notes.txt into a short report and write it to report.txt."
MAX_TURNS = 20


class _AgentError(Exception):
    """An error of the run, with what the agent was doing."""


class Demo:
    """One run of the agent."""

    def __init__(self, out: TextIO, err: TextIO, stdin: TextIO, workdir: str, addr: str, resume: bool,
                 crash: Point | None, pause: Point | None, exit: Callable[[int], None]) -> None:
        self.out, self.err, self.stdin = out, err, stdin
        self.dir, self.addr, self.resume = workdir, addr, resume
        self.crash, self.pause = crash, pause
        self.paused = False
        self.sess: Session | None = None
        self.exit = exit

    def say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def run_agent(self, c: Client, sid: str, script: str, resume: bool) -> str:
        """The seed's runAgent on a Session: start (or resume and reconcile),
        then ask the model, save Point A, run the tools, save Point B, until
        the model answers without naming a tool."""
        run = run_tool(self.dir)
        if resume:
            try:
                s = c.resume(sid)
            except savepoint.SessionNotFoundError as e:
                raise _AgentError(f'session "{sid}" does not exist, run without --resume to start it: {e}') from e
            except savepoint.SavepointError as e:
                raise _AgentError(f'resuming session "{sid}": {e}') from e
            self.sess = s
            pending = s.pending
            self.say(f"[resume] read turn={s.turn} pending={names(pending)}")
            if pending:
                # The hook prints one [resume][reconcile] line per decision,
                # before acting on it.
                try:
                    results = s.reconcile(run)
                except savepoint.SavepointError as e:
                    raise _AgentError(f"turn {s.turn}: reconciling the pending tool uses: {e}") from e
                try:
                    s.point_b(results)
                except savepoint.SavepointError as e:
                    raise _AgentError(f"turn {s.turn}: saving Point B after resume: {e}") from e
                what = "tool results" if len(results) > 1 else "tool result"
                self.say(f"[turn {s.turn}][save B] filled in this turn's {what} after resume")
                self.at("after-save-b", s.turn, "")
            text, done = finished(s.messages)
            if done:
                return text  # it died after saving the final answer
        else:
            self.prepare()
            prompt = compact_json([text_block(TASK)])
            try:
                s = c.start(sid, TASK, messages=[Message(role="user", content_json=prompt)], replace=True)
            except savepoint.SavepointError as e:
                raise _AgentError(f'starting session "{sid}": {e}') from e
            self.sess = s

        # The scripted model continues from the checkpoint's turn.
        model = Scripted.new(script, s.turn)
        while s.turn < MAX_TURNS:
            reply = model.create(s.messages)
            calls = reply.tool_uses()
            if (reply.stop_reason == "tool_use") != bool(calls):
                raise _AgentError(f'model: stop_reason "{reply.stop_reason}" with {len(calls)} tool uses')
            s.add_tokens(reply.tokens)
            # Point A: the assistant message and its tool uses, pending,
            # before any tool runs.
            try:
                s.point_a(reply.message(), calls)
            except savepoint.SavepointError as e:
                raise _AgentError(f"turn {s.turn + 1}: saving Point A: {e}") from e
            turn = s.turn
            if not calls:
                self.at("after-save-a", turn, "")
                return reply.text()
            self.say(f"[turn {turn}][save A] pending={names(calls)}")
            self.at("after-save-a", turn, "")
            # Each tool: BeginEffect unless read-only, run, RecordEffect.
            try:
                results = s.run_tools(calls, run)
            except savepoint.SavepointError as e:
                raise _AgentError(f"turn {turn}: {e}") from e
            # Point B: the results in the history, nothing pending.
            try:
                s.point_b(results)
            except savepoint.SavepointError as e:
                raise _AgentError(f"turn {turn}: saving Point B: {e}") from e
            self.say(f"[turn {turn}][save B]")
            self.at("after-save-b", turn, "")
        raise _AgentError(f"reached the limit of {MAX_TURNS} turns, stopping")

    def complete(self, sid: str, text: str) -> None:
        """Mark the finished session completed with the final answer, as a
        real agent does when its task is done, so that savepoint ls shows it
        completed. Completing an already completed session (a resume after
        the task was done) with the same answer succeeds."""
        assert self.sess is not None
        try:
            self.sess.complete(SessionStatus.COMPLETED, text)
        except savepoint.SavepointError as e:
            raise _AgentError(f'completing session "{sid}": {e}') from e

    def hook(self, ev: ToolEvent) -> None:
        """Print the reconcile decisions and fire the crash points that happen
        inside run_tool and reconcile."""
        turn = self.sess.turn if self.sess is not None else 0
        if ev.stage == ToolStage.DECIDED:
            self.say(f"[resume][reconcile] tool_use_id={ev.call.tool_use_id} name={ev.call.name} {decision_text(ev)}")
        elif ev.stage == ToolStage.BEGUN:
            self.at("after-begin", turn, ev.call.name)
        elif ev.stage == ToolStage.RAN:
            self.at("after-tool", turn, ev.call.name)
        elif ev.stage == ToolStage.RECORDED:
            self.at("after-effect-write", turn, ev.call.name)

    def at(self, label: str, turn: int, tool: str) -> None:
        """A crash (and pause) point."""
        if not self.paused and matches(self.pause, label, turn, tool):
            assert self.pause is not None
            self.paused = True
            self.say(f"[pause] paused at {self.pause.raw}; press Enter to continue")
            self.stdin.readline()
        if matches(self.crash, label, turn, tool):
            assert self.crash is not None
            self.say(f"[kill] simulated kill at {self.crash.raw}")
            self.err.flush()
            self.exit(137)

    def ledger_failed(self, call: ToolUse, _r: ToolResult, err: BaseException) -> None:
        self.err.write(
            f"[ledger write failed] tool_use_id={call.tool_use_id} name={call.name}: the tool ran and its side effect may have happened, "
            f"but its outcome is not recorded; if this run stops before Point B, resume reports it in doubt: {err}\n"
        )
        self.err.flush()

    def fail(self, err: BaseException, sid: str) -> None:
        """Explain an error and what to do next."""
        self.err.write(f"[error] {err}\n")
        addr = self.addr or savepoint.default_addr()
        again = "run again with --resume to continue from the last checkpoint"
        if self.sess is None and not self.resume:
            again = "run again"  # nothing was saved
        cause = err.__cause__ if isinstance(err, _AgentError) else err
        if isinstance(cause, savepoint.UnavailableError):
            self.err.write(f"[error] savepointd at {addr} is unavailable: start it, then {again}\n")
        elif isinstance(cause, savepoint.SessionFencedError):
            self.err.write(f'[error] another process resumed session "{sid}" and owns it now; this one stops\n')
        elif isinstance(cause, savepoint.SessionNotFoundError):
            pass
        else:
            self.err.write(f"[error] {again}\n")
        self.err.flush()

    def prepare(self) -> None:
        """Ready the work directory for a fresh start."""
        os.makedirs(self.dir, exist_ok=True)
        notes = os.path.join(self.dir, NOTES_FILE)
        if not os.path.exists(notes):
            with open(notes, "w", encoding="utf-8") as f:
                f.write(sample_notes())
            self.say(f"[setup] no {NOTES_FILE} in {self.dir}: wrote a sample")
        try:
            os.remove(os.path.join(self.dir, WRITES_FILE))
        except FileNotFoundError:
            pass

    def check(self) -> None:
        """Point at tool uses that ended as is_error (in doubt after a crash,
        or failed), which a person may need to look at."""
        assert self.sess is not None
        tool_names: dict[str, str] = {}
        for m in self.sess.messages:
            for b in content_blocks(m):
                if b.get("type") == "tool_use":
                    tool_names[str(b.get("id", ""))] = str(b.get("name", ""))
                elif b.get("type") == "tool_result" and b.get("is_error") is True:
                    tid = str(b.get("tool_use_id", ""))
                    self.say(f"[check] tool_use_id={tid} name={tool_names.get(tid, '')} ended as is_error (in doubt or failed): check its effect by hand")


def decision_text(ev: ToolEvent) -> str:
    if ev.decision == Decision.REUSE:
        return "ledger hit, reusing result, not re-running"
    if ev.decision == Decision.RUN:
        if ev.call.effect_class == EffectClass.READ_ONLY:
            return "ledger miss, read-only tool, re-running"
        if ev.call.effect_class == EffectClass.IDEMPOTENT:
            return "ledger miss, idempotent tool, re-running with its idempotency key"
        return "ledger miss, side-effecting tool was never started (not begun), running it safely"
    if ev.decision == Decision.IN_DOUBT:
        if ev.begun:
            return "ledger miss with side effects, begun but not recorded: in doubt, not re-running, appending is_error"
        return "ledger miss with side effects, not begin-tracked: in doubt, not re-running, appending is_error"
    return f"unknown decision {int(ev.decision)}"


def content_blocks(m: Message) -> list[dict[str, Any]]:
    """A message's Anthropic content: an array of blocks, or a string (one
    text block)."""
    try:
        v = json.loads(m.content_json)
    except ValueError:
        return []
    if isinstance(v, str):
        return [{"type": "text", "text": v}]
    if isinstance(v, list):
        return [b for b in v if isinstance(b, dict)]
    return []


def finished(msgs: Sequence[Message]) -> tuple[str, bool]:
    """Whether the history ends with the model's final answer (an assistant
    message naming no tool), and its text."""
    if not msgs or msgs[-1].role != "assistant":
        return "", False
    texts = []
    for b in content_blocks(msgs[-1]):
        if b.get("type") == "tool_use":
            return "", False
        if b.get("type") == "text":
            texts.append(str(b.get("text", "")))
    return "\n".join(texts), True


def names(calls: Sequence[ToolUse]) -> str:
    return ",".join(c.name for c in calls) if calls else "none"


class _Parser(argparse.ArgumentParser):
    """argparse writing its errors to the demo's stderr."""

    def __init__(self, stderr: TextIO, **kw: Any) -> None:
        super().__init__(**kw)
        self._stderr = stderr

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(self._stderr)
        self._stderr.write(f"savepoint-demo: {message}\n")
        raise SystemExit(2)


def _exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
         stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None,
         exit: Callable[[int], None] = _exit_now) -> int:
    """Run the demo and return its exit status."""
    env = os.environ if env is None else env
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    p = _Parser(
        stderr,
        prog="savepoint-demo",
        description="Turns sales-notes.txt into report.txt with a scripted model, checkpointed by savepointd. "
        "CRASH_AFTER=LABEL:N[:TOOL] simulates a kill (exit 137); PAUSE_AFTER=LABEL:N[:TOOL] waits for Enter. "
        f"Labels: {', '.join(LABELS)}.",
    )
    p.add_argument("--addr", "-addr", default="", help="savepointd address, unix:PATH or HOST:PORT (default: $SAVEPOINT_ADDR, "
                   "else $XDG_RUNTIME_DIR/savepoint/savepoint.sock, else /run/savepoint/savepoint.sock)")
    p.add_argument("--session", "-session", default="sales-report", help="session id")
    p.add_argument("--resume", "-resume", action="store_true", help="resume the session from its latest checkpoint instead of starting over")
    p.add_argument("--workdir", "-workdir", default=".", help="directory holding sales-notes.txt, report.txt and report.writes")
    p.add_argument("--script", "-script", default="seed", help="scripted model: " + " or ".join(script_names()))
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if a.rest:
        stderr.write(f"savepoint-demo: unexpected arguments {a.rest!r}\n")
        return 2
    if a.script not in SCRIPTS:
        stderr.write(f'savepoint-demo: unknown --script "{a.script}" (have {", ".join(script_names())})\n')
        return 2
    points: dict[str, Point | None] = {}
    for var in ("CRASH_AFTER", "PAUSE_AFTER"):
        try:
            points[var] = parse_point(env.get(var, ""))
        except ValueError as e:
            stderr.write(f"savepoint-demo: {var}={e}\n")
            return 2

    handler = logging.StreamHandler(stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("savepoint_demo.client")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.WARNING)
    logger.propagate = False

    d = Demo(stdout, stderr, stdin, a.workdir, a.addr, a.resume, points["CRASH_AFTER"], points["PAUSE_AFTER"], exit)
    try:
        c = Client(a.addr or None, logger=logger, tool_hook=d.hook, on_ledger_error=d.ledger_failed)
    except (ValueError, OSError) as e:
        stderr.write(f"[error] {e}\n")
        return 2
    with c:
        try:
            text = d.run_agent(c, a.session, a.script, a.resume)
            d.complete(a.session, text)
        except (_AgentError, savepoint.SavepointError, RuntimeError, OSError, ValueError) as e:
            d.fail(e, a.session)
            return 1
        d.say(f"[done] {text}")
        d.check()
    return 0


if __name__ == "__main__":
    sys.exit(main())
