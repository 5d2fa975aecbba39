"""Every citation links to its paragraph in the reading room (bookrag/links.py): one function
builds the URL, from BOOKRAG_READING_ROOM_URL, for the CLI, the MCP tools and the pages."""

from __future__ import annotations

import json

import pytest

from bookrag.cli import main
from bookrag.config import load_settings
from bookrag.errors import BookragError
from bookrag.links import citation_url, compress

CHAPTER = "corpus/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger"


def test_citation_urls():
    base = "http://127.0.0.1:8765"
    assert (
        citation_url(base, f"{CHAPTER}/source.md", 12)
        == f"{base}/books/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger?hl=12#p12"
    )
    assert (
        citation_url("", f"{CHAPTER}/source.md", [7, 4, 5, 6, 9])
        == "/books/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger?hl=4-7,9#p4"
    )
    assert (
        citation_url(base + "/", f"{CHAPTER}/source.md")
        == f"{base}/books/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger"
    )
    assert (
        citation_url("", f"{CHAPTER}/summary.md", 2)
        == "/books/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger#summary-2"
    )
    assert (
        citation_url("", "corpus/traite-des-echanges/premiere-partie/summary.md")
        == "/books/traite-des-echanges/premiere-partie"
    )
    assert (
        citation_url("", "corpus/traite-des-echanges/summary.md", 1) == "/books/traite-des-echanges#summary-1"
    )
    for bad in (
        "/etc/passwd",
        "corpus/x",
        "corpus/../etc/summary.md",
        "corpus//summary.md",
        "notes/x/summary.md",
    ):
        assert citation_url(base, bad, 1) is None
    assert compress([3, 1, 2, 2, 9, 10, 12]) == "1-3,9-10,12"


def test_the_base_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("BOOKRAG_READING_ROOM_URL", raising=False)
    assert load_settings().reading_room_url == "http://127.0.0.1:8765"
    monkeypatch.setenv("BOOKRAG_READING_ROOM_URL", "https://books.example.org/room/")
    assert load_settings().reading_room_url == "https://books.example.org/room"
    for bad in ("books.example.org", "ftp://x", "http://x/?a=1", "http://a b"):
        monkeypatch.setenv("BOOKRAG_READING_ROOM_URL", bad)
        with pytest.raises(BookragError) as err:
            load_settings()
        assert str(err.value) == (
            "BOOKRAG_READING_ROOM_URL must be an http:// or https:// address without query or "
            f"fragment (e.g. http://127.0.0.1:8765), got {bad!r}"
        )


def test_the_cli_prints_each_hits_url(corpus_url, corpus_home, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    monkeypatch.setenv("BOOKRAG_READING_ROOM_URL", "http://127.0.0.1:9000")
    assert main(["search", "ornière", "--k", "1", "--mode", "bm25"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("    cite: ")  # the scholarly citation, then the file, then the URL
    assert lines[2] == (
        "    corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/source.md §1, chunk 0  level 0, "
        f"{lines[2].split('level 0, ')[1]}"
    )
    assert (
        lines[3]
        == "    http://127.0.0.1:9000/books/traite-des-echanges/premiere-partie/chapitre-02-les-routes?hl=1#p1"
    )
    assert main(["search", "ornière", "--k", "1", "--mode", "bm25", "--json"]) == 0
    [hit] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (
        hit["url"]
        == "http://127.0.0.1:9000/books/traite-des-echanges/premiere-partie/chapitre-02-les-routes?hl=1#p1"
    )
