"""Docs as tests: README is the manual (at most 300 lines; every command in its table, every MCP
tool, client configurations of the right shape, links that resolve); docs/commands.md has a
section per command, docs/sql.md every public SQL function; the quick start has two commands and
.ci/run runs the second; the SQL examples of README and docs/sql.md run as printed on the real books."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from dataclasses import dataclass

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


def test_bench_readme_holds_the_current_figures_only():
    """At most 300 lines, each current figure with its command (a figure's history: CHANGELOG, git)."""
    bench = (DEFAULT_HOME / "bench" / "README.md").read_text(encoding="utf-8")
    assert len(bench.splitlines()) <= 300
    table = bench.split("## Current figures\n", 1)[1].split("\n### ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| what ")]
    assert len(rows) >= 10 and all("`" in r.split(" | ")[-1] for r in rows)  # the command, in code


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


# --- every name the docs give exists -------------------------------------------------------
# README.md and docs/*.md are contracts: each `rag.<name>`, repository path, `bookrag <command>
# --flag`, environment variable and (in README) the absence of measured figures is checked here.
# docs/decisions/ is history (a decision names what was true when it was taken) and is not
# checked; bench/README.md holds the figures, CHANGELOG.md the history.

CHECKED_DOCS = [DEFAULT_HOME / "README.md", *sorted((DEFAULT_HOME / "docs").glob("*.md"))]
#: generated and git-ignored (source.md and the sidecars): their folder must exist, not the file
GENERATED = re.compile(r"(source\.md|\.jsonl)$")
CODE_FILES = ("bookrag", "loader", "mcp_server", "evaluation", "bench", "tests")
SHELL_FILES = ("run", ".ci/run")


@dataclass(frozen=True)
class Facts:
    """What exists: the migrated database's rag objects, the repository's files, the commands
    and their options (from their --help), the environment variables the code reads."""

    rag_names: frozenset[str]
    top_level: frozenset[str]  # first path parts of the repository's files
    command_help: dict[str, str]  # "search", "mcp config", … -> its --help
    env_read: frozenset[str]


def code_spans(text: str) -> list[str]:
    """Fenced blocks and inline code: where docs name commands, paths and flags."""
    fenced = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    rest = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    return fenced + re.findall(r"`([^`\n]+)`", rest)


def _help_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    helps = {"": parser.format_help()}
    for action in parser._actions:  # argparse keeps its subcommands there; no public accessor
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for key, text in _help_of(sub).items():
                    helps[f"{name} {key}".strip()] = text
    return helps


def repository_facts(conn) -> Facts:
    from bookrag.cli import build_parser

    rag_names = {
        r[0]
        for r in conn.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'rag'::regnamespace "
            "UNION SELECT relname FROM pg_class WHERE relnamespace = 'rag'::regnamespace "
            "UNION SELECT typname FROM pg_type WHERE typnamespace = 'rag'::regnamespace"
        ).fetchall()
    }
    conn.rollback()
    files = subprocess.run(
        ["git", "ls-files"], cwd=DEFAULT_HOME, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    code = [
        p.read_text(encoding="utf-8")
        for top in CODE_FILES
        for p in (DEFAULT_HOME / top).rglob("*.py")
        if ".venv" not in p.parts
    ] + [(DEFAULT_HOME / s).read_text(encoding="utf-8") for s in SHELL_FILES]
    env_read = set()
    for text in code:
        env_read.update(re.findall(r"[\"'$]\{?([A-Z][A-Z0-9_]*[A-Z0-9])\b", text))
    return Facts(
        frozenset(rag_names),
        frozenset(f.split("/", 1)[0] for f in files),
        _help_of(build_parser()),
        frozenset(env_read),
    )


def _path_problem(path: str, facts: Facts) -> str | None:
    path = re.sub(r"(:\d+(-\d+)?|::\w+|#.*)$", "", path.strip().rstrip(".,;:)"))
    parts = path.split("/")
    if (
        parts[0] not in facts.top_level
        or re.search(r"[<>*{}…|]|\.\.\.|[_-]$", path)  # a pattern (corpus/<slug>/…) or a prefix (test_)
        or any(re.match(r"[A-Z]{2,}", p) for p in parts)  # a placeholder (corpus/BOOK)
    ):
        return None
    if parts[0] == "corpus" and len(parts) > 1 and not (DEFAULT_HOME / "corpus" / parts[1]).is_dir():
        return None  # a book the reader adds (docs/add-a-book.md), not one the repository ships
    where = DEFAULT_HOME / path
    ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=DEFAULT_HOME).returncode == 0
    if ignored:  # generated (source.md, sidecars, PIAF's evalset): its folder must exist
        where = where.parent
    return None if where.exists() else f"path {path} does not exist"


def _command_problems(span: str, facts: Facts) -> list[str]:
    out = []
    for line in span.splitlines():
        if line.lstrip().startswith(("claude ", "--")):
            continue  # another program's command line (its server is named bookrag), a SQL comment
        for m in re.finditer(
            r"(?:^|[\s/(])(?:bookrag|\./run) ([a-z][a-z0-9-]*)((?:[ \t]+[^\s|;&#]+)*)", line
        ):
            words = m.group(2).split()
            if m.group(1) == "test":
                continue  # ./run test: pytest's own arguments
            command = m.group(1)
            if words and f"{command} {words[0]}" in facts.command_help:
                command = f"{command} {words[0]}"
            if command not in facts.command_help:
                out.append(f"command `bookrag {command}` does not exist")
                continue
            for flag in (w.split("=", 1)[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)):
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", facts.command_help[command]):
                    out.append(f"`bookrag {command}` has no option {flag} (its --help)")
    return out


#: a measured figure: a duration, a speed-up, a recall or MRR with three decimals
FIGURE = re.compile(
    r"\b\d[\d.,]*\s*(?:[–-]\s*\d[\d.,]*\s*)?(?:ms|s|sec|min|minutes|hours?)\b|\b\d+(?:\.\d+)?\s*×|\b0\.\d{3}\b"
)
#: words of a bound the code sets (a limit, a timeout), not of a measurement
BOUND = re.compile(r"at most|limit|timeout|time out|default|within|up to|budget|seconds per", re.I)


def doc_problems(text: str, facts: Facts, readme: bool = False) -> list[str]:
    """Every name in text that does not exist (and, in README, every measured figure)."""
    out = [
        f"rag.{name} is not in the migrated database"
        for name in sorted(set(re.findall(r"(?<![\w.])rag\.([a-z_][a-z0-9_]*)\b", text)))
        if name not in facts.rag_names and not name.endswith("_")  # rag.get_*: a prefix
    ]
    for span in code_spans(text):
        for word in re.findall(r"[\w./:-]+", span):
            if re.match(r"[0-9a-f]{7,40}:", word):
                continue  # `git show <commit>:<path>`: a file of an older commit
            word = word.split(":", 1)[0] if "://" not in word else ""
            if "/" in word or word in facts.top_level:
                problem = _path_problem(word, facts)
                if problem:
                    out.append(problem)
        out += _command_problems(span, facts)
    for name in sorted(set(re.findall(r"\b((?:BOOKRAG|OPENAI)_[A-Z0-9_]*[A-Z0-9]|DATABASE_URL)\b", text))):
        if name not in facts.env_read:
            out.append(f"environment variable {name} is read nowhere in the code")
    if readme:
        for line in text.splitlines():
            if not BOUND.search(line):
                out += [
                    f"measured figure {m.group(0)!r} in README: {line.strip()[:80]}"
                    for m in FIGURE.finditer(line)
                ]
    return sorted(set(out))


@pytest.fixture(scope="module")
def facts(postgresql_proc) -> Facts:
    import psycopg

    url = psycopg.conninfo.make_conninfo(
        host=postgresql_proc.host,
        port=postgresql_proc.port,
        user=postgresql_proc.user,
        dbname=postgresql_proc.template_dbname,
    )
    with psycopg.connect(url) as conn:
        return repository_facts(conn)


@pytest.mark.parametrize("doc", CHECKED_DOCS, ids=lambda p: p.name)
def test_the_doc_names_only_what_exists(doc, facts):
    problems = doc_problems(doc.read_text(encoding="utf-8"), facts, readme=doc.name == "README.md")
    assert not problems, f"{doc.relative_to(DEFAULT_HOME)}:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "planted,problem",
    [
        ("Call `rag.search_hybrid(...)` for both.", "rag.search_hybrid is not in the migrated database"),
        ("See `sql/functions/search_hybrid.sql`.", "path sql/functions/search_hybrid.sql does not exist"),
        ("Run `bookrag frobnicate`.", "command `bookrag frobnicate` does not exist"),
        (
            'Run `bookrag search --frobnicate 3 "pain"`.',
            "`bookrag search` has no option --frobnicate (its --help)",
        ),
        (
            "```bash\n./run search --bogus pain\n```",
            "`bookrag search` has no option --bogus",
        ),
        (
            "Set `BOOKRAG_FROBNICATE=1`.",
            "environment variable BOOKRAG_FROBNICATE is read nowhere in the code",
        ),
        ("The search takes 12.5 ms.", "measured figure '12.5 ms' in README"),
        ("Recall@5 is 0.857 on the held-out half.", "measured figure '0.857' in README"),
    ],
)
def test_the_checker_finds_a_planted_wrong_name(planted, problem, facts):
    found = doc_problems(planted, facts, readme=True)
    assert any(p.startswith(problem) for p in found), found
    # and the same kinds of names, right, pass
    right = (
        '`rag.search(...)`, `sql/functions/search.sql`, `bookrag search --book x "pain"`, '
        "`./run mcp config`, `BOOKRAG_HOME`, read_only_sql (5 s, 500 rows at most)"
    )
    assert doc_problems(right, facts, readme=True) == []


# --- docs/scaling.md's schema change for Citus, "verified here" ----------------------------

SCALING_DOC = (DEFAULT_HOME / "docs" / "scaling.md").read_text(encoding="utf-8")


def scaling_blocks() -> tuple[str, str]:
    """The schema change marked "verified here" and the distribution block after it."""
    after = SCALING_DOC.split("**verified here** (single node, no Citus)", 1)[1]
    change, distribution = re.findall(r"```sql\n(.*?)```", after, re.S)[:2]
    return change, distribution


def test_the_citus_schema_change_runs_as_printed(conn):
    import psycopg

    change, distribution = scaling_blocks()
    statements = [s for s in change.split(";") if s.strip() and s.strip().upper() not in ("BEGIN", "COMMIT")]
    statements += [
        s
        for s in distribution.split(";")
        if re.search(r"^\s*(ALTER TABLE|CREATE INDEX)", re.sub(r"--[^\n]*", "", s), re.M)
    ]  # its foreign keys and BM25 index, without the Citus calls
    assert len(statements) >= 15 and any("sentences_chunk_fkey" in s for s in statements)
    for stmt in statements:
        conn.execute(stmt)
    conn.execute("INSERT INTO rag.books (book, title) VALUES ('b', 'B')")
    row = (
        "INSERT INTO rag.hierarchical_content_nodes (level, node_type, source_file, source_file_hash, "
        "chunk_index, content, book) VALUES (0, 'source', 'corpus/b/x/source.md', %s, 0, 'le pain du boulanger', %s)"
    )
    digest = "sha256:" + "0" * 64
    for book, refused in ((None, psycopg.errors.NotNullViolation), ("c", psycopg.errors.CheckViolation)):
        with pytest.raises(refused), conn.transaction():
            conn.execute(row, (digest, book))
    conn.execute(row, (digest, "b"))
    found = conn.execute(
        "SELECT source_file FROM rag.search('boulanger', p_mode => 'bm25', p_book => 'b')"
    ).fetchall()
    assert found == [("corpus/b/x/source.md",)]
