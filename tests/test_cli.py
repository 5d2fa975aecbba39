"""The CLI: help with an example for every command, one-sentence errors, the psql path."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bookrag.cli import COMMANDS, build_parser, main
from bookrag.config import DEFAULT_HOME


def test_every_command_has_help_with_an_example(capsys):
    parser = build_parser()
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([name, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "example:" in out and "bookrag" in out.split("example:")[1], name


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bookrag.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_unknown_book(monkeypatch, capsys):
    assert main(["check", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unknown book 'nope': no ")
    assert "bastiat-sophismes-economiques" in err.split("books with a manifest: ")[1].split(", ")


def test_load_of_a_bad_sidecar_names_file_and_line(home, pg_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    sc = home / "corpus/traite-des-echanges/avant-propos/source.md.jsonl"
    lines = sc.read_text().splitlines()
    sc.write_text("\n".join([lines[0], "{not json", *lines[2:]]) + "\n")
    assert main(["load"]) == 1
    assert capsys.readouterr().err.strip().startswith(f"error: {sc}:2: malformed JSON line")


def test_search_and_embed_against_the_fixture(corpus_url, corpus_home, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    assert main(["search", "ornière", "--k", "2", "--json"]) == 0
    import json

    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["source_file"].endswith("chapitre-02-les-routes/source.md") and hits[0]["bm25_rank"] == 1
    assert {
        "rank",
        "score",
        "bm25_rank",
        "vector_rank",
        "source_file",
        "chunk_index",
        "level",
        "node_type",
        "heading_path",
        "content",
    } <= set(hits[0])
    assert main(["search", "", "--k", "2"]) == 1
    assert (
        capsys.readouterr().err.strip() == "error: the query is empty: give at least one word to search for"
    )
    assert main(["embed", "le pain du village"]) == 0
    literal = capsys.readouterr().out.strip()
    assert literal.startswith("[") and len(literal.strip("[]").split(",")) == 384
    import psycopg

    with psycopg.connect(corpus_url) as c:  # the psql recipe: the literal is a valid query vector
        rows = c.execute("SELECT rank FROM rag.search(NULL, %s::vector, 'vector', 3)", (literal,)).fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]


def test_search_within_a_chapter_and_fusion_errors(corpus_url, corpus_home, monkeypatch, capsys):
    import json

    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    chapter = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"
    assert main(["search", "le prix du pain", "--within", chapter, "--json", "--tune", "fusion=rrf"]) == 0
    files = {json.loads(line)["source_file"] for line in capsys.readouterr().out.splitlines()}
    assert files and files <= {chapter, chapter.replace("summary.md", "source.md")}
    # the bounds are the SQL's: its message, word for word, as the CLI's one line
    assert main(["search", "pain", "--tune", "bm25_weight=0", "--tune", "vector_weight=0"]) == 1
    assert (
        capsys.readouterr().err.strip()
        == "error: branch weights are both 0: give at least one branch a positive weight"
    )
    assert main(["search", "pain", "--within", "corpus/nope/summary.md"]) == 1
    assert capsys.readouterr().err.strip() == (
        'error: within "corpus/nope/summary.md" names no loaded node; '
        "use a source_file from a search hit or rag.outline"
    )
    # a chapter's folder names its summary.md
    assert main(["search", "le prix du pain", "--within", chapter.removesuffix("/summary.md"), "--json"]) == 0
    assert {json.loads(line)["source_file"] for line in capsys.readouterr().out.splitlines()} == files


def test_node_candidates_read_what_users_paste():
    from bookrag.search import node_candidates

    f = "corpus/b/p/chapitre-01/source.md"
    assert node_candidates(f) == [f]
    assert node_candidates(f.removeprefix("corpus/")) == [f.removeprefix("corpus/"), f]
    assert node_candidates(f"{f}?hl=2-3#p2") == [f"{f}?hl=2-3#p2", f]
    assert node_candidates("b/p/chapitre-01/") == [
        "b/p/chapitre-01/",
        "corpus/b/p/chapitre-01/",
        "corpus/b/p/chapitre-01/summary.md",
    ]
    assert node_candidates("./corpus/b/summary.md") == ["./corpus/b/summary.md", "corpus/b/summary.md"]
    # a reading-room URL, or its path: a paragraph anchor is the chapter's text, anything else its summary
    url = "http://127.0.0.1:8765/books/b/p/chapitre-01"
    assert node_candidates(f"{url}?hl=2-3#p2")[1] == f
    assert (
        node_candidates(f"{url}#summary-2")[1]
        == node_candidates(url)[1]
        == "corpus/b/p/chapitre-01/summary.md"
    )
    assert node_candidates("b/p/chapitre-01?hl=7#p7")[-1] == f
    assert node_candidates("  #p2 ") == [
        "  #p2 "
    ]  # nothing left to read: only the text itself, which no node is


def test_database_errors_are_one_line(pg_url, monkeypatch, capsys):
    import psycopg

    unmigrated = psycopg.conninfo.make_conninfo(pg_url, dbname="postgres")
    monkeypatch.setenv("DATABASE_URL", unmigrated)
    assert main(["search", "pain"]) == 1
    assert (
        capsys.readouterr().err.strip()
        == 'error: database: schema "rag" does not exist (run `bookrag migrate`)'
    )


def test_bad_levels_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["search", "pain", "--levels", "a"])
    assert exit_.value.code == 2
    assert "levels are comma-separated numbers 0..3, got 'a'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,expected",
    [
        (
            ["eval", "--evalset", "e.jsonl", "--k", "abc"],
            "expected comma-separated whole numbers >= 1, got 'abc'",
        ),
        (["eval", "--evalset", "e.jsonl", "--limit", "-1"], "expected a whole number >= 1, got '-1'"),
        (["eval", "--evalset", "e.jsonl", "--limit", "0"], "expected a whole number >= 1, got '0'"),
        (["eval", "--evalset", "e.jsonl", "--modes", "hybrid,fuzzy"], "got fuzzy"),
        (
            ["eval", "--evalset", "e.jsonl", "--levels", "0,7"],
            "levels are comma-separated numbers 0..3, got '0,7'",
        ),
        (
            ["sweep", "--book", "b", "--evalset", "e.jsonl", "--thresholds", "128,abc"],
            "thresholds are token counts >= 1 or 'paragraph', got 'abc'",
        ),
        (["sweep", "--book", "b", "--evalset", "e.jsonl", "--strategies", "hybrid,bogus"], "got bogus"),
    ],
    ids=[
        "eval k",
        "eval limit -1",
        "eval limit 0",
        "eval mode",
        "eval levels",
        "sweep thresholds",
        "sweep strategies",
    ],
)
def test_eval_and_sweep_options_are_checked_before_any_work(capsys, argv, expected):
    # a malformed option is argparse's usage error (exit 2) naming the value, never a traceback
    # or minutes of embedding before the failure
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_output_cut_by_a_closed_pipe_stops_quietly(fixture_home, monkeypatch, capsys):
    # `bookrag search … | head`: the reader is gone before the buffered output is written; main
    # flushes inside its try, so that is exit 141 without a traceback, not an error at exit
    import io
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    out = io.TextIOWrapper(io.FileIO(write_end, "w"), write_through=False)
    help_, example, _ = COMMANDS["check"]
    monkeypatch.setitem(COMMANDS, "check", (help_, example, lambda args, s: print("a line of hits")))
    monkeypatch.setattr("sys.stdout", out)
    assert main(["check"]) == 141
    out.close()


def test_eval_and_sweep_defaults_parse():
    args = build_parser().parse_args(["eval", "--evalset", "e.jsonl"])
    assert args.mode == ["bm25", "vector", "auto", "hybrid", "hybrid-rrf", "hybrid+parent"]
    assert args.k == [1, 5, 10] and args.levels is None and args.limit is None
    args = build_parser().parse_args(["sweep", "--book", "b", "--evalset", "e.jsonl"])
    assert args.thresholds[:4] == [64, 128, 256, 512] and len(args.thresholds) == 5
    assert args.strategies == [
        "bm25",
        "vector",
        "hybrid",
        "hybrid+parent",
        "two-stage",
        "economic",
        "no-heading",
    ]


def test_sweep_of_an_unknown_book_says_so(fixture_home, capsys):
    assert main(["sweep", "--book", "nosuch", "--evalset", "e.jsonl"]) == 1
    err = capsys.readouterr().err.strip()
    # the message every command gives for an unknown book (loader.manifest.find_book)
    assert err.startswith("error: unknown book 'nosuch': no ") and err.endswith(
        "books with a manifest: traite-des-echanges"
    )


def test_within_takes_a_file_path_too(tmp_path, monkeypatch):
    from bookrag.cli import node_path

    home = tmp_path / "checkout"
    (home / "corpus/b/ch").mkdir(parents=True)
    stored = "corpus/b/ch/summary.md"
    monkeypatch.chdir(home)
    assert node_path(stored, home) == stored
    assert node_path("./corpus/b/ch/summary.md", home) == stored
    assert node_path(str(home / stored), home) == stored
    monkeypatch.chdir(home / "corpus")
    assert node_path("b/ch/summary.md", home) == stored
    assert (
        node_path("/elsewhere/summary.md", home) == "/elsewhere/summary.md"
    )  # left for resolve_node, then the SQL
    assert node_path(None, home) is None


def test_outline_lists_the_nodes_a_search_can_be_kept_within(loaded_cli, capsys):
    import json

    assert main(["outline", "traite-des-echanges", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["source_file"] == "corpus/traite-des-echanges/summary.md" and rows[0]["level"] == 3
    chapter = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"
    assert chapter in [r["source_file"] for r in rows] and len(rows) == len({r["source_file"] for r in rows})
    # the human form, one level: each node's title line, then its source_file
    assert main(["outline", "traite-des-echanges", "--levels", "1"]) == 0
    printed = {
        line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("corpus/")
    }
    assert printed == {r["source_file"] for r in rows if r["level"] == 1} and chapter in printed
    assert main(["outline", "nope"]) == 1
    assert capsys.readouterr().err.startswith('error: unknown book "nope"; known books: traite-des-echanges')


def test_search_budget_packs_parents_as_build_context_does(loaded_cli, capsys):
    import json

    assert main(["search", "le prix du pain", "--budget", "2000", "--json"]) == 0
    roles = {json.loads(line)["role"] for line in capsys.readouterr().out.splitlines()}
    assert roles == {"hit", "parent"}
    assert main(["search", "le prix du pain", "--budget", "2000", "--json", "--expand", "none"]) == 0
    assert {json.loads(line)["role"] for line in capsys.readouterr().out.splitlines()} == {"hit"}
    also = ["--also", "boulanger farine cherté", "--budget", "2000", "--json"]
    assert main(["search", "le prix du pain", *also]) == 0
    assert {json.loads(line)["role"] for line in capsys.readouterr().out.splitlines()} == {"hit", "parent"}
    assert main(["search", "le prix du pain", *also, "--expand", "none"]) == 0  # with phrasings too
    assert {json.loads(line)["role"] for line in capsys.readouterr().out.splitlines()} == {"hit"}


@pytest.fixture
def loaded_cli(corpus_url, corpus_home, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    return corpus_url


SEARCH_ERRORS = [
    (
        ["search", "\udcff\udcfe soleil", "--mode", "bm25"],
        "error: the query is not valid UTF-8 (byte 0xff at character 1); type it again or check the terminal's encoding\n",
    ),
    (["search", "pain", "--k", "100000000000000000000"], "error: k is out of range: 100000000000000000000\n"),
    (
        ["search", "pain", "--tune", "sentence_every=9999999999"],
        'error: tuning {"sentence_every": 9999999999}: value "9999999999" is out of range for type integer\n',
    ),
    (["search", "pain", "--k", "0", "--mode", "bm25"], "error: k must be between 1 and 1000, got 0\n"),
    (
        ["search", "pain", "--budget", "0", "--mode", "bm25"],
        "error: budget must be between 1 and 1000000 tokens, got 0\n",
    ),
    (["search", "x" * 120_000], "error: query is 120000 characters long; the limit is 10000\n"),
    (["search", "   "], "error: the query is empty: give at least one word to search for\n"),
    (
        ["search", "pain", *(a for i in range(5) for a in ("--also", f"mot {i}"))],
        "error: at most 4 phrasings besides the query, got 5\n",
    ),
    (["search", "pain", "--also", "Pain "], 'error: phrasing 1 repeats the query: "Pain "\n'),
]


@pytest.mark.parametrize(
    "argv,expected",
    SEARCH_ERRORS,
    ids=[
        "bad bytes",
        "huge k",
        "huge sentence_every",
        "k 0",
        "budget 0",
        "120 KB query",
        "empty",
        "5 phrasings",
        "a phrasing repeating the query",
    ],
)
def test_search_errors_are_one_sentence(loaded_cli, capsys, argv, expected):
    """Bad bytes on the command line (what Python makes of $'\\xff\\xfe'), out-of-range numbers, a
    query refused before it is embedded: one sentence, exit 1, no traceback."""
    assert main(argv) == 1
    assert capsys.readouterr().err == expected


def test_load_in_a_read_only_session_is_one_sentence(loaded_cli, corpus_home, monkeypatch, capsys):
    """No traceback, no yoyo lock advice: the database's own reason, in one sentence."""
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    assert main(["load", str(corpus_home / "corpus" / "traite-des-echanges")]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: the database refused the load (cannot execute INSERT in a read-only transaction); "
        "nothing was loaded\n"
    )


def test_migrating_in_a_read_only_session_is_one_sentence(pg_url, corpus_home, monkeypatch, capsys):
    import psycopg

    from bookrag.migrate import READ_ONLY

    with psycopg.connect(pg_url, autocommit=True) as c:  # a migration the database has not seen
        c.execute(
            "DELETE FROM _yoyo_migration WHERE migration_id = (SELECT max(migration_id) FROM _yoyo_migration)"
        )
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=on")
    assert main(["migrate"]) == 1
    assert capsys.readouterr().err == f"error: {READ_ONLY}\n"


def test_bad_bytes_from_a_real_shell(loaded_cli, corpus_home):
    import os

    env = {**os.environ, "DATABASE_URL": loaded_cli, "BOOKRAG_HOME": str(corpus_home)}
    r = subprocess.run(
        [sys.executable, "-m", "bookrag.cli", "search", b"\xff\xfe soleil", "--mode", "bm25"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    assert (
        r.stderr.decode()
        == "error: the query is not valid UTF-8 (byte 0xff at character 1); type it again or check the terminal's encoding\n"
    )


# --- every other one-sentence error, word for word ---------------------------------------------


@pytest.fixture
def fixture_home(tmp_path, monkeypatch):
    """The fixture corpus (manifest and .md files, no sidecars) as BOOKRAG_HOME; no database,
    no raw books, no LLM configured."""
    from tests.conftest import make_home

    home = make_home(tmp_path)
    (home / "empty").mkdir()
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    for name in (
        "DATABASE_URL",
        "BOOKRAG_SOURCES",
        "BOOKRAG_MAX_CHUNK_TOKENS",
        "BOOKRAG_EMBEDDER",
        "BOOKRAG_LLM_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
    return home


REFUSED = (
    'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
    "\tIs the server running on that host and accepting TCP/IP connections?"
)
CLI_ERRORS = [
    (
        {"DATABASE_URL": "postgresql://bookrag@127.0.0.1:1/bookrag"},
        ["db", "start"],
        "error: DATABASE_URL is set: bookrag does not manage that server (unset it to use the embedded one)\n",
    ),
    (
        {"DATABASE_URL": "postgresql://bookrag@127.0.0.1:1/bookrag"},
        ["search", "pain"],
        f"error: cannot connect to the database (postgresql://bookrag@127.0.0.1:1/bookrag): {REFUSED}\n",
    ),
    (
        {},
        ["prepare", "traite-des-echanges"],
        "error: {home}/corpus/traite-des-echanges/book.toml: source.kind 'none' has no importer (gutenberg, text, wikisource)\n",
    ),
    ({"BOOKRAG_SOURCES": "{home}/nope"}, ["demo"], "error: BOOKRAG_SOURCES={home}/nope is not a folder\n"),
    ({}, ["sidecars", "nope.txt"], "error: nope.txt: not a .md file or a folder\n"),
    (
        {},
        ["sidecars", "{home}/empty"],
        "error: no source.md or summary.md under {home}/empty; run `bookrag prepare` first\n",
    ),
    (
        {"BOOKRAG_MAX_CHUNK_TOKENS": "8"},
        ["check"],
        "error: BOOKRAG_MAX_CHUNK_TOKENS must be an integer >= 16, got '8'\n",
    ),
    (
        {"BOOKRAG_EMBEDDER": "gpu"},
        ["check"],
        "error: BOOKRAG_EMBEDDER must be 'local' or 'openai', got 'gpu'\n",
    ),
    (
        {"BOOKRAG_LLM_TIMEOUT": "soon"},
        ["check"],
        "error: BOOKRAG_LLM_TIMEOUT must be a number >= 0.001, got 'soon'\n",
    ),
]


@pytest.mark.parametrize(
    "env,argv,expected",
    CLI_ERRORS,
    ids=[
        "db start on DATABASE_URL",
        "no server",
        "kind without importer",
        "sources not a folder",
        "sidecars of a non-.md",
        "sidecars of an empty folder",
        "chunk tokens",
        "embedder",
        "llm timeout",
    ],
)
def test_cli_errors_word_for_word(fixture_home, monkeypatch, capsys, env, argv, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(home=fixture_home))
    assert main([a.format(home=fixture_home) for a in argv]) == 1
    assert capsys.readouterr() == ("", expected.format(home=fixture_home))


def test_check_lists_problems_then_fails(fixture_home, capsys):
    chapter = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes"
    (fixture_home / chapter / "summary.md").unlink()
    assert main(["check"]) == 1
    assert capsys.readouterr() == (
        f"{chapter}/summary.md: missing summary (run `bookrag summarize traite-des-echanges`)\n"
        f"{chapter}/source.md:1: parent_source_file {chapter}/summary.md does not exist\n"
        "1 book, 12 files checked, 2 problems\n"
        "paragraphs cited by a summary anchor: traite-des-echanges 7/9 (78 %)\n",
        "error: 2 problem(s) in the corpus tree\n",
    )


def test_a_bare_prepare_skips_books_it_has_no_input_for(fixture_home, capsys):
    assert main(["prepare"]) == 0
    assert capsys.readouterr() == (
        "traite-des-echanges: skipped (none book: name it with --from EXPORT or --download)\n",
        "",
    )


def test_embed_before_any_load(pg_url, fixture_home, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert main(["embed", "le pain"]) == 1
    assert capsys.readouterr() == (
        "",
        "error: no vectors are loaded, so there is no corpus model to embed with; run `bookrag load` first\n",
    )


def test_bare_bookrag_prints_help_with_the_developer_commands_apart(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: bookrag")
    commands, developer = out.split("developer commands:")
    assert "    search " in commands and "    mcp " in commands
    for name in ("eval", "sweep", "new-function-migration"):
        assert f"\n    {name} " not in commands and f"\n  {name} " in developer


def test_version(capsys):
    """`bookrag --version` is pyproject.toml's version (read from the installed metadata), the
    newest release of CHANGELOG.md."""
    import tomllib

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    declared = tomllib.loads((DEFAULT_HOME / "pyproject.toml").read_text())["project"]["version"]
    assert exit_.value.code == 0 and capsys.readouterr().out == f"bookrag {declared}\n"
    changelog = (DEFAULT_HOME / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M).group(1) == declared


def test_short_k_and_defaults_in_help(capsys):
    parser = build_parser()
    assert (
        parser.parse_args(["search", "pain", "-k", "3"]).k
        == parser.parse_args(["search", "pain", "--k", "3"]).k
        == 3
    )
    assert parser.parse_args(["ask", "pain", "-k", "2"]).k == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["search", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "-k K, --k K number of hits (default: 10)" in out and "auto (default)" in out
    with pytest.raises(SystemExit):
        parser.parse_args(["mcp", "--help"])
    assert "(default: 8765)" in " ".join(capsys.readouterr().out.split())


def test_level_is_a_deprecated_spelling_of_levels(capsys):
    parser = build_parser()
    assert parser.parse_args(["outline", "b", "--levels", "1,2"]).levels == [1, 2]
    assert parser.parse_args(["summarize", "--level", "2"]).levels == [2]
    assert capsys.readouterr().err == "warning: --level is deprecated; use --levels\n"
    with pytest.raises(SystemExit):
        parser.parse_args(["outline", "--help"])
    assert "--level " not in capsys.readouterr().out


def test_eval_takes_modes_and_its_old_spelling_with_a_warning(capsys):
    parser = build_parser()
    assert parser.parse_args(["eval", "--evalset", "e.jsonl", "--modes", "bm25,auto"]).mode == [
        "bm25",
        "auto",
    ]
    assert parser.parse_args(["eval", "--evalset", "e.jsonl", "--mode", "hybrid"]).mode == ["hybrid"]
    assert capsys.readouterr().err == "warning: --mode is deprecated; use --modes\n"
    assert parser.parse_args(["eval", "--evalset", "e.jsonl"]).mode == [
        "bm25",
        "vector",
        "auto",
        "hybrid",
        "hybrid-rrf",
        "hybrid+parent",
    ]
