"""A hostile client against the MCP server (in-process, through the SDK's own Client): writes,
multi-statements, comment and unicode tricks, data-modifying CTEs, SELECT INTO, side-effect
functions, catalog reads and resource bombs through `read_only_sql`; hostile strings through
`search`. Each gets its exact refusal or a capped answer; the corpus checksum is unchanged and
the server still answers afterwards."""

from __future__ import annotations

import json

import psycopg
import pytest
from mcp import Client

from bookrag import db
from mcp_server.server import CONNECTION_OPTIONS, MAX_CONTENT_CHARS, build_server
from tests.conftest import settings_for

N = "rag.hierarchical_content_nodes"
CROSS3 = f"{N} a, {N} b, {N} c"
CROSS4 = f"{N} a, {N} b, {N} c, {N} d"  # the fixture corpus's rows to the fourth: tens of millions
CROSS8 = ", ".join(f"{N} t{i}" for i in range(8))
ONLY_SELECT = "rejected: only SELECT is allowed, got "
NOT_READABLE = "is not readable here; use rag.books, rag.embedding_models, rag.function_versions, rag.hierarchical_content_nodes, rag.paragraphs"
TIMEOUT = "the statement ran past its"
TOO_MANY = "the statement builds values from more than 16 operands"
TOKENS = "the statement has "
#: The issue's base value: every paragraph in one string, through a derived table.
AGG = f"(SELECT string_agg(content, '') AS c FROM {N}) s"
NESTED = "content"
for _ in range(5):
    NESTED = f"({NESTED} || {NESTED})"

#: Statements that are not one read-only SELECT, by the statement tag the refusal names (None:
#: the parser's tree gives no tag, the message stops at the rule).
NOT_SELECT: dict[str | None, list[str]] = {
    "INSERT": ["INSERT INTO rag.books VALUES ('x', 'x')"],
    "UPDATE": ["UPDATE rag.books SET title = 'x'"],
    "DELETE": [f"DELETE FROM {N}"],
    "TRUNCATETABLE": ["TRUNCATE rag.books"],
    "DROP": ["DROP TABLE rag.books"],
    "CREATE": [
        "CREATE TABLE t (a int)",
        "CREATE TEMP TABLE t AS SELECT 1",
        "CREATE FUNCTION pdb.score(integer) RETURNS float8 LANGUAGE sql AS 'select 1.0'",
        "CREATE OR REPLACE FUNCTION rag.search_branch(text) RETURNS int LANGUAGE sql AS 'select 1'",
    ],
    "ALTER": ["ALTER TABLE rag.books ADD COLUMN x int"],
    "GRANT": ["GRANT ALL ON rag.books TO PUBLIC"],
    "COPY": ["COPY rag.books TO '/tmp/books'", "COPY (SELECT 1) TO PROGRAM 'id'"],
    "SET": ["SET statement_timeout = 0"],
    "MERGE": ["MERGE INTO rag.books b USING rag.books c ON b.book = c.book WHEN MATCHED THEN DELETE"],
    None: [
        "REVOKE ALL ON rag.books FROM bookrag_reader",
        "VACUUM rag.books",
        "ANALYZE rag.books",
        "REINDEX INDEX rag.hcn_bm25_idx",
        "RESET ALL",
        "BEGIN",
        "COMMIT",
        "LOCK TABLE rag.books",
        "DO $$BEGIN DELETE FROM rag.books; END$$",
        "CALL rag.search_branch('x', NULL, 'bm25')",
        "EXPLAIN ANALYZE DELETE FROM rag.books",
        "PREPARE p AS DELETE FROM rag.books",
        "EXECUTE p",
        "LISTEN bookrag",
        "NOTIFY bookrag",
        "ALTER ROLE bookrag_reader SET statement_timeout = 0",
        "CREATE EXTENSION dblink",
        "DISCARD ALL",
        "COMMENT ON TABLE rag.books IS 'x'",
        "REFRESH MATERIALIZED VIEW rag.books",
        "CHECKPOINT",
        "LOAD 'plpgsql'",
    ],
}

#: (statement, expected start of the tool error). The guard's refusals, word for word.
REFUSED: list[tuple[str, str]] = [
    *((sql, ONLY_SELECT + (tag or "")) for tag, sqls in NOT_SELECT.items() for sql in sqls),
    ("CLUSTER rag.books", "rejected: cannot parse the statement"),
    ("SELECT * FROM rag.books FOR UPDATE", "rejected: LOCK is not allowed: read-only SELECT only"),
    ("SELECT * INTO stolen FROM rag.books", "rejected: INTO is not allowed: read-only SELECT only"),
    # more than one statement
    ("SELECT 1; DELETE FROM rag.books", "rejected: exactly one statement is allowed, got 2"),
    ("SELECT 1; SELECT 2", "rejected: exactly one statement is allowed, got 2"),
    ("SELECT 1;; DROP TABLE rag.books", "rejected: exactly one statement is allowed, got 2"),
    ("/* x */ SELECT 1; /* y */ DELETE FROM rag.books", "rejected: exactly one statement is allowed"),
    ("SELECT 1 -- comment\n; DELETE FROM rag.books", "rejected: exactly one statement is allowed, got 2"),
    # data-modifying CTEs
    (
        "WITH d AS (DELETE FROM rag.books RETURNING *) SELECT * FROM d",
        "rejected: DELETE is not allowed: read-only SELECT only",
    ),
    (
        "WITH u AS (UPDATE rag.books SET title = 'x' RETURNING *) SELECT count(*) FROM u",
        "rejected: UPDATE is not allowed: read-only SELECT only",
    ),
    (
        "WITH i AS (INSERT INTO rag.books (book, title) VALUES ('x', 'x') RETURNING 1) SELECT 1",
        "rejected: INSERT is not allowed: read-only SELECT only",
    ),
    (
        "SELECT * FROM (WITH d AS (DELETE FROM rag.books RETURNING *) SELECT * FROM d) x",
        "rejected: DELETE is not allowed: read-only SELECT only",
    ),
    # side-effect and privileged functions, spelled every way
    ("SELECT pg_sleep(10)", "rejected: function pg_sleep() is not allowed"),
    ("SELECT pg_sleep/**/(10)", "rejected: function pg_sleep() is not allowed"),
    ('SELECT "pg_sleep"(10)', "rejected: function pg_sleep() is not allowed"),
    ("SELECT PG_SLEEP(10)", "rejected: function pg_sleep() is not allowed"),
    ("SELECT pg_catalog.pg_sleep(10)", "rejected: function pg_sleep() is not allowed"),
    ("SELECT pg_sleep(1) FROM rag.books", "rejected: function pg_sleep() is not allowed"),
    ("SELECT set_config('statement_timeout', '0', false)", "rejected: function set_config() is not allowed"),
    ("SELECT current_setting('data_directory')", "rejected: function current_setting() is not allowed"),
    ("SELECT pg_advisory_lock(4242001)", "rejected: function pg_advisory_lock() is not allowed"),
    ("SELECT pg_try_advisory_lock(1)", "rejected: function pg_try_advisory_lock() is not allowed"),
    ("SELECT pg_advisory_xact_lock(4242001)", "rejected: function pg_advisory_xact_lock() is not allowed"),
    ("SELECT lo_creat(-1)", "rejected: function lo_creat() is not allowed"),
    ("SELECT lo_import('/etc/passwd')", "rejected: function lo_import() is not allowed"),
    ("SELECT pg_read_file('/etc/passwd')", "rejected: function pg_read_file() is not allowed"),
    ("SELECT pg_ls_dir('.')", "rejected: function pg_ls_dir() is not allowed"),
    ("SELECT pg_notify('a', 'b')", "rejected: function pg_notify() is not allowed"),
    (
        "SELECT query_to_xml('delete from rag.books', true, true, '')",
        "rejected: function query_to_xml() is not allowed",
    ),
    ("SELECT dblink('host=x', 'select 1')", "rejected: function dblink() is not allowed"),
    (
        "SELECT pg_terminate_backend(pg_backend_pid())",
        "rejected: function pg_terminate_backend() is not allowed",
    ),
    ("SELECT pg_cancel_backend(1)", "rejected: function pg_cancel_backend() is not allowed"),
    (
        "SELECT nextval('rag.hierarchical_content_nodes_id_seq')",
        "rejected: function nextval() is not allowed",
    ),
    (
        "SELECT setval('rag.hierarchical_content_nodes_id_seq', 1)",
        "rejected: function setval() is not allowed",
    ),
    ("SELECT txid_current()", "rejected: function txid_current() is not allowed"),
    ("SELECT pg_export_snapshot()", "rejected: function pg_export_snapshot() is not allowed"),
    ("SELECT version()", "rejected: function version() is not allowed"),
    (
        "SELECT paradedb.force_merge('rag.hcn_bm25_idx'::regclass, 1)",
        "rejected: function force_merge() is not allowed",
    ),
    ("SELECT rag._ensure_vector_index('x', 3)", "rejected: function _ensure_vector_index() is not allowed"),
    ("SELECT rag._install_model_scans('x', 3)", "rejected: function _install_model_scans() is not allowed"),
    ("SELECT rag._set_hnsw(1000)", "rejected: function _set_hnsw() is not allowed"),
    ("SELECT * FROM generate_series(1, 1000000000)", "rejected: function generate_series() is not allowed"),
    ("SELECT repeat('x', 100000000)", "rejected: " + TOO_MANY),
    ("SELECT lpad('x', 1000000000)", "rejected: lpad()/rpad(): the length must be an integer literal"),
    ("SELECT * FROM ROWS FROM (pg_ls_dir('.'))", "rejected: "),
    # calls sqlglot models like operators are still checked by name
    ("SELECT xor(true, false)", "rejected: function xor() is not allowed"),
    ("SELECT array_contains(ARRAY[1], 1)", "rejected: function "),
    # values that grow by replacement: planning would fold these constants before anything runs
    (
        "SELECT replace(replace(replace(replace('xxxxxxxx', 'x', 'xxxxxxxx'), 'x', 'xxxxxxxx'), 'x', 'xxxxxxxx'), 'x', 'x')",
        "rejected: replace(): at most 2 replace()/regexp_replace() calls may nest",
    ),
    (
        f"SELECT replace(content, 'e', content) FROM {N}",
        "rejected: replace(): the replacement must be a string literal",
    ),
    (
        "SELECT regexp_replace('x', '', '" + "y" * 65 + "', 'g')",
        "rejected: regexp_replace(): the replacement may be at most 64 characters, got 65",
    ),
    # catalog and server state
    ("SELECT * FROM pg_shadow", "rejected: table pg_shadow " + NOT_READABLE),
    ("SELECT * FROM pg_authid", "rejected: table pg_authid " + NOT_READABLE),
    ("SELECT * FROM pg_stat_activity", "rejected: table pg_stat_activity " + NOT_READABLE),
    ("SELECT * FROM pg_catalog.pg_proc", "rejected: table pg_catalog.pg_proc " + NOT_READABLE),
    ("SELECT * FROM information_schema.tables", "rejected: table information_schema.tables " + NOT_READABLE),
    ("SELECT * FROM pg_settings", "rejected: table pg_settings " + NOT_READABLE),
    ("SELECT * FROM pg_user", "rejected: table pg_user " + NOT_READABLE),
    ("SELECT * FROM pg_roles", "rejected: table pg_roles " + NOT_READABLE),
    ("SELECT * FROM pg_file_settings", "rejected: table pg_file_settings " + NOT_READABLE),
    ("SELECT * FROM rag.books b JOIN pg_namespace n ON true", "rejected: table pg_namespace " + NOT_READABLE),
    (
        "WITH pg_shadow AS (SELECT 1) SELECT * FROM pg_catalog.pg_shadow",
        "rejected: table pg_catalog.pg_shadow " + NOT_READABLE,
    ),
    ("SELECT (SELECT usename FROM pg_user LIMIT 1)", "rejected: table pg_user " + NOT_READABLE),
    ('SELECT * FROM "pg_shadow"', "rejected: table pg_shadow " + NOT_READABLE),
    ("TABLE pg_shadow", "rejected: table pg_shadow " + NOT_READABLE),
    ("SELECT * FROM public.secrets", "rejected: table public.secrets " + NOT_READABLE),
    ("SELECT * FROM (SELECT * FROM pg_stat_activity) x", "rejected: table pg_stat_activity " + NOT_READABLE),
    # parse failures and bytes
    ("SELECT 1\x00", "rejected: the statement contains a NUL character"),
    ("SELECT X'\\' , version() --'", "rejected: cannot parse the statement"),
    ("SELEC 1", "rejected: "),
    ("SELECT * FROM rag.books WHERE title = 'unterminated", "rejected: cannot parse the statement"),
    ("SELECT $$ never closed", "rejected: cannot parse the statement"),
    (
        "SELECT " + "(" * 2000 + "1" + ")" * 2000,
        "rejected: the statement is nested too deeply to check; simplify it",
    ),
    # sqlglot's own crashes (issue 43: they escaped the guard, 11-14 s of traceback rendering)
    ("SELECT {:}", "rejected: cannot parse the statement"),
    ('SELECT & pg_backend_pid() ::text\f("",', "rejected: cannot parse the statement"),
    # expression bombs (issue 43): PostgreSQL cannot cancel one expression while it evaluates
    *((f"SELECT length({' || '.join(['c'] * n)}) FROM {AGG}", "rejected: " + TOO_MANY) for n in (20, 40, 56)),
    (f"SELECT length({' || '.join(['c'] * 200)}) FROM {AGG}", "rejected: " + TOKENS),
    (f"SELECT length(c || c) FROM {AGG}", "rejected: c (it may hold an aggregate's result) can grow to"),
    (f"SELECT length({NESTED}) FROM {N}", "rejected: " + TOO_MANY),
    (f"SELECT length(concat({', '.join(['c'] * 100)})) FROM {AGG}", "rejected: " + TOO_MANY),
    (f"SELECT cardinality(ARRAY[{', '.join(['c'] * 400)}]) FROM {AGG}", "rejected: " + TOKENS),
    (
        f"SELECT length(string_agg(content, '') || 'x') FROM {N}",
        "rejected: string_agg()'s result can grow to the 256 MB memory cap",
    ),
]

#: Allowed statements that must come back bounded: (statement, max_rows, check on the result).
BOUNDED: list[tuple[str, int]] = [
    (f"SELECT a.content FROM {CROSS3} LIMIT 10", 1),  # a cross join: one row fetched, never the whole result
    (f"SELECT a.content, b.content FROM {N} a, {N} b", 500),  # bounded by the answer's size
    (f"SELECT * FROM {N} ORDER BY content", 500),
    (
        f"SELECT string_agg(a.content, ' ') FROM {N} a JOIN {N} b ON a.level = b.level",
        1,
    ),  # one huge cell, cut in SQL
    ("SELECT 1 /* ; DELETE FROM rag.books */", 1),
    ("SELECT count(*) FROM rag.books;", 1),  # a final semicolon is fine
    ("SELECT 'é' AS \"ＳＥＬＥＣＴ\", U&'\\0041' AS a", 1),
]

COSTLY = "rejected before running: the planner estimates a cost of"
BEFORE = "rejected before running: its array_agg/string_agg/ARRAY() would read about"

#: Resource bombs: refused before they run (a value-building aggregate over more than the plan
#: bound, a recursion), or stopped by the database's limits, with the sentence that says so.
BOMBS: list[tuple[str, str | tuple[str, ...]]] = [
    (f"SELECT count(*) FROM {CROSS8}", COSTLY),
    (f"SELECT t0.content FROM {CROSS8} ORDER BY t0.content || t1.content", COSTLY),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "rejected: WITH RECURSIVE is not allowed: its size cannot be bounded before it runs",
    ),
    (f"SELECT array_agg(t0.content) FROM {CROSS8}", COSTLY),
    (f"SELECT string_agg(a.content, ' ') FROM {CROSS4}", BEFORE),
    (f"SELECT array_agg(a.content) FROM {CROSS4} GROUP BY a.level", BEFORE),
    # a join condition whose selectivity the planner can only guess: bounded as a cross join
    (
        f"SELECT array_agg(a.content || b.content) FROM {N} a JOIN {N} b ON a.id % 7 = b.id % 7 JOIN {N} c ON c.id % 5 = b.id % 5 "
        f"JOIN {N} d ON d.id % 3 = c.id % 3",
        BEFORE,
    ),
    (
        f"SELECT length(string_agg(a.content, '')) FROM {N} a JOIN {N} b ON a.id <> b.id JOIN {N} c ON c.id <> a.id "
        f"JOIN {N} d ON d.id <> c.id",
        BEFORE,
    ),
    (f"SELECT ARRAY(SELECT a.content FROM {CROSS4})", BEFORE),
    (f"SELECT x FROM (SELECT array_agg(a.content) OVER () AS x FROM {CROSS4}) s LIMIT 1", BEFORE),
    # a guessed join hidden under a LIMIT, or joined on a CTE's computed column (no statistics)
    (
        f"SELECT array_agg(c) FROM (SELECT a.content || b.content AS c FROM {N} a JOIN {N} b ON a.id % 7 = b.id % 7 "
        f"JOIN {N} d ON d.id % 5 = b.id % 5 JOIN {N} e ON e.id % 3 = d.id % 3 LIMIT 100000000) s",
        (BEFORE, COSTLY),
    ),
    (
        f"WITH k AS MATERIALIZED (SELECT id % 2 AS k, content FROM {N}) SELECT array_agg(x.content) "
        "FROM k x JOIN k y ON x.k = y.k JOIN k z ON z.k = y.k JOIN k w ON w.k = z.k",
        (BEFORE, COSTLY),
    ),
]


def message(result) -> str:
    """A tool error's sentence, without the SDK's "Error executing tool NAME: " prefix."""
    text = result.content[0].text if result.content else ""
    return text.partition(": ")[2] if text.startswith("Error executing tool ") else text


def checksum(url: str) -> str:
    with psycopg.connect(url) as c:
        return (
            c.execute(
                f"SELECT md5(string_agg(md5(t::text), '' ORDER BY t::text)) FROM (SELECT * FROM {N}) t"
            ).fetchone()[0]
            + c.execute("SELECT md5(string_agg(b::text, '' ORDER BY b::text)) FROM rag.books b").fetchone()[0]
        )


@pytest.fixture(scope="module")
def reader(corpus_url: str) -> str:
    return psycopg.conninfo.make_conninfo(
        db.with_user(corpus_url, db.READER_ROLE), options=CONNECTION_OPTIONS
    )


def test_hostile_sql_is_refused_or_bounded(corpus_url, corpus_home, reader):
    assert len(REFUSED) + len(BOUNDED) + len(BOMBS) >= 100
    before = checksum(corpus_url)
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)

    async def main() -> list[str]:
        problems: list[str] = []
        async with Client(server) as client:
            for statement, expected in REFUSED:
                r = await client.call_tool("read_only_sql", {"sql": statement})
                text = message(r)
                if not r.is_error or not text.startswith(expected):
                    problems.append(f"{statement[:60]!r}: {text[:200]!r}")
            for statement, max_rows in BOUNDED:
                r = await client.call_tool("read_only_sql", {"sql": statement, "max_rows": max_rows})
                if r.is_error:
                    problems.append(f"{statement[:60]!r} failed: {r.content[0].text[:200]}")
                    continue
                rows = r.structured_content["rows"]
                if len(rows) > max_rows or any(
                    len(str(c)) > MAX_CONTENT_CHARS + 1 for row in rows for c in row
                ):
                    problems.append(f"{statement[:60]!r}: unbounded answer")
                if sum(len(str(c)) for row in rows for c in row) > 100_000:
                    problems.append(f"{statement[:60]!r}: answer over 100,000 characters")
            for statement, expected in BOMBS:
                r = await client.call_tool("read_only_sql", {"sql": statement})
                if not r.is_error or not message(r).startswith(expected):
                    problems.append(f"{statement[:60]!r}: {message(r)[:200]!r}")
            r = await client.call_tool("list_books", {})
            if r.is_error:
                problems.append("the server stopped answering")
        return problems

    import anyio

    problems = anyio.run(main)
    assert problems == [], "\n".join(problems)
    assert checksum(corpus_url) == before


HOSTILE_QUERIES = [
    "'; DROP TABLE rag.books; --",
    '" OR 1=1 --',
    "$$ || pg_sleep(10) || $$",
    "content:*",
    "|||",
    "&&& ###",
    "\\x00\\xff",
    "%s %(q)s {}",
    "‮ reversed",
    "e\u0301conomie",
    "x" * 2000,
    "🙂" * 500,
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "NULL",
    "pdb.score(id)",
    "SELECT * FROM rag.books",
]


def test_hostile_search_strings_are_just_words(corpus_url, corpus_home, reader):
    before = checksum(corpus_url)
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)

    async def main() -> list[str]:
        bad = []
        async with Client(server) as client:
            for q in HOSTILE_QUERIES:
                for phrasings in ([], ["pain", q[:1990] + " x"]):
                    r = await client.call_tool("search", {"query": q, "phrasings": phrasings, "k": 3})
                    if r.is_error:
                        bad.append(f"{q[:30]!r} {phrasings[:1]}: {message(r)[:120]}")
            r = await client.call_tool("search", {"query": "pain", "levels": []})
            if not r.is_error:
                bad.append("levels: [] was accepted")
        return bad

    import anyio

    assert anyio.run(main) == []
    assert checksum(corpus_url) == before


def test_nfd_and_nfc_queries_find_the_same_rows(corpus, e5):
    from bookrag.search import SearchRequest, search

    nfc = search(corpus, SearchRequest("échange économie", "bm25", 5))
    nfd = search(corpus, SearchRequest("e\u0301change e\u0301conomie", "bm25", 5))
    assert [h["id"] for h in nfc] == [h["id"] for h in nfd] and nfc


def test_the_memory_watchdog_stops_what_the_plan_let_through(corpus_url, corpus_home, reader, monkeypatch):
    """The second wall: a statement whose plan passed (the bound lifted here) is cancelled once its
    backend's private memory grows past the cap (lowered here to 64 MB), its connection closed
    (the backend exits, its memory goes back), and the server answers the next call."""
    from mcp_server import server as mcp_server
    from mcp_server import sql_guard, watchdog

    monkeypatch.setattr(sql_guard, "VALUE_BUILDING_BYTES", 10**15)
    monkeypatch.setattr(watchdog, "MEMORY_CAP_BYTES", 64 * 2**20)
    monkeypatch.setattr(
        mcp_server, "SQL_TIMEOUT_S", 60
    )  # the memory cap, not a slow machine's clock, must stop it
    monkeypatch.setattr(mcp_server, "SQL_DEADLINE_S", 61.0)
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)
    bomb = f"SELECT array_agg(a.content || b.content || c.content) FROM {CROSS4}"

    async def main() -> tuple[str, bool, str]:
        async with Client(server) as client:
            r = await client.call_tool("read_only_sql", {"sql": bomb})
            after = await client.call_tool("read_only_sql", {"sql": "SELECT count(*) FROM rag.books"})
            small = await client.call_tool("read_only_sql", {"sql": f"SELECT array_agg(level) FROM {N}"})
            return message(r), after.is_error, message(small)

    import anyio

    text, after_failed, small = anyio.run(main)
    assert text == (
        "the statement took over 64 MB of server memory and was cancelled; aggregate fewer rows or "
        "shorter values, or add a WHERE"
    )
    assert not after_failed
    assert small.startswith('{\n  "columns": [\n    "array_agg"')  # what must pass: a small one runs


def test_the_time_limit_stops_a_statement_that_cannot_finish(corpus_url, corpus_home, reader, monkeypatch):
    """The time limit, on a statement no machine finishes within it: the fixture corpus's rows to
    the tenth power (over 10^12 rows) with the cost bound lifted, under a 1 s limit. The verdict
    cannot depend on the machine's speed or cores (pinned to one core or run on two: the same)."""
    from mcp_server import server as mcp_server
    from mcp_server import sql_guard

    monkeypatch.setattr(sql_guard, "COST_BOUND", float("inf"))
    monkeypatch.setattr(mcp_server, "SQL_TIMEOUT_S", 1)
    monkeypatch.setattr(mcp_server, "SQL_DEADLINE_S", 2.0)
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)
    cross10 = ", ".join(f"{N} t{i}" for i in range(10))
    # a condition on all ten: no join order can drop rows before every combination is made
    endless = f"SELECT count(*) FROM {cross10} WHERE " + " + ".join(f"t{i}.id" for i in range(10)) + " < 0"

    async def main() -> tuple[str, bool]:
        async with Client(server) as client:
            r = await client.call_tool("read_only_sql", {"sql": endless})
            after = await client.call_tool("read_only_sql", {"sql": "SELECT count(*) FROM rag.books"})
            return message(r), after.is_error

    import anyio

    text, after_failed = anyio.run(main)
    assert text.startswith(TIMEOUT), text
    assert not after_failed


def test_the_data_limit_stops_one_expression(corpus_url, corpus_home, reader, monkeypatch):
    """The last wall (decision 39): with the guard's budget, the plan bound and the memory watch
    all lifted, the issue's bomb (a 40-operand chain over every row triple in one string: one
    expression, which no cancel interrupts) is stopped by the server's data limit
    (db.BACKEND_DATA_LIMIT_BYTES, the tests' server runs under it as the embedded one does) as an
    ordinary out-of-memory error for that statement, not a crash; the server answers the next call."""
    from mcp_server import server as mcp_server
    from mcp_server import sql_guard, watchdog

    monkeypatch.setattr(sql_guard, "check_budget", lambda tree: None)
    monkeypatch.setattr(sql_guard, "VALUE_BUILDING_BYTES", 10**15)
    monkeypatch.setattr(watchdog, "MEMORY_CAP_BYTES", 10**15)
    monkeypatch.setattr(mcp_server, "SQL_TIMEOUT_S", 60)  # the limit, not the clock, must stop it
    monkeypatch.setattr(mcp_server, "SQL_DEADLINE_S", 61.0)
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)
    triples = f"(SELECT string_agg(a.content || b.content || c.content, '') AS c FROM {N} a, {N} b, {N} c) s"
    bomb = f"SELECT length({' || '.join(['c'] * 40)}) FROM {triples}"

    async def main() -> tuple[str, str, str]:
        async with Client(server) as client:
            r = await client.call_tool("read_only_sql", {"sql": bomb})
            size = await client.call_tool("read_only_sql", {"sql": f"SELECT length(c) FROM {triples}"})
            small = await client.call_tool("read_only_sql", {"sql": "SELECT count(*) FROM rag.books"})
            return message(r), message(size), message(small)

    import anyio

    text, size, small = anyio.run(main)
    # the bomb needs 40 x 41 / 2 = 820 times the value: several times the limit on the fixture corpus
    one = json.loads(size)["rows"][0][0]
    assert 820 * one > 4 * db.BACKEND_DATA_LIMIT_BYTES, one
    assert text.startswith("the answer is too large for the server (out of memory"), text
    assert json.loads(small)["rows"][0][0] >= 1  # the next call runs


def test_a_misjudged_join_is_bounded_as_a_cross_join():
    """The plan bound's rule on its own: a join on column = column keeps the planner's estimate; a
    join whose condition is an expression (a guessed selectivity) counts the product of its inputs."""
    from mcp_server.sql_guard import _bound_rows

    scan = {"Node Type": "Seq Scan", "Plan Rows": 5000, "Plan Width": 600}
    trusted = {
        "Node Type": "Hash Join",
        "Plan Rows": 5000,
        "Hash Cond": "(a.source_file = b.parent_source_file)",
        "Plans": [scan, {"Node Type": "Hash", "Plan Rows": 5000, "Plans": [scan]}],
    }
    guessed = {**trusted, "Hash Cond": "((a.id % 7) = (b.id % 7))"}
    filtered = {
        "Node Type": "Nested Loop",
        "Plan Rows": 20,
        "Join Filter": "(a.id <> b.id)",
        "Plans": [scan, scan],
    }
    assert _bound_rows(trusted) == 5000
    assert _bound_rows(guessed) == 25_000_000
    assert _bound_rows(filtered) == 25_000_000


def test_the_cost_bound_refuses_only_above_it():
    from mcp_server.sql_guard import COST_BOUND, plan_problem

    assert plan_problem({"Node Type": "Seq Scan", "Total Cost": COST_BOUND}, value_building=False) is None
    assert plan_problem(
        {"Node Type": "Seq Scan", "Total Cost": COST_BOUND + 1}, value_building=False
    ).startswith("the planner estimates a cost of 2,000,001 (bound 2,000,000")
