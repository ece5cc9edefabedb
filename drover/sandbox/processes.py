"""Start and stop the sandbox's processes by PID, and only those.

A PID file holds the PID and the process's start time from /proc, so a PID the kernel has reused for some other
program is never taken for ours and never signalled.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

# How long a process sent SIGKILL may take to exit (a JVM unmapping its heap on a busy machine).
KILLED_EXIT_S = 30.0


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (start time); split after the command name, which may contain spaces.
    return stat.rsplit(")", 1)[1].split()[19]


class ProcessTable:
    def __init__(self, pid_dir: Path, log_dir: Path):
        self.pid_dir = pid_dir
        self.log_dir = log_dir

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ) -> int:
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(name), "ab") as out:
            # A session of its own: the process outlives the command that started it and ignores its Ctrl-C.
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
                user=user,
            )
        (self.pid_dir / f"{name}.pid").write_text(json.dumps({"pid": proc.pid, "start": _start_time(proc.pid)}))
        return proc.pid

    def pid(self, name: str) -> int | None:
        """The PID of our process ``name`` if it is still running, else None."""
        path = self.pid_dir / f"{name}.pid"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        pid = record.get("pid")
        if not isinstance(pid, int):
            return None
        started = _start_time(pid)
        if started is None or started != record.get("start"):
            return None
        # A zombie has ended; its main thread shown as one while other threads run on (a JVM shutting down) has not,
        # and still holds its ports.
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        if "State:\tZ" in status and "Threads:\t1\n" in status:
            return None
        return pid

    def stop(self, names: list[str], timeout_s: float = 30.0) -> list[str]:
        """SIGTERM each running process of ``names``, SIGKILL what is left after ``timeout_s``; returns those
        stopped."""
        running = {name: pid for name in names if (pid := self.pid(name)) is not None}
        for pid in running.values():
            os.kill(pid, signal.SIGTERM)
        self._wait_gone(list(running), timeout_s)
        for name in running:
            if (pid := self.pid(name)) is not None:
                os.kill(pid, signal.SIGKILL)
        # A killed process holds its ports until the kernel has torn it down: a start right after (a broker
        # restarted, `drover sandbox down` then `up`) would find them in use.
        self._wait_gone(list(running), KILLED_EXIT_S)
        for name in names:
            (self.pid_dir / f"{name}.pid").unlink(missing_ok=True)
        return sorted(running)

    def _wait_gone(self, names: list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(self.pid(n) for n in names):
            time.sleep(0.05)

    def tail(self, name: str, lines: int = 1) -> str:
        try:
            text = self.log_path(name).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])
