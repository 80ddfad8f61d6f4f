"""The seed's agent on Savepoint, in Python: ``python -m savepoint_demo``.

It is cmd/savepoint-demo ported line for line: the same flags (--addr,
--session, --workdir, --resume, --script), the same CRASH_AFTER and
PAUSE_AFTER points (LABEL:N or LABEL:N:TOOL), the same files (report.txt,
report.writes) and the same output lines, so that a session started by one
language's demo can be finished by another's.
"""
