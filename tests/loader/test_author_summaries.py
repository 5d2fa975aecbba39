"""The author's own summaries (issue 36, decision 0035): the indented run of phrases separated by
" -- " that opens a chapter or a sub-section. `add` reports them, `prepare` keeps each as a
paragraph of its own listed in the frontmatter, `sidecars` marks its chunks, `load` writes the
`kind` column, the CLI, the MCP tools and both summary providers use it; malformed markers are
refused with the file and line. The book is invented here; the 1835 volume is read at run time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bookrag import db
from bookrag.cli import main
from bookrag.config import load_settings
from loader import frontmatter
from loader.chunking import paragraphs
from loader.importers.gutenberg import author_summaries, raw_path, read_text
from loader.manifest import find_book
from loader.summarize import Item, extractive_summary, render_prompt
from tests.loader.test_add import para

SLUG = "ponts"
SUMMARY_1 = "    Les piles et leurs fondations. -- Pieux de chêne sous\n    chaque pile. -- Pourquoi la pierre résiste."
SUMMARY_2 = "    Les culées portent la poussée. -- Leur forme."
QUOTE = "    «Un pont de bois, disait-il. -- Vaut mieux que le bac.»"


def book_text() -> str:
    """Chapter I opens with the author's summary and holds a sub-section with its own (after a
    footnote on its heading); chapter II has none, but an indented quote with a dash."""
    return (
        "The Project "
        "Gutenberg EBook of Essai sur les ponts, by Jean Essai\n\n"
        "Title: Essai sur les ponts\n\nAuthor: Jean Essai\n\nRelease Date: May 1, 2026 [EBook #99997]\n\n"
        "Language: French\n\nCharacter set encoding: UTF-8\n\n"
        "*** START OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES PONTS ***\n\n\n"
        "ESSAI SUR LES PONTS\n\n\n\n"
        f"CHAPITRE PREMIER.\n\nDES PILES.\n\n{SUMMARY_1}\n\n\n{para(90)}\n\n{para(60)}\n\n\n"
        f"DES CULÉES[1].\n\n    [Note 1: Les culées sont les appuis des rives.]\n\n{SUMMARY_2}\n\n{para(70)}\n\n\n\n"
        f"CHAPITRE II.\n\nDES ARCHES.\n\n\n{para(50)}\n\n{QUOTE}\n\n{para(80)}\n\n\n"
        "*** END OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES PONTS ***\n"
    )


def test_the_form_and_the_place_of_a_summary() -> None:
    lines = lambda text: text.split("\n")  # noqa: E731
    assert author_summaries(lines(f"{SUMMARY_1}\n\n{para(20)}")) == [1]
    assert author_summaries(lines(f"{para(20)}\n\nDES CULÉES.\n\n{SUMMARY_2}\n\n{para(10)}")) == [3]
    assert author_summaries(lines(f"{para(20)}\n\n{SUMMARY_2}")) == []  # not after a heading
    assert author_summaries(lines(f"{para(20)}\n\n{QUOTE}")) == []
    assert author_summaries(lines("    Des piles.\n\n" + para(10))) == []  # a title: no separator
    assert author_summaries(lines(SUMMARY_1.replace("    ", "") + "\n\n" + para(10))) == []  # not indented
    assert (
        author_summaries(lines("    CHAPITRE I.--Des piles.      1\n    CHAPITRE II.--Des arches.     9"))
        == []
    )


@pytest.fixture
def built(tmp_path: Path, pg_url: str, monkeypatch, capsys) -> tuple[Path, str]:
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    (tmp_path / "books" / "ponts").mkdir(parents=True)
    raw = tmp_path / "books" / "ponts" / "ponts.txt"
    raw.write_text(book_text(), encoding="utf-8")
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.setenv("BOOKRAG_SOURCES", str(tmp_path / "books"))
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert main(["add", str(raw), "--slug", SLUG]) == 0
    out = capsys.readouterr().out
    assert (
        "  the author's own summaries: 2 in 1 sections (1 opening a section, 1 after a heading inside one); "
        "each stays a paragraph of its own, marked author_summary\n"
    ) in out
    for argv in (
        ["prepare", SLUG],
        ["summarize", SLUG, "--provider", "extractive"],
        ["check", SLUG],
        ["sidecars", str(home / "corpus" / SLUG)],
        ["load", str(home / "corpus" / SLUG)],
    ):
        assert main(argv) == 0, argv
    capsys.readouterr()
    book = find_book(home / "corpus", SLUG)
    return home, next(f"corpus/{SLUG}/{s.slug}" for s in book.front_matter if s.label == "Chapitre I")


def test_prepared_marked_loaded_and_shown(built, pg_url, capsys) -> None:
    home, chapter = built
    meta, body = frontmatter.read(home / chapter / "source.md")
    paras = paragraphs(body)
    assert meta["author_summaries"] == [1, 6]
    assert (
        paras[0]
        == "Les piles et leurs fondations. — Pieux de chêne sous chaque pile. — Pourquoi la pierre résiste."
    )
    assert paras[1].startswith(para(5).split("\n")[0][:20])  # the first paragraph of text stays apart
    assert paras[3] == "DES CULÉES[^1]." and paras[4].startswith(
        "[^1]:"
    )  # the sub-section heading, its footnote
    assert paras[5] == "Les culées portent la poussée. — Leur forme."
    other = next(
        p
        for p in (home / "corpus" / SLUG).rglob("source.md")
        if p.parent.as_posix() != (home / chapter).as_posix()
    )
    assert "author_summaries" not in frontmatter.read(other)[0]  # chapter II's quote is not one
    # the extractive summary starts from the author's phrases, each anchored to its paragraph
    summary = frontmatter.read(home / chapter / "summary.md")[1].strip()
    assert summary.startswith(
        "Les piles et leurs fondations [§1]. Pieux de chêne sous chaque pile [§1]. "
        "Pourquoi la pierre résiste [§1]. Les culées portent la poussée [§6]. Leur forme [§6]."
    )
    sidecar = [
        json.loads(line)
        for line in (home / chapter / "source.md.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [c["paragraph"] for c in sidecar[1:] if c.get("kind") == "author_summary"] == [1, 6]
    with db.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT paragraph FROM rag.hierarchical_content_nodes WHERE kind = 'author_summary' "
            "ORDER BY paragraph"
        ).fetchall() == [(1,), (6,)]
        assert conn.execute(
            "SELECT author_summaries FROM rag.outline(%s) WHERE source_file = %s",
            (SLUG, f"{chapter}/source.md"),
        ).fetchone() == ([1, 6],)
        # rag.get_node (and so get_parent, get_children's rows, parent expansions) carries kind
        assert conn.execute(
            "SELECT paragraph FROM rag.get_node(%s) WHERE kind = 'author_summary' ORDER BY paragraph",
            (f"{chapter}/source.md",),
        ).fetchall() == [(1,), (6,)]
        assert conn.execute(
            "SELECT array_agg(DISTINCT kind) FROM rag.get_node(%s) WHERE paragraph NOT IN (1, 6)",
            (f"{chapter}/source.md",),
        ).fetchone()[0] == ["text"]
        hits = conn.execute(
            "SELECT paragraph, kind FROM rag.search('culées poussée forme', NULL, 'bm25', 3, "
            "p_levels => ARRAY[0])"
        ).fetchall()
        assert hits[0] == (6, "author_summary")
    assert main(["search", "culées poussée forme", "--mode", "bm25", "--levels", "0", "-k", "1"]) == 0
    assert (
        "    the author's own summary of the section (his outline of what follows)\n"
        in capsys.readouterr().out
    )
    assert main(["outline", SLUG]) == 0
    assert "  the author's own summaries: §1, §6\n" in capsys.readouterr().out


def test_the_llm_prompt_names_the_authors_outline(built) -> None:
    home, chapter = built
    book = find_book(home / "corpus", SLUG)
    from loader.manifest import book_tree

    node = next(n for n in book_tree(book) if n.source_file == f"{chapter}/summary.md")
    prompt = render_prompt(
        "section.md.j2",
        book,
        node,
        [Item("", "Les piles. — Les pieux.", 1, True), Item("", "Le texte du chapitre.", 2)],
        "bottom-up",
    )
    assert "le paragraphe §1, marqué « [sommaire de l'auteur] », est son propre sommaire" in prompt
    assert (
        "§1 [sommaire de l'auteur] Les piles. — Les pieux.\n" in prompt
        and "§2 Le texte du chapitre.\n" in prompt
    )
    plain = render_prompt("section.md.j2", book, node, [Item("", "Le texte du chapitre.", 1)], "bottom-up")
    assert "sommaire de l'auteur" not in plain
    assert extractive_summary([Item("", "Le texte du chapitre est court mais il suffit.", 1)], 1) == (
        "Le texte du chapitre est court mais il suffit [§1]."
    )


def _edit_line(path: Path, pick, fn) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    n = next(i for i, line in enumerate(lines) if pick(line))
    lines[n] = fn(lines[n])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return n + 1


@pytest.mark.parametrize(
    "where, change, message",
    [
        (
            "source",
            lambda o: {**o, "kind": "sommaire"},
            "kind must be 'author_summary' (the author's own summary), 'extractive_summary' (an extractive summary) "
            "or absent (the text), got 'sommaire'",
        ),
        (
            "source",
            lambda o: {k: v for k, v in o.items() if k != "kind"},
            "kind 'text', but {md} lists paragraph 1 in author_summaries; run `bookrag sidecars {md}`",
        ),
        (
            "summary",
            lambda o: {**o, "kind": "author_summary"},
            "kind 'author_summary' on a summary chunk; only a source.md holds the author's summaries",
        ),
    ],
)
def test_a_malformed_marker_in_a_sidecar_loads_nothing(built, pg_url, capsys, where, change, message) -> None:
    home, chapter = built
    sc = home / chapter / f"{where}.md.jsonl"
    line = _edit_line(
        sc,
        lambda ln: '"chunk_index": 0' in ln,
        lambda ln: json.dumps(change(json.loads(ln)), ensure_ascii=False),
    )
    with db.connect(pg_url) as conn:
        before = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE kind = 'author_summary') "
            "FROM rag.hierarchical_content_nodes"
        ).fetchone()
        conn.execute(
            "DELETE FROM rag.hierarchical_content_nodes WHERE source_file = %s", (f"{chapter}/{where}.md",)
        )
        conn.commit()  # so that the load has a file to write
    assert main(["load", str(home / "corpus" / SLUG)]) == 1
    assert capsys.readouterr().err == f"error: {sc}:{line}: {message.format(md=f'{chapter}/source.md')}\n"
    with db.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file = %s",
            (f"{chapter}/{where}.md",),
        ).fetchone() == (0,)  # nothing written
        assert conn.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone()[0] < before[0]


def test_a_malformed_frontmatter_field_names_its_line(built, capsys) -> None:
    home, chapter = built
    md = home / chapter / "source.md"
    text = md.read_text(encoding="utf-8")
    md.write_text(
        re.sub(r"author_summaries:\n- 1\n- 6\n", "author_summaries:\n- 6\n- 1\n", text), encoding="utf-8"
    )
    line = md.read_text(encoding="utf-8").split("\n").index("author_summaries:") + 1
    assert main(["sidecars", str(md)]) == 1
    assert capsys.readouterr().err == (
        f"error: {md}:{line}: author_summaries must be a non-empty, sorted list of "
        "distinct paragraph numbers (1-based), got [6, 1]\n"
    )
    assert main(["check", SLUG]) == 1
    assert (
        f"{chapter}/source.md:{line}: author_summaries must be a non-empty, sorted list of distinct paragraph "
        "numbers (1-based), got [6, 1]\n"
    ) in capsys.readouterr().out
    md.write_text(
        text.replace("author_summaries:\n- 1\n- 6\n", "author_summaries:\n- 1\n- 60\n"), encoding="utf-8"
    )
    assert main(["sidecars", str(md)]) == 1
    assert (
        capsys.readouterr().err
        == f"error: {md}:{line}: author_summaries names paragraph 60, but the body has 7\n"
    )


def test_the_1835_volume(tmp_path: Path, monkeypatch, capsys) -> None:
    """Every indented run of phrases with a `--` separator after a heading is one (45: the 44
    written " -- " and one "--" without spaces); none in the shipped books' sections (checked by
    their prepared corpora, tests/loader/test_prepare.py)."""
    settings = load_settings()
    raw = (settings.sources or Path("/nonexistent")) / "tocqueville-democratie-1835" / "pg30514-8.txt"
    if not raw.exists():
        pytest.skip("BOOKRAG_SOURCES does not hold the 1835 volume")
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    assert main(["add", str(raw), "--slug", "t1835"]) == 0
    assert (
        "the author's own summaries: 45 in 9 sections (5 opening a section, 40 after a heading"
        in capsys.readouterr().out
    )
    assert main(["prepare", "t1835"]) == 0
    book = find_book(home / "corpus", "t1835")
    text = "\n".join(read_text(raw_path(load_settings(), book, book.files[0]), book.encoding))
    runs = re.findall(
        r"(?<=\n\n)((?: {4,5}\S.*\n)+)", text[: text.index("\nNOTES.\n")]
    )  # footnotes: 9 spaces
    assert (
        sum(1 for r in runs if re.search(r"[.?!;]\s*--\s*\S", r.replace("\n", " ")) and "[Note" not in r)
        == 45
    )
    marked = []
    for md in (home / "corpus" / "t1835").rglob("source.md"):
        meta, body = frontmatter.read(md)
        paras = paragraphs(body)
        marked += [paras[k - 1] for k in meta.get("author_summaries", [])]
    assert len(marked) == 45 and all(" — " in p or "—" in p for p in marked)


def test_the_merge_prompt_repeats_the_authors_outline(built) -> None:
    # a section too long for the model's window is summarised in slices, then merged: the merge
    # sees only partial summaries, so it gets the author's outline again
    home, chapter = built
    book = find_book(home / "corpus", SLUG)
    from loader.manifest import book_tree

    node = next(n for n in book_tree(book) if n.source_file == f"{chapter}/summary.md")
    partials = [Item("1", "Le premier résumé partiel [§1–3]."), Item("2", "Le second [§4–7].")]
    outline = [Item("", "Les piles. — Les pieux.", 1, True), Item("", "Les culées. — Leur forme.", 6, True)]
    prompt = render_prompt("merge.md.j2", book, node, partials, "bottom-up", units=7, outline=outline)
    assert (
        "suis l'ordre et les termes de son sommaire :\n  §1 [sommaire de l'auteur] Les piles. — Les pieux.\n"
        "  §6 [sommaire de l'auteur] Les culées. — Leur forme.\n"
    ) in prompt
    plain = render_prompt("merge.md.j2", book, node, partials, "bottom-up", units=7)
    assert "sommaire de l'auteur" not in plain and "## Résumé partiel 2\n\nLe second [§4–7]." in plain


def test_a_sliced_section_is_merged_with_the_authors_outline(built) -> None:
    from loader.manifest import book_tree
    from loader.summarize import LLMConfig, summarize_book
    from loader.tokens import count_tokens
    from tests.fakes.openai_server import FakeOpenAI

    home, chapter = built
    book = find_book(home / "corpus", SLUG)
    node = next(n for n in book_tree(book) if n.source_file == f"{chapter}/summary.md")
    paras = paragraphs(frontmatter.read(home / chapter / "source.md")[1])
    whole = count_tokens(
        render_prompt("section.md.j2", book, node, [Item("", p) for p in paras], "bottom-up")
    )
    with FakeOpenAI() as server:  # a window the chapter does not fit in, whole
        config = LLMConfig(
            model="fake-model",
            base_url=server.base_url,
            api_key="test",
            context_window=whole - 40 + 200,
            max_output_tokens=200,
            timeout=60.0,
            max_retries=2,
        )
        report = summarize_book(
            load_settings(),
            book,
            levels={1},
            force=True,
            llm_config=config,
            progress=False,
            say=lambda _m: None,
        )
        merges = [r.prompt for r in server.requests if "Fusionne-les" in r.prompt]
    assert not report.failed and len(merges) == 1
    assert (
        "  §1 [sommaire de l'auteur] Les piles et leurs fondations. — Pieux de chêne sous chaque pile. — "
        "Pourquoi la pierre résiste.\n  §6 [sommaire de l'auteur] Les culées portent la poussée. — Leur forme.\n"
    ) in merges[0]
