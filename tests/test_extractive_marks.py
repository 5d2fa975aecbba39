"""An extractive summary is marked as the author's sentences arranged by a program, from its
frontmatter (`generator: extractive`) to its sidecar, its rows (kind 'extractive_summary',
migration 0040), the scholarly citation, the CLI's hits and the MCP search tool's; a sidecar
whose kind disagrees with its summary is refused, naming its line (decision 0040)."""

from __future__ import annotations

import json

import anyio
import psycopg
import pytest
from mcp import Client

from bookrag import db
from bookrag.cite import EXTRACTIVE_LABEL, BookMeta, scholarly
from bookrag.cli import main
from bookrag.errors import BookragError
from loader.load import load
from loader.manifest import find_book
from loader.sidecars import read_sidecar, sidecar_path, write_sidecars
from loader.summarize import summarize_book
from mcp_server.server import CONNECTION_OPTIONS, build_server
from tests.conftest import BOOK, settings_for

ROUTES = f"corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/summary.md"
PART = f"corpus/{BOOK}/premiere-partie/summary.md"
HEADING = "Petit traité des échanges > Première partie > Chapitre II (Les routes) (résumé)"


def test_the_citation_of_an_extractive_summary():
    meta = BookMeta("Équipe bookrag", "Petit traité des échanges", 2026)
    assert scholarly(meta, HEADING, 1, "summary", "extractive_summary") == (
        "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes », "
        f"{EXTRACTIVE_LABEL}, § 1"
    )
    assert scholarly(meta, HEADING, 1, "summary", "text").endswith(", « Les routes », résumé, § 1")


@pytest.fixture
def extractive_home(home, e5):
    """The fixture corpus whose chapter summaries (level 1) the extractive provider rewrote, with
    their sidecars; the part and book summaries stay the team's."""
    settings = settings_for(home, None)
    report = summarize_book(
        settings,
        find_book(settings.corpus, BOOK),
        provider="extractive",
        levels={1},
        force=True,
        progress=False,
    )
    assert ROUTES in report.generated
    write_sidecars(sorted((home / "corpus").rglob("*.md")), home, 400, e5, progress=False)
    return home


def test_the_mark_goes_from_the_frontmatter_to_the_rows(extractive_home, pg_url):
    sc = read_sidecar(sidecar_path(extractive_home / ROUTES))
    assert sc.manifest["kind"] == "extractive_summary"
    assert sc.chunks and all(c["kind"] == "extractive_summary" for c in sc.chunks)
    team = read_sidecar(sidecar_path(extractive_home / PART))
    assert "kind" not in team.manifest and all("kind" not in c for c in team.chunks)
    conn = db.connect(pg_url)
    try:
        load(conn, extractive_home, [extractive_home / "corpus" / BOOK])
        kinds = dict(
            conn.execute(
                "SELECT source_file, array_agg(DISTINCT kind) FROM rag.hierarchical_content_nodes "
                "WHERE source_file IN (%s, %s) GROUP BY source_file",
                (ROUTES, PART),
            ).fetchall()
        )
        assert kinds == {ROUTES: ["extractive_summary"], PART: ["text"]}
        with pytest.raises(psycopg.errors.CheckViolation):  # the mark is for summary rows only
            conn.execute(
                "UPDATE rag.hierarchical_content_nodes SET kind = 'extractive_summary' WHERE node_type = 'source'"
            )
    finally:
        conn.close()


def test_load_refuses_a_sidecar_whose_kind_disagrees(extractive_home, pg_url):
    path = sidecar_path(extractive_home / ROUTES)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    del rows[1]["kind"]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    conn = db.connect(pg_url)
    try:
        with pytest.raises(BookragError) as err:
            load(conn, extractive_home, [extractive_home / "corpus" / BOOK])
        assert str(err.value) == (
            f"{path}:2: kind 'text', but {ROUTES} was written by 'extractive'; run `bookrag sidecars {ROUTES}`"
        )
        assert conn.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone()[0] == 0
    finally:
        conn.close()


def test_hits_say_it_in_the_cli_and_the_mcp_tools(extractive_home, pg_url, monkeypatch, capsys):
    conn = db.connect(pg_url)
    load(conn, extractive_home, [extractive_home / "corpus" / BOOK])
    conn.close()
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(extractive_home))
    query = "routes ornière péage"
    assert main(["search", query, "--levels", "1", "-k", "5", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    marked = [h for h in hits if h["source_file"] == ROUTES]
    assert marked and all(h["kind"] == "extractive_summary" for h in marked)
    assert all(EXTRACTIVE_LABEL in h["citation"] for h in marked)
    assert all(EXTRACTIVE_LABEL not in h["citation"] for h in hits if h["kind"] != "extractive_summary")
    assert main(["search", query, "--levels", "1", "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert "    the author's sentences chosen by a program: quote the paragraphs it cites, not it" in out

    reader = psycopg.conninfo.make_conninfo(db.with_user(pg_url, db.READER_ROLE), options=CONNECTION_OPTIONS)
    server = build_server(settings_for(extractive_home, pg_url), url=reader)

    async def search() -> dict:
        async with Client(server) as client:
            r = await client.call_tool("search", {"query": query, "k": 5, "levels": [1]})
            assert not r.is_error, r.content
            return r.structured_content

    found = [h for h in anyio.run(search)["hits"] if h["citation"]["source_file"] == ROUTES]
    assert found and all(h["kind"] == "extractive_summary" for h in found)
    assert all(EXTRACTIVE_LABEL in h["citation"]["scholarly"] for h in found)


def test_the_reading_room_says_it(extractive_home, pg_url):
    from tests.mcp_server.test_reading_room import client_for

    conn = db.connect(pg_url)
    load(conn, extractive_home, [extractive_home / "corpus" / BOOK])
    conn.close()
    mark = "the author's sentences chosen by a program"
    with client_for(settings_for(extractive_home, pg_url)) as room:
        chapter = room.get(f"/books/{BOOK}/premiere-partie/chapitre-02-les-routes")
        assert chapter.status_code == 200
        assert (
            '<p class="meta extractive-summary" lang="en">the author\'s sentences chosen by a program, '
            "not a summary: quote the paragraphs they cite</p>" in chapter.text
        )
        tree = room.get(f"/books/{BOOK}")
        assert tree.status_code == 200
        # the five chapter summaries are the provider's; the parts' and the book's are the team's
        assert tree.text.replace("&#39;", "'").count(f"({mark})") == 5
