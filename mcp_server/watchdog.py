"""A backend's memory, watched while `read_only_sql` runs: the last wall against a statement
whose size the planner misjudged (work_mem bounds sorts and hashes, not an aggregate that builds
one value). It reads the backend's private memory from /proc, so it works when PostgreSQL runs on
this machine (the embedded server, or a local one); elsewhere `watch` returns None and the plan
bound (sql_guard.plan_problem) is the wall."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg

#: The backend is cancelled once its private memory passes this (an idle backend holds about 10 MB;
#: its connection is then closed, so memory kept from earlier statements never adds up).
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


def client_mark(conn: psycopg.Connection) -> str | None:
    """How this connection's backend names its client in its process title: '[local]' over a
    unix socket, 'ADDRESS(PORT)' over TCP (this end's port); None when it cannot be told."""
    host = conn.info.host or ""
    if host.startswith("/"):
        return "[local]"
    try:
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            address, port = sock.getsockname()[:2]
    except OSError:
        return None
    return f"{address}({port})"


def is_local_backend(pid: int, conn: psycopg.Connection) -> bool:
    """Whether pid is this connection's backend on this machine: a PostgreSQL process whose title
    names this connection's role, database and client end (over TCP the server may be a container
    or another host, where the same pid is another process here)."""
    mark = client_mark(conn)
    if mark is None:
        return False
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return title.startswith(f"postgres: {conn.info.user} {conn.info.dbname} {mark}")


class Watch:
    """Polls a backend's private memory until stopped; past the cap it cancels the statement, and
    again at each poll while the memory stays above it."""

    def __init__(self, pid: int, cancel: Callable[[], None], cap: int) -> None:
        self.pid, self.cancel, self.cap = pid, cancel, cap
        self.peak = private_bytes(pid) or 0
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
            if used > self.cap:
                self.tripped = True
                self.cancel()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def watch(conn: psycopg.Connection) -> Watch | None:
    """A running Watch of the connection's backend (cancelling through the connection), or None
    when that backend's memory cannot be read from here."""
    pid = conn.info.backend_pid
    if not is_local_backend(pid, conn) or private_bytes(pid) is None:
        return None
    return Watch(pid, conn.cancel_safe, MEMORY_CAP_BYTES)
