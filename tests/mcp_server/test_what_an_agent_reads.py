"""What an agent reads (issue 45, item 4), through the SDK's own client against a real database:
no empty fields, a node's citation given once, notes marked (the editor's apart from the
author's), the part of a split paragraph, rag.paragraphs readable with `SELECT *`, and a prompt
that says what the tools do."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import psycopg
import pytest
from mcp import Client

from bookrag import db
from bookrag.cli import main
from mcp_server.server import CONNECTION_OPTIONS, build_server
from tests.conftest import BOOK, loaded_database, settings_for

ROUTES = f"corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/source.md"
CITE = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes », "
#: The team's own words: an editor's note (long enough to be split in two chunks: its label is on
#: the first, its mark on the last) and the author's own note.
EDITOR = (
    "[^1]: Le péage fut supprimé l'année suivante par le conseil du village. Les marchands ne "
    "baissèrent pourtant pas leurs prix, et les charretiers continuèrent longtemps de passer par le gué. "
    "(_Note de l'éditeur._)"
)
AUTHOR = "[^2]: Je tiens ce proverbe d'un meunier de la vallée."
MAX_TOKENS = 30  # §1 (two sentences) and the editor's note come in two chunks each


@pytest.fixture(scope="module")
def notes_home(tmp_path_factory: pytest.TempPathFactory, corpus_home: Path, e5) -> Path:
    from loader.sidecars import write_sidecars

    home = tmp_path_factory.mktemp("notes") / "home"
    shutil.copytree(corpus_home, home)
    source = home / ROUTES
    text = source.read_text(encoding="utf-8")
    for old, new in (
        ("du montant exact du péage.", "du montant exact du péage[^1]."),
        ("le blé de la table.", "le blé de la table[^2]."),
    ):
        assert old in text
        text = text.replace(old, new)
    source.write_text(text.rstrip("\n") + f"\n\n{EDITOR}\n\n{AUTHOR}\n", encoding="utf-8")
    write_sidecars([source], home, MAX_TOKENS, e5, progress=False)
    return home


@pytest.fixture(scope="module")
def notes_url(postgresql_proc, notes_home: Path) -> Iterator[str]:
    yield from loaded_database(postgresql_proc, "bookrag_notes_fixture", notes_home)


def nulls(value: Any, path: str = "") -> list[str]:
    """Every path in a result whose value is null."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in nulls(v, f"{path}[{i}]")]
    return []


def call_all(
    url: str, home: Path, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[Any], dict[str, Any]]:
    """Each call's result (as the reader role, through the SDK client) and every tool's description."""
    reader = psycopg.conninfo.make_conninfo(db.with_user(url, db.READER_ROLE), options=CONNECTION_OPTIONS)
    server = build_server(settings_for(home, url), url=reader)

    async def go() -> tuple[list[Any], dict[str, Any]]:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out = []
            for name, args in calls:
                r = await client.call_tool(name, args)
                assert not r.is_error, (name, args, r.content)
                # what a client checks: the structured content against the published output schema
                jsonschema.validate(r.structured_content, tools[name].output_schema)
                out.append(r)
            walk = await client.get_prompt("answer_from_the_books", {"question": "Qui paie les routes ?"})
            return out, {"tools": tools, "prompt": walk.messages[0].content.text}

    return anyio.run(go)


def test_hits_leave_out_what_carries_nothing_and_mark_notes(notes_url, notes_home):
    (editor, author, plain), meta = call_all(
        notes_url,
        notes_home,
        [
            ("search", {"query": "le péage fut supprimé l'année suivante", "k": 5, "levels": [0]}),
            ("search", {"query": "je tiens ce proverbe d'un meunier", "k": 5, "levels": [0]}),
            ("search", {"query": "la charrette du meunier", "k": 5}),
        ],
    )
    for r in (editor, author, plain):
        assert nulls(r.structured_content) == []
        assert ": null" not in r.content[0].text  # the text content (JSON) an agent reads
        assert all(
            "cites" not in h and "parent" not in h and "cited" not in h for h in r.structured_content["hits"]
        )
    note = next(h for h in editor.structured_content["hits"] if "supprimé" in h["content"])
    assert note["kind"] == "editor_note" and note["citation"]["note"] == "1"
    assert note["citation"]["scholarly"] == f"{CITE}note 1 de l'éditeur, § 4"
    # split in chunks: the label is on the first, the mark on the last, and every chunk says so
    assert note["citation"]["part"].split("/")[1] != "1"
    mine = next(h for h in author.structured_content["hits"] if "proverbe" in h["content"])
    assert mine["kind"] == "note" and mine["citation"]["scholarly"] == f"{CITE}note 2, § 5"
    assert "part" not in mine["citation"]  # a paragraph in one chunk
    text = [
        h
        for h in plain.structured_content["hits"]
        if h["citation"]["source_file"] == ROUTES and h["citation"]["paragraph"] <= 3
    ]
    assert text and all(h["kind"] == "text" and "note" not in h["citation"] for h in text)
    first = next(h for h in text if h["citation"]["paragraph"] == 1)
    assert first["citation"]["part"] in ("1/2", "2/2") and first["citation"]["scholarly"] == f"{CITE}§ 1"

    search = meta["tools"]["search"]
    assert "copy as is" in search.description and "editor_note" in search.description
    assert "copy as is" in json.dumps(search.output_schema)


def test_a_node_gives_its_citation_once(notes_url, notes_home):
    (whole, parent, kids), _ = call_all(
        notes_url,
        notes_home,
        [
            ("get_node", {"source_file": ROUTES}),
            ("get_parent", {"source_file": ROUTES}),
            ("get_children", {"source_file": ROUTES.replace("source.md", "summary.md")}),
        ],
    )
    node = whole.structured_content
    assert node["url"] == (
        "http://127.0.0.1:8765/books/traite-des-echanges/premiere-partie/chapitre-02-les-routes"
    )
    assert node["heading_path"].endswith("Chapitre II (Les routes)") and node["last_paragraph"] == 5
    for chunk in node["chunks"]:
        # the node's book, heading_path, source_file, level and url are not repeated
        assert set(chunk) <= {"citation", "content", "tokens", "kind", "cites"}
        assert set(chunk["citation"]) <= {"chunk_index", "paragraph", "part", "note", "scholarly"}
    marks: dict[int, list[tuple[str | None, str, str | None]]] = {}
    for c in node["chunks"]:
        marks.setdefault(c["citation"]["paragraph"], []).append(
            (c["citation"].get("part"), c["kind"], c["citation"].get("note"))
        )
    assert sorted(marks) == [1, 2, 3, 4, 5]
    for paragraph, kind, note in ((1, "text", None), (4, "editor_note", "1")):  # split in several chunks
        n = len(marks[paragraph])
        assert n >= 2 and marks[paragraph] == [(f"{i}/{n}", kind, note) for i in range(1, n + 1)]
    assert marks[5] == [(None, "note", "2")]
    assert {c["citation"]["scholarly"] for c in node["chunks"] if c["citation"]["paragraph"] == 4} == {
        f"{CITE}note 1 de l'éditeur, § 4"
    }
    assert nulls(node) == [] and ": null" not in whole.content[0].text
    assert all(
        "citation" in c and "source_file" not in c["citation"] for c in parent.structured_content["chunks"]
    )
    assert parent.structured_content["url"].endswith("chapitre-02-les-routes")
    assert [c["citation"]["paragraph"] for n in kids.structured_content["included"] for c in n["chunks"]][
        :2
    ] == [1, 1]


def test_paragraphs_are_readable_with_select_star(notes_url, notes_home):
    (star, notes), meta = call_all(
        notes_url,
        notes_home,
        [
            ("read_only_sql", {"sql": "SELECT * FROM rag.paragraphs LIMIT 5"}),
            (
                "read_only_sql",
                {
                    "sql": f"SELECT paragraph, part, parts, kind, note FROM rag.paragraphs "
                    f"WHERE source_file = '{ROUTES}' AND kind LIKE '%note' ORDER BY chunk_index"
                },
            ),
        ],
    )
    out = star.structured_content
    assert len(out["rows"]) == 5 and "embedding" not in out["columns"]
    assert {
        "book",
        "source_file",
        "heading_path",
        "paragraph",
        "part",
        "parts",
        "kind",
        "note",
        "content",
        "tokens",
    } <= set(out["columns"])
    assert all(len(json.dumps(row)) < 5000 for row in out["rows"])
    rows = notes.structured_content["rows"]
    n = len(rows) - 1
    assert rows == [[4, i, n, "editor_note", "1"] for i in range(1, n + 1)] + [[5, 1, 1, "note", "2"]]
    sql = meta["tools"]["read_only_sql"]
    described = sql.input_schema["properties"]["sql"]["description"]
    assert (
        "rag.paragraphs" in described
        and "never SELECT *" in described
        and "rag.paragraphs" in sql.description
    )


def test_the_prompt_says_what_the_tools_do(notes_url, notes_home):
    _, meta = call_all(notes_url, notes_home, [])
    prompt = meta["prompt"]
    assert "`get_parent` on a paragraph hit gives its chapter summary" not in prompt
    assert "its `source_file` is the whole chapter's" in prompt and "`paragraphs`" in prompt
    assert "copied as is" in prompt and "editor_note" in prompt and '"1/2"' in prompt


def test_the_cli_says_which_part_and_whose_note(notes_url, notes_home, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", notes_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(notes_home))
    assert main(["search", "le péage fut supprimé l'année suivante", "-k", "3", "--levels", "0"]) == 0
    out = capsys.readouterr().out
    assert f"cite: {CITE}note 1 de l'éditeur, § 4" in out
    assert "a note of the book's editor, not the author's words" in out
    assert f"{ROUTES} §4 (1/" in out
