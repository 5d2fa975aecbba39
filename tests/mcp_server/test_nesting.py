"""A statement nested too deeply is said to be so, in one sentence: by the server (PostgreSQL's
"stack depth limit exceeded", an OperationalError that is no outage) or by the JSON decoder of
read_only_sql's answer (a value deeper than Python's stack)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from bookrag import db
from mcp_server.server import CONNECTION_OPTIONS, AppState, _configure, _select_or_close, with_connection


def test_the_servers_stack_depth_limit_is_not_an_outage(corpus_url):
    # a superuser's pool whose backends have a small stack budget: a nested statement then
    # reaches PostgreSQL's "stack depth limit exceeded" (SQLSTATE 54001)
    url = psycopg.conninfo.make_conninfo(corpus_url, options="-c max_stack_depth=100kB")
    nested = "SELECT " + "(SELECT " * 300 + "1" + ")" * 300
    with ConnectionPool(
        url, min_size=1, max_size=1, configure=_configure, kwargs={"row_factory": dict_row}
    ) as pool:
        state = AppState(pool, threading.BoundedSemaphore(1))
        with pytest.raises(ToolError) as refused:
            with_connection(state, lambda conn: conn.execute(nested).fetchone())
        assert str(refused.value) == (
            "the statement is nested too deeply for the server (stack depth limit exceeded); nest it less"
        )
        assert with_connection(state, lambda conn: conn.execute("SELECT 1 AS one").fetchone()) == {"one": 1}


def test_a_value_too_deep_to_decode_is_one_sentence(corpus_url):
    # The guard refuses such a literal first (over its 500 words and symbols), so the decoder's
    # wall is tested below the guard, on the statement runner read_only_sql calls.
    url = psycopg.conninfo.make_conninfo(db.with_user(corpus_url, db.MCP_ROLE), options=CONNECTION_OPTIONS)
    deep = "[" * 1500 + "]" * 1500  # under the 4,000 characters a cell keeps, deeper than Python's stack
    with ConnectionPool(
        url, min_size=1, max_size=1, configure=_configure, kwargs={"row_factory": dict_row}
    ) as pool:
        state = AppState(pool, threading.BoundedSemaphore(1))
        with pytest.raises(ToolError) as refused:
            with_connection(
                state, lambda conn: _select_or_close(conn, f"SELECT '{deep}'::jsonb AS deep", 10, False)
            )
        assert str(refused.value) == (
            "a value in the answer is nested too deeply to send back as JSON; select it as text (::text)"
        )
        as_text = with_connection(
            state, lambda conn: _select_or_close(conn, f"SELECT '{deep}'::jsonb::text AS deep", 10, False)
        )
        assert as_text.rows == [[deep]]
