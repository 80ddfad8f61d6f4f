"""The crash matrix of cmd/savepoint-demo/matrix_test.go, run for the Python
demo: killed at every crash point of every turn of both scripts (and during
some resumes), resumed against one real savepointd. Each case must make the
decisions and the number of report writes that the Go matrix's golden table
(cmd/savepoint-demo/testdata/crash-matrix.txt) records, finish with the
uncrashed history (an is_error result exactly where a side-effecting call was
in doubt), and answer every tool_use with exactly one tool_result."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, Daemon
from demo_helpers import PY_DEMO, check_pairing, compare_history, count_writes, history, run_demo, workdir

from savepoint import EffectClass
from savepoint_demo.__main__ import content_blocks, finished
from savepoint_demo.model import FINAL_ANSWER, SCRIPTS
from savepoint_demo.points import LABELS
from savepoint.types import Message

GOLDEN = REPO / "cmd" / "savepoint-demo" / "testdata" / "crash-matrix.txt"
RECONCILE_LINE = re.compile(r"^\[resume\]\[reconcile\] tool_use_id=(\S+) name=(\S+) (.*)$")


@dataclass
class Row:
    """One row of the matrix table."""

    script: str
    crashes: list[str]
    decision: str  # per resume, " -> " between resumes; "n/a: why" for a point that cannot fire
    writes: int
    passed: str  # "ok", "n/a (did not fire)" or "FAIL"
    problems: list[str] = field(default_factory=list)

    def key(self) -> tuple[str, str]:
        return self.script, " -> ".join(self.crashes)

    def line(self) -> tuple[str, str, str, int, str]:
        return self.script, " -> ".join(self.crashes), self.decision, self.writes, self.passed


def golden() -> list[Row]:
    rows = []
    for line in GOLDEN.read_text().splitlines()[1:]:
        script, crashes, decision, writes, passed = re.split(r"\s{2,}", line.strip())
        rows.append(Row(script, crashes.split(" -> "), decision, int(writes), passed))
    return rows


def single_crash_cases(script: str) -> list[tuple[str, str]]:
    """Every label at every turn, as matrix_test.go's matrixCases lists them:
    (CRASH_AFTER, why it cannot fire or "")."""
    out = []
    for i, reply in enumerate(SCRIPTS[script]):
        turn, calls = i + 1, reply.tool_uses()
        for label in LABELS:
            spec = f"{label}:{turn}"
            if label == "after-save-a":
                out.append((spec, ""))
            elif not calls:
                out.append((spec, f"turn {turn} is the final answer: no tool runs, no Point B"))
            elif label == "after-save-b":
                out.append((spec, ""))
            elif len(calls) == 1:
                ro = label == "after-begin" and calls[0].effect_class == EffectClass.READ_ONLY
                out.append((spec, f"{calls[0].name} is read-only: never begun" if ro else ""))
            else:
                for c in calls:
                    ro = label == "after-begin" and c.effect_class == EffectClass.READ_ONLY
                    out.append((f"{spec}:{c.name}", f"{c.name} is read-only: never begun" if ro else ""))
    return out


def decisions(stdout: str) -> list[str]:
    """What a resumed run printed about its pending tool uses, short, as
    matrix_test.go's decisions()."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("[resume] read ") and line.endswith(" pending=none"):
            out.append("nothing pending")
        m = RECONCILE_LINE.match(line)
        if not m:
            continue
        text = m.group(3)
        d = "?" + text
        if text.startswith("ledger hit, reusing result, not re-running"):
            d = "REUSE"
        elif text.startswith("ledger miss, read-only tool, re-running"):
            d = "RUN(read-only)"
        elif "never started" in text:
            d = "RUN(never begun)"
        elif "in doubt" in text and text.endswith("appending is_error"):
            d = "IN_DOUBT"
        out.append(f"{m.group(2)}={d}")
    return out


def tool_ids(script: str) -> dict[str, str]:
    return {c.name: c.tool_use_id for r in SCRIPTS[script] for c in r.tool_uses()}


def play(addr: str, tmp: Path, want: Row, base: dict[str, list]) -> Row:  # type: ignore[type-arg]
    """Run one case with the Python demo; return the row it makes."""
    na = want.decision.startswith("n/a: ")
    sid = "py.m." + want.script + "." + ".then.".join(want.crashes)
    wd = workdir(tmp, sid)
    got = Row(want.script, want.crashes, want.decision if na else "", 0, "ok")
    runs = 1 if na else len(want.crashes) + 1
    seen: list[str] = []
    in_doubt: set[str] = set()
    for i in range(runs):
        crash = want.crashes[i] if i < len(want.crashes) else ""
        r = run_demo(PY_DEMO, addr, wd, sid, want.script, resume=i > 0, crash=crash)
        if i > 0:
            ds = decisions(r.stdout)
            seen.append(", ".join(ds))
            in_doubt |= {tool_ids(want.script)[d.split("=")[0]] for d in ds if d.endswith("=IN_DOUBT")}
        if i < runs - 1:
            if r.code != 137 or not r.stdout.endswith(f"[kill] simulated kill at {crash}\n"):
                got.problems.append(f"run {i + 1}: want it killed at {crash}\n{r}")
                break
            continue
        if r.code != 0 or f"[done] {FINAL_ANSWER}\n" not in r.stdout:
            got.problems.append(f"run {i + 1} did not finish\n{r}")
        if na and "[kill]" in r.stdout:
            got.problems.append(f"not applicable, yet it fired\n{r}")
    if not na:
        got.decision = " -> ".join(seen)
    elif not got.problems:
        got.passed = "n/a (did not fire)"
    got.writes = count_writes(wd)
    if got.writes > 1 or (got.writes == 0 and not in_doubt):
        got.problems.append(f"report written {got.writes} times (at most once, exactly once unless in doubt)")
    cp, msgs = history(addr, sid)
    if cp.pending_tool_uses:
        got.problems.append(f"finished with pending tool uses {list(cp.pending_tool_uses)}")
    text, done = finished([Message(m.role, m.content_json) for m in msgs])
    if not done or text != FINAL_ANSWER:
        got.problems.append("the history does not end with the final answer")
    got.problems += check_pairing(msgs)
    got.problems += compare_history(base[want.script], msgs, in_doubt)
    if got.problems:
        got.passed = "FAIL"
    return got


def test_crash_matrix(daemon: Daemon, tmp_path: Path) -> None:
    rows = golden()
    # The matrix covers every label at every turn, as the Go matrix does.
    for script in SCRIPTS:
        listed = [r.crashes[0] for r in rows if r.script == script and len(r.crashes) == 1]
        assert listed == [spec for spec, _ in single_crash_cases(script)], f"{script}: the golden rows are not every label x turn"
        for spec, na in single_crash_cases(script):
            row = next(r for r in rows if r.key() == (script, spec))
            assert (row.decision == "n/a: " + na) if na else not row.decision.startswith("n/a"), row
    assert any(len(r.crashes) > 1 for r in rows), "no chained crashes"

    base = {}
    for script in SCRIPTS:
        wd = workdir(tmp_path, "base." + script)
        r = run_demo(PY_DEMO, daemon.addr, wd, "py.m.base." + script, script)
        assert r.code == 0 and count_writes(wd) == 1, r
        base[script] = history(daemon.addr, "py.m.base." + script)[1]
        assert check_pairing(base[script]) == []

    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda row: play(daemon.addr, tmp_path, row, base), rows))
    problems = [f"{g.script} {' -> '.join(g.crashes)}:\n  " + "\n  ".join(g.problems) for g in got if g.problems]
    differ = [f"{g.line()} != golden {w.line()}" for g, w in zip(got, rows) if g.line() != w.line()]
    assert not problems and not differ, "\n".join(problems + differ)
    assert len(got) == len(rows) >= 48
    # The in-doubt rows really answered with an is_error result.
    assert any("IN_DOUBT" in g.decision for g in got)
    assert all(b.get("type") for m in base["seed"] for b in content_blocks(Message(m.role, m.content_json)))
