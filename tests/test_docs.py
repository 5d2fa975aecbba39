"""Docs as tests: README is the manual (at most 300 lines; every command in its table, every MCP
tool, client configurations of the right shape, links that resolve); docs/commands.md has a
section per command, docs/sql.md every public SQL function; the quick start has two commands and
.ci/run runs the second; the SQL examples of README and docs/sql.md run as printed on the real books."""

from __future__ import annotations

import re
import shutil

import pytest

from bookrag.cli import COMMANDS
from bookrag.config import DEFAULT_HOME, Settings
from bookrag.functions import function_files

README = (DEFAULT_HOME / "README.md").read_text(encoding="utf-8")
COMMANDS_DOC = (DEFAULT_HOME / "docs" / "commands.md").read_text(encoding="utf-8")
SQL_DOC = (DEFAULT_HOME / "docs" / "sql.md").read_text(encoding="utf-8")
MCP_DOC = (DEFAULT_HOME / "docs" / "mcp.md").read_text(encoding="utf-8")


def test_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_every_command_is_in_the_readme_table_and_has_a_section():
    table = README.split("## Commands\n", 1)[1].split("\n## ", 1)[0]
    for name in COMMANDS:
        assert re.search(rf"^\| `bookrag {re.escape(name)}\b", table, re.M), name
        assert re.search(rf"^### `bookrag {re.escape(name)}\b", COMMANDS_DOC, re.M), name


def test_every_public_sql_function_is_documented():
    for f in function_files():
        if not f.name.startswith("_"):
            assert f"rag.{f.name}(" in SQL_DOC, f.name


def test_every_mcp_tool_is_in_the_tables():
    import anyio

    from mcp_server.server import build_server

    tools = anyio.run(
        build_server(Settings(DEFAULT_HOME, "postgresql:///none", None, "local", None, 400)).list_tools
    )
    for t in tools:
        assert f"| `{t.name}` |" in README, t.name
        assert f"| `{t.name}` |" in MCP_DOC, t.name


def test_local_links_resolve():
    for doc in [
        DEFAULT_HOME / "README.md",
        *sorted((DEFAULT_HOME / "docs").glob("*.md")),
        DEFAULT_HOME / "bench" / "README.md",
    ]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://", "mailto:")):
                assert (doc.parent / target).exists(), f"{doc.relative_to(DEFAULT_HOME)}: {target}"


def test_client_configurations_have_each_clients_shape():
    """README's JSON blocks parse, and each has the shape its client reads (the shape
    `bookrag mcp config` prints: tests/test_mcp_config.py)."""
    import json

    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", README, re.S)]
    desktop, vscode = blocks
    assert set(desktop["mcpServers"]["bookrag"]) == {"command", "args", "env"}
    assert desktop["mcpServers"]["bookrag"]["args"] == ["mcp"]
    assert (
        set(vscode["servers"]["bookrag"]) == {"type", "command", "args", "env"}
        and vscode["servers"]["bookrag"]["type"] == "stdio"
    )
    claude_code = re.search(r"^claude mcp add --transport stdio .*$", README, re.M).group(0)
    assert claude_code.endswith("bookrag -- /home/you/bookrag/.venv/bin/bookrag mcp")
    http = README.split("**Over HTTP**", 1)[1].split("\n\n", 1)[0]
    assert "claude_desktop_config" not in http and '"type": "http"' in http


def test_the_quick_start_says_what_the_first_run_costs():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "several minutes" in quick and "3,949 paragraph chunks" in quick and "seconds" in quick


def test_quick_start_has_two_commands_and_ci_runs_the_test_one():
    block = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert len(commands) == 2
    ci = (DEFAULT_HOME / ".ci" / "run").read_text()
    assert commands[1] in ci


def test_no_placeholder_left():
    assert "PLACEHOLDER" not in README and "TBD" not in README


def sql_examples() -> list[str]:
    blocks = re.findall(r"```sql\n(.*?)```", README + SQL_DOC, re.S)
    statements = []
    for block in blocks:
        text = "\n".join(line for line in block.splitlines() if not line.startswith(("--", "\\")))
        statements += [s.strip() for s in text.split(";") if s.strip()]
    return statements


@pytest.fixture(scope="module")
def real_corpus(postgresql_proc, prepared_home, tmp_path_factory):
    """Both books loaded: paragraphs BM25-only (fast), summaries with their committed vectors."""
    import psycopg
    from psycopg import sql

    from bookrag import db
    from loader.load import load
    from loader.sidecars import write_sidecars

    home = tmp_path_factory.mktemp("readme")
    shutil.copytree(prepared_home / "corpus", home / "corpus")
    books = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")
    write_sidecars(sorted(home.rglob("source.md")), home, 400, None, progress=False)
    admin = psycopg.conninfo.make_conninfo(
        host=postgresql_proc.host, port=postgresql_proc.port, user=postgresql_proc.user, dbname="postgres"
    )
    name = "bookrag_readme"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        c.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(postgresql_proc.template_dbname)
            )
        )
    url = psycopg.conninfo.make_conninfo(admin, dbname=name)
    conn = db.connect(url)
    load(conn, home, [home / "corpus" / b for b in books])
    yield conn
    conn.close()
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_readme_sql_examples_run_as_printed(real_corpus, e5):
    statements = sql_examples()
    assert len(statements) >= 10 and sum(":q::vector" in s for s in statements) == 2
    for stmt in statements:
        params = None
        if ":q::vector" in stmt:  # the psql recipe: :q is `bookrag embed "…"`
            question = re.search(r'embed "([^"]+)"', SQL_DOC).group(1)
            stmt, params = (
                stmt.replace(":q::vector", "%s::vector"),
                (str(list(map(float, e5.query(question)))),),
            )
        rows = real_corpus.execute(stmt, params).fetchall()
        real_corpus.rollback()
        assert rows, stmt


def test_readme_citations_are_what_the_rule_gives_on_the_real_book(real_corpus):
    """The quick start's scholarly citations (bookrag.cite) are those of the real Pétition hits."""
    from psycopg.rows import dict_row

    from bookrag.cite import add_citations

    with real_corpus.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT * FROM rag.search('fabricants de chandelles soleil', NULL, 'bm25', 10, "
            "'bastiat-sophismes-economiques')"
        ).fetchall()
    real_corpus.rollback()
    hits = [
        r
        for r in add_citations(real_corpus, rows)
        if r["source_file"].endswith("chapitre-07-petition-des-fabricants-de-chandelles/source.md")
    ]
    real_corpus.rollback()
    assert hits
    for h in hits:
        assert h["citation"] == (
            "Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, "
            f"« Pétition des fabricants de chandelles », § {h['paragraph']}"
        )
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert (
        "    cite: Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « Pétition des fabricants de chandelles », § 4"
        in quick
    )


def test_every_readme_command_parses():
    """Each `./run COMMAND …` of README's shell blocks names a real command with options it takes
    (the quick start's are run by .ci/run and the demo; `mcp config` by tests/test_mcp_config.py)."""
    import shlex

    from bookrag.cli import build_parser

    parser = build_parser()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            for part in line.split("#")[0].split("&&"):
                words = [w for w in shlex.split(part) if not re.fullmatch(r"[A-Z_]+=.*", w)]
                if words[:1] == ["./run"] and words[1:2] != ["test"]:
                    commands.append(words[1:])
    assert len(commands) >= 5 and ["demo"] in commands
    for argv in commands:
        parser.parse_args(argv)  # exits (status 2) on an unknown command or option
