"""Stage processes: each stage's command in a process group of its own, none outliving
the verdict.

A stage's command may start processes of its own (xsagpt sweep its trainings, cmake its
compilers, torch.compile its workers), so a stage is stopped whole, by its group: at its
time limit, when it ends (whatever it left behind), and when the verdict is stopped.

- SIGTERM, SIGINT or SIGHUP to the verdict (`timeout ... bench_gpu.sh lease`, Ctrl-C): the
  handler kills every running stage's group, no stage starts after it, the stopped stages
  are recorded `pending`, and the call ends with its table and bundle, exit 128 + the
  signal's number. A second signal ends it at once.
- kill -9 of the verdict, which no handler sees: a watchdog, a process in a session of
  its own started with the first stage, is told each group as it starts and ends through
  a pipe; when the pipe closes (the verdict has ended, however) it kills the groups still
  listed. The stopped stage keeps in stages.json what its last finished run left (never
  a new "done").
Not covered: a group started in the microseconds between its fork and its listing, a
process that leaves its stage's group (setsid), and kill -9 of the watchdog itself.

Not PR_SET_PDEATHSIG: it needs preexec_fn, unsafe in a process with threads (the lease
runs stages in threads); it fires when the spawning thread ends, not the process; and it
reaches the direct child only, not the processes that child starts."""
import os
import pathlib
import signal
import subprocess
import sys
import threading

WATCHDOG = pathlib.Path(__file__).resolve().with_name("watchdog.py")
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(Exception):
    """The verdict was told to stop by a signal; the stage's processes are killed."""


class Processes:
    def __init__(self):
        self.groups: set[int] = set()
        self.signum = 0  # the signal that stopped the verdict, once one has
        self._watchdog = None
        self._lock = threading.Lock()  # stages run in threads: one writer to the watchdog at a time

    @property
    def stopping(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def stop_on_signals(self) -> None:
        """Installs the handler (from the main thread, as Python requires)."""
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        # No printing here: the main thread may be inside a print (a reentrant write raises).
        if self.signum:
            self._kill_all()
            os._exit(128 + signum)
        self.signum = signum
        self._kill_all()

    def check(self) -> None:
        if self.signum:
            raise Stopped(f"stopped: this call got {self.stopping}")

    def run(self, cmd: list, timeout: float, cwd, env: dict) -> subprocess.CompletedProcess:
        """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout) in a group
        of its own, killed at the timeout (TimeoutExpired with the output so far, as
        subprocess.run raises it) and when the command ends; Stopped once the verdict is
        told to stop, before or while it runs."""
        self.check()
        p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._tell(f"+{p.pid}")
        try:
            if self.signum:  # the handler ran before this group was listed
                self._kill(p.pid)
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(p.pid)
            p.wait()
            raise
        finally:
            self._kill(p.pid)  # what the command left running in its group
            self._tell(f"-{p.pid}")
        self.check()
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def _tell(self, line: str) -> None:
        pgid = int(line[1:])
        with self._lock:
            (self.groups.add if line[0] == "+" else self.groups.discard)(pgid)
            try:
                if self._watchdog is None:
                    self._watchdog = subprocess.Popen([sys.executable, "-S", str(WATCHDOG)], stdin=subprocess.PIPE,
                                                      stdout=subprocess.DEVNULL, text=True, start_new_session=True)
                self._watchdog.stdin.write(line + "\n")
                self._watchdog.stdin.flush()
            except OSError:
                pass  # no watchdog: the signal handler still stops the groups

    def _kill_all(self) -> None:
        for pgid in list(self.groups):
            self._kill(pgid)

    @staticmethod
    def _kill(pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
