"""`bookrag build --all` and `bookrag books` on a shelf of two fixture books: what is built, and a
build interrupted by Ctrl-C (KeyboardInterrupt inside the embedder, in-process) then resumed,
which embeds only what the first run had not written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from bookrag.cli import main
from bookrag.library import book_states, build_shelf
from loader.manifest import all_books
from loader.sidecars import read_sidecar, sidecar_path, texts_to_embed
from tests.conftest import BOOK, make_home, settings_for

TWIN = "traite-suite"


def shelf_home(tmp_path: Path) -> Path:
    """The fixture book and a twin of it under another slug (its files name their own book)."""
    home = make_home(tmp_path)
    src, dst = home / "corpus" / BOOK, home / "corpus" / TWIN
    shutil.copytree(src, dst)
    for f in [*dst.rglob("*.md"), dst / "book.toml"]:
        f.write_text(f.read_text(encoding="utf-8").replace(BOOK, TWIN), encoding="utf-8")
    return home


class Embedder:
    """The real embedder, counting the texts it embeds; raises KeyboardInterrupt (as Ctrl-C does)
    when a call would take it past `stop_after` texts."""

    def __init__(self, inner, stop_after: int | None = None) -> None:
        self.inner, self.stop_after, self.embedded = inner, stop_after, 0

    def passages(self, texts: list[str]):
        if self.stop_after is not None and self.embedded + len(texts) > self.stop_after:
            raise KeyboardInterrupt
        self.embedded += len(texts)
        return self.inner.passages(texts)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def mds(home: Path) -> list[Path]:
    return sorted(p for p in (home / "corpus").rglob("*.md"))


def test_build_all_interrupted_then_resumed_embeds_only_the_rest(tmp_path, pg_url, e5, monkeypatch, capsys):
    home = shelf_home(tmp_path)
    settings = settings_for(home, pg_url)
    whole = len(texts_to_embed(mds(home), home, 400, e5))
    assert whole > 20
    sample = 17  # the estimate's warm-up text and its timed sample of 16
    first = Embedder(e5, stop_after=sample + whole // 2)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        build_shelf(settings, "llm", said.append, embedder=first, progress=False)
    assert said[:2] == [f"shelf     {BOOK}: not loaded", f"shelf     {TWIN}: not loaded"]
    assert said[2].startswith("estimate: about ")
    assert f" to embed {whole} texts (chunks and summary sentences)" in said[2]
    assert said[2].endswith(", then the load (2 books)")
    kept = [md for md in mds(home) if sidecar_path(md).exists()]
    assert kept and len(kept) < len(mds(home))
    for md in kept:  # every sidecar left behind is whole: its manifest's count of chunks, each embedded
        sc = read_sidecar(sidecar_path(md))
        assert len(sc.chunks) == sc.manifest["chunk_count"]
    assert not [p for p in (home / "corpus").rglob("*.tmp")]
    rest = len(texts_to_embed(mds(home), home, 400, e5))
    assert 0 < rest < whole
    assert rest == whole - (first.embedded - sample)  # what the first run embedded is kept

    second = Embedder(e5)
    said.clear()
    built = build_shelf(settings, "llm", said.append, embedder=second, progress=False)
    assert second.embedded == sample + rest
    assert sum(b.chunks for b in built) == rest
    assert built and all(b.error is None and b.load is not None for b in built)
    assert [st.state for st in book_states(settings, psycopg.connect(pg_url))] == ["built", "built"]

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.delenv("BOOKRAG_LLM_MODEL", raising=False)
    assert main(["build", "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"shelf     {BOOK}: built",
        f"shelf     {TWIN}: built",
        "shelf     every book is built: nothing to do",
    ]


def test_books_says_which_are_built(tmp_path, pg_url, e5, monkeypatch, capsys):
    home = shelf_home(tmp_path)
    settings = settings_for(home, pg_url)
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    assert main(["books"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{BOOK}  [not loaded]",
        f"{TWIN}  [not loaded]",
        "no book is loaded: run `bookrag demo`, or `bookrag build BOOK`",
        f"not built: {BOOK}, {TWIN}; `bookrag build --all` builds them",
    ]
    from bookrag import db
    from loader.load import load
    from loader.sidecars import write_sidecars

    write_sidecars(mds(home), home, 400, e5, progress=False)
    conn = db.connect(pg_url)
    load(conn, home, [home / "corpus" / BOOK])
    conn.close()
    chapter = home / "corpus" / BOOK / "premiere-partie" / "chapitre-02-les-routes" / "source.md"
    chapter.write_text(chapter.read_text(encoding="utf-8") + "\nUn paragraphe de plus.\n", encoding="utf-8")
    assert main(["books"]) == 0
    out = capsys.readouterr().out.splitlines()
    rel = chapter.relative_to(home).as_posix()
    assert out[0].endswith(f"[stale (1 file changed since the load, e.g. {rel})]")
    assert out[2:] == [
        f"{TWIN}  [not loaded]",
        f"not built: {BOOK}, {TWIN}; `bookrag build --all` builds them",
    ]
    assert main(["books", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["book"], r["state"]) for r in rows] == [(BOOK, "stale"), (TWIN, "not loaded")]
    assert rows[0]["nodes"] > 0 and "nodes" not in rows[1]
    assert {b.slug for b in all_books(settings.corpus)} == {BOOK, TWIN}


def test_build_names_one_book_or_all(tmp_path, pg_url, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(shelf_home(tmp_path)))
    for argv in (["build"], ["build", BOOK, "--all"]):
        assert main(argv) == 1
        assert capsys.readouterr().err == (
            "error: name one book, or pass --all for every book not built yet (`bookrag books` lists them)\n"
        )
