"""Nothing a tool does blocks the event loop: while one client's call is held (a database
statement waiting on a lock, or the SQL guard held inside its check), another client's call
completes. Ordering is asserted, never durations: the second call has finished while the first
is still running, then the first is let go and finishes too."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import psycopg
import pytest
from mcp import Client

from bookrag import db
from mcp_server import server as mcp
from tests.conftest import settings_for


def waiting_on_books(admin: psycopg.Connection) -> bool:
    """Whether a backend waits for a lock on rag.books (the held call has reached the database)."""
    n = admin.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE NOT l.granted AND c.relname = 'books'"
    ).fetchone()[0]
    admin.rollback()
    return n > 0


#: The other client's calls: none reads rag.books (the table the held call waits for).
COUNT = ("read_only_sql", {"sql": "SELECT count(*) AS n FROM rag.hierarchical_content_nodes"})
SEARCH = ("search", {"query": "le péage sur le pont", "k": 2})


@pytest.mark.parametrize(
    "held, call, other",
    [
        ("lock", ("list_books", {}), COUNT),  # a sync tool, its statement waiting on a lock
        ("lock", ("read_only_sql", {"sql": "SELECT count(*) AS n FROM rag.books"}), COUNT),
        ("guard", ("read_only_sql", {"sql": "SELECT count(*) AS n FROM rag.books"}), SEARCH),
    ],
    ids=["list_books waits on a lock", "read_only_sql waits on a lock", "read_only_sql held in the guard"],
)
def test_another_clients_call_completes_while_one_is_held(
    corpus_url, corpus_home, monkeypatch, held, call, other
):
    # The shipped limits would end a wait on a lock after 1 s (and read_only_sql after 5 s): lifted
    # here, so the held call ends only when the test lets it go.
    options = mcp.CONNECTION_OPTIONS + " -c lock_timeout=0 -c statement_timeout=0"
    url = psycopg.conninfo.make_conninfo(db.with_user(corpus_url, db.MCP_ROLE), options=options)
    monkeypatch.setattr(mcp, "SQL_DEADLINE_S", 600.0)
    monkeypatch.setattr(mcp, "SQL_TIMEOUT_S", 600)
    gate = threading.Event()
    entered = threading.Event()
    if held == "guard":
        real = mcp.check_select

        def held_check(sql: str) -> str:
            entered.set()
            gate.wait(120)  # a bound for a broken test only; the test sets it
            return real(sql)

        monkeypatch.setattr(mcp, "check_select", held_check)
    server = mcp.build_server(settings_for(corpus_home, corpus_url), url=url)
    admin = psycopg.connect(corpus_url)
    holder = psycopg.connect(corpus_url)
    if held == "lock":
        holder.execute("LOCK TABLE rag.books IN ACCESS EXCLUSIVE MODE")  # held until rollback
    is_held: Callable[[], bool] = (lambda: waiting_on_books(admin)) if held == "lock" else entered.is_set

    async def main() -> None:
        done = anyio.Event()
        out = {}

        async def slow() -> None:
            async with Client(server) as a:
                out["slow"] = await a.call_tool(*call)
            done.set()

        async with anyio.create_task_group() as tg, Client(server) as b:
            tg.start_soon(slow)
            with anyio.fail_after(120):  # a bound for a broken test only
                while not is_held():
                    await anyio.sleep(0.05)
            answer = await b.call_tool(*other)
            assert not answer.is_error, answer.content
            assert not done.is_set()  # the other client's call finished while this one is held
            holder.rollback()
            gate.set()
            await done.wait()
        assert not out["slow"].is_error, out["slow"].content

    try:
        anyio.run(main)
    finally:
        gate.set()
        holder.close()
        admin.close()


def test_a_page_held_on_a_lock_does_not_delay_another_request(room_url, room_home):
    """The reading room: the library page's statement waits on a lock (its worker thread holds
    no event loop), and the stylesheet, answered on the event loop itself, comes back meanwhile."""
    from starlette.testclient import TestClient

    from mcp_server.http import http_app

    options = mcp.CONNECTION_OPTIONS + " -c lock_timeout=0 -c statement_timeout=0"
    url = psycopg.conninfo.make_conninfo(db.with_user(room_url, db.MCP_ROLE), options=options)
    settings = settings_for(room_home, room_url)
    running = mcp.Running()
    app = http_app(mcp.build_server(settings, url=url, running=running), settings, "127.0.0.1", running)
    admin = psycopg.connect(room_url)
    holder = psycopg.connect(room_url)
    holder.execute("LOCK TABLE rag.books IN ACCESS EXCLUSIVE MODE")
    pages: dict[str, int] = {}
    try:
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            library = threading.Thread(target=lambda: pages.update(library=client.get("/").status_code))
            library.start()
            deadline = threading.Event()
            timer = threading.Timer(120, deadline.set)  # a bound for a broken test only
            timer.start()
            while not waiting_on_books(admin) and not deadline.is_set():
                deadline.wait(0.05)
            timer.cancel()
            assert client.get("/static/room.css").status_code == 200
            assert library.is_alive() and "library" not in pages  # still held
            holder.rollback()
            library.join(120)
        assert pages == {"library": 200}
    finally:
        holder.close()
        admin.close()
