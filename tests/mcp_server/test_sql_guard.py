"""read_only_sql's guard: what passes and what does not (the role and the read-only
transaction are further walls, tested in test_server.py)."""

from __future__ import annotations

import pytest

from mcp_server.sql_guard import UnsafeSQL, check_select

ALLOWED = [
    "SELECT level, count(*) FROM rag.hierarchical_content_nodes GROUP BY level",
    "WITH t AS (SELECT source_file FROM rag.hierarchical_content_nodes) SELECT count(*) FROM t",
    "WITH t AS (SELECT 1 AS a) SELECT * FROM (SELECT * FROM t) y",
    "SELECT * FROM rag.list_books()",
    "SELECT * FROM rag.outline('x')",
    "SELECT rank, heading_path FROM rag.search('pain', NULL, 'bm25', 5)",
    "SELECT book, string_agg(source_file, ',') FROM rag.hierarchical_content_nodes GROUP BY 1",
    "SELECT bool_or(level = 0), bool_and(level = 0), array_length(ARRAY[1, 2], 1), cardinality(ARRAY[1]) FROM rag.books",
    "SELECT strpos(title, 'a'), position('a' in title), date_trunc('day', loaded_at), to_char(loaded_at, 'YYYY') FROM rag.books",
]

REJECTED = [
    ("DELETE FROM rag.books", "only SELECT is allowed, got DELETE"),
    ("SELECT 1; DROP TABLE rag.books", "exactly one statement is allowed, got 2"),
    ("SELECT pg_sleep(10)", "function pg_sleep() is not allowed"),
    ("SELECT * FROM pg_shadow", "table pg_shadow is not readable here"),
    (
        "SELECT name, setting FROM (WITH pg_settings AS (SELECT 1) SELECT 1) x, pg_settings",
        "table pg_settings is not readable here",
    ),
    ("SELECT * INTO x FROM rag.books", "INTO is not allowed"),
    ("SELECT * FROM rag.books FOR UPDATE", "LOCK is not allowed"),
    ("SELECT set_config('x', 'y', false)", "function set_config() is not allowed"),
    ("SELECT pg_advisory_lock(1)", "function pg_advisory_lock() is not allowed"),
    ("WITH d AS (DELETE FROM rag.books RETURNING *) SELECT * FROM d", "is not allowed"),
    ("SELECT pg_read_file('/etc/passwd')", "function pg_read_file() is not allowed"),
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_allowed(sql):
    assert check_select(sql) == sql


@pytest.mark.parametrize("sql,message", REJECTED)
def test_rejected(sql, message):
    with pytest.raises(UnsafeSQL) as info:
        check_select(sql)
    assert message in str(info.value)
