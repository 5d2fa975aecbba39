"""Scholarly citations (bookrag.cite): the rule on each kind of heading, then every hit of the
CLI and of the MCP search tool carrying it, from the real fixture database."""

from __future__ import annotations

import json

import anyio
import psycopg
import pytest
from mcp import Client

from bookrag import db
from bookrag.cite import BookMeta, scholarly, surname
from bookrag.cli import main
from mcp_server.server import CONNECTION_OPTIONS, build_server
from tests.conftest import settings_for

BASTIAT = BookMeta("Frédéric Bastiat", "Sophismes économiques", 1848)
TOCQUEVILLE = BookMeta("Alexis de Tocqueville", "De la démocratie en Amérique", 1840, "II")
LIST = BookMeta("Friedrich List", "Système national d'économie politique", 1857)


@pytest.mark.parametrize(
    "meta, heading, paragraph, node_type, expected",
    [
        (
            BASTIAT,
            "Sophismes économiques > Première série > Chapitre VII (Pétition des fabricants de chandelles)",
            4,
            "source",
            "Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « Pétition des fabricants de chandelles », § 4",
        ),
        (
            BASTIAT,
            "Sophismes économiques > Première série > Chapitre VII (Pétition des fabricants de chandelles) (résumé)",
            1,
            "summary",
            "Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « Pétition des fabricants de chandelles », "
            "résumé, § 1",
        ),
        (
            BASTIAT,
            "Sophismes économiques > Deuxième série > Conclusion",
            3,
            "source",
            "Bastiat, *Sophismes économiques* (1848), 2e série, « Conclusion », § 3",
        ),
        (
            TOCQUEVILLE,
            "De la démocratie en Amérique > Avertissement",
            2,
            "source",
            "Tocqueville, *De la démocratie en Amérique*, II (1840), « Avertissement », § 2",
        ),
        (
            TOCQUEVILLE,
            "De la démocratie en Amérique (résumé)",
            1,
            "summary",
            "Tocqueville, *De la démocratie en Amérique*, II (1840), résumé, § 1",
        ),
        (
            LIST,
            "Système national d'économie politique > Livre deuxième > Chapitre III (La division nationale du travail)",
            5,
            "source",
            "List, *Système national d'économie politique* (1857), livre II, ch. III, « La division nationale du travail », § 5",
        ),
        (
            None,
            "Essai sur les routes > Chapitre I (Le pont)",
            None,
            "source",
            "*Essai sur les routes*, ch. I, « Le pont »",
        ),
        # a chapter's text before its first section: "début", not the chapter's title again
        (
            TOCQUEVILLE,
            "De la démocratie en Amérique > Deuxième partie > Des partis aux États-Unis > "
            "Des partis aux États-Unis (début)",
            3,
            "source",
            "Tocqueville, *De la démocratie en Amérique*, II (1840), 2e partie, « Des partis aux États-Unis », début, § 3",
        ),
        (
            LIST,
            "Système national d'économie politique > Livre deuxième > Chapitre III (La division nationale du travail) > "
            "La division nationale du travail (début)",
            2,
            "source",
            "List, *Système national d'économie politique* (1857), livre II, ch. III, « La division nationale du travail », début, § 2",
        ),
        # a section whose own title ends so, under another chapter, keeps its title
        (
            TOCQUEVILLE,
            "De la démocratie en Amérique > Des partis > Le jury (début)",
            1,
            "source",
            "Tocqueville, *De la démocratie en Amérique*, II (1840), « Des partis », « Le jury (début) », § 1",
        ),
    ],
)
def test_the_rule(meta, heading, paragraph, node_type, expected):
    assert scholarly(meta, heading, paragraph, node_type) == expected


def test_surnames():
    assert [
        surname(a) for a in ("Frédéric Bastiat", "Alexis de Tocqueville", "Friedrich List", "Montesquieu")
    ] == ["Bastiat", "Tocqueville", "List", "Montesquieu"]


ROUTES = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes », § "


def test_cli_search_hits_carry_their_citation(corpus_url, corpus_home, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    assert main(["search", "ornière", "-k", "2", "--json", "--expand", "parent"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits[0]["citation"] == f"{ROUTES}{hits[0]['paragraph']}"
    assert all(p["citation"].endswith(", résumé, § 1") for p in hits[0]["parent"])
    assert main(["search", "ornière", "-k", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"    cite: {hits[0]['citation']}"


def test_mcp_search_hits_carry_a_scholarly_citation(corpus_url, corpus_home):
    reader = psycopg.conninfo.make_conninfo(
        db.with_user(corpus_url, db.READER_ROLE), options=CONNECTION_OPTIONS
    )
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)

    async def main_() -> dict:
        async with Client(server) as client:
            r = await client.call_tool(
                "search", {"query": "ornière", "k": 2, "expand_parent": True, "token_budget": 300}
            )
            assert not r.is_error, r.content
            out = r.structured_content
            source_file = out["hits"][0]["citation"]["source_file"]
            for tool, args in (
                ("get_node", {"source_file": source_file}),
                ("get_parent", {"source_file": source_file}),
                ("get_children", {"source_file": source_file.replace("source.md", "summary.md")}),
            ):
                r = await client.call_tool(tool, args)
                assert not r.is_error, r.content
                out[tool] = r.structured_content
            return out

    out = anyio.run(main_)
    first = out["hits"][0]["citation"]
    assert first["scholarly"] == f"{ROUTES}{first['paragraph']}"
    assert all(
        p["citation"]["scholarly"].startswith("bookrag, *Petit traité des échanges* (2026)")
        for h in out["hits"]
        for p in h["parent"]
    )
    assert all(c["citation"]["scholarly"] for c in out["context"])
    node = out["get_node"]["chunks"]
    assert [c["citation"]["scholarly"] for c in node] == [
        f"{ROUTES}{c['citation']['paragraph']}" for c in node
    ]
    assert all(
        c["citation"]["scholarly"].endswith(f"résumé, § {c['citation']['paragraph']}")
        for c in out["get_parent"]["chunks"]
    )
    assert all(
        c["citation"]["scholarly"] == f"{ROUTES}{c['citation']['paragraph']}"
        for n in out["get_children"]["included"]
        for c in n["chunks"]
    )
