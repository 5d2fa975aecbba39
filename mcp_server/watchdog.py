"""A backend's memory, watched while `read_only_sql` runs: the last wall against a statement
whose size the planner misjudged (work_mem bounds sorts and hashes, not an aggregate that builds
one value). It reads the backend's private memory from /proc, so it works when PostgreSQL runs on
this machine (the embedded server, or a local one); elsewhere `watch` returns None and the plan
bound (sql_guard.plan_problem) is the wall."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

#: The backend is cancelled once its private memory passes this (about 256 MB above an idle one).
MEMORY_CAP_BYTES = 256 * 1024 * 1024
POLL_SECONDS = 0.01


def private_bytes(pid: int) -> int | None:
    """RssAnon of a process (its private resident memory), or None when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_local_backend(pid: int) -> bool:
    """Whether pid is a PostgreSQL process of this machine (a remote server's pid means nothing here)."""
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()[:200]
    except OSError:
        return False


class Watch:
    """Polls a backend's private memory until stopped; calls cancel once it passes the cap."""

    def __init__(self, pid: int, cancel: Callable[[], None], cap: int) -> None:
        self.pid, self.cancel, self.cap = pid, cancel, cap
        self.baseline = private_bytes(pid) or 0
        self.peak = self.baseline
        self.tripped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bookrag-watch-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            used = private_bytes(self.pid)
            if used is None:
                return
            self.peak = max(self.peak, used)
            if used - self.baseline > self.cap:
                self.tripped = True
                self.cancel()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def watch(pid: int, cancel: Callable[[], None]) -> Watch | None:
    """A running Watch of a local backend, or None when its memory cannot be read from here."""
    if not is_local_backend(pid) or private_bytes(pid) is None:
        return None
    return Watch(pid, cancel, MEMORY_CAP_BYTES)
