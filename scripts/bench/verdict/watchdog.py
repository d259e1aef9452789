"""The verdict's watchdog (procs.py): kills the stage process groups the verdict left
running when it ended without stopping them (kill -9, which no handler sees).

It reads lines "+PGID" (a stage's group started) and "-PGID" (ended) on stdin, a pipe
only the verdict holds open; at end of input, the verdict has ended, however it did,
and every group still listed is killed. It runs in a session of its own, so a signal to
the verdict's process group does not take it along."""
import os
import signal
import sys

groups = set()
for line in sys.stdin:
    if line[:1] in ("+", "-") and line[1:].strip().isdigit():
        (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
