"""`bookrag mcp`: the MCP server over stdio, or over HTTP with the reading room beside it.

The top of mcp_server's imports (pyproject.toml's contract: main > http > reading_room > server):
the one place that creates the running state (server.Running) and hands it to both the server
and the reading room."""

from __future__ import annotations

import os

from bookrag.config import Settings
from mcp_server.http import serve_http
from mcp_server.server import Running, build_server


def serve(settings: Settings, http: bool = False, host: str = "127.0.0.1", port: int = 8765) -> None:
    # One OpenMP thread for the query embedder: on a small machine the database needs the other
    # core, and two embedding threads fighting PostgreSQL turned a 10 ms embedding into 1.7 s
    # (bench/bench_mcp.py: sequential p95 1,737 ms with the default, 55 ms with one thread).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    running = Running()
    server = build_server(settings, running=running)
    if http:
        serve_http(server, settings, host, port, running)
    else:
        server.run("stdio")
