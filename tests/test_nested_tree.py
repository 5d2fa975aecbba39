"""Trees of any depth (issue 36, docs/decisions/0034-trees-of-any-depth.md): a small book written
here for the tests, whose chapters hold sections (and one section holds sections of its own),
goes through every stage: the manifest, prepare, extractive summaries with their anchors, check,
sidecars (real embeddings), load, and the SQL functions that speak of levels and children."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from bookrag import db
from bookrag.cli import main
from bookrag.config import Settings
from bookrag.errors import BookragError
from loader.anchors import units_of
from loader.check import check_corpus
from loader.importers.gutenberg import prepare
from loader.manifest import book_tree, find_book, load_book
from loader.summarize import summarize_book, summary_nodes
from tests.conftest import _conninfo

SLUG = "marche-du-village"
C = f"corpus/{SLUG}"
P1, P2 = f"{C}/premiere-partie", f"{C}/deuxieme-partie"
MARCHE = f"{P1}/chapitre-01-le-marche"
CREDIT = f"{P2}/chapitre-01-le-credit"
EMPRUNTEUR = f"{CREDIT}/02-de-l-emprunteur"

#: The raw book, written by the team (no book text): headings in capitals, chapters with sections.
RAW = """AVANT-PROPOS

Ce petit livre décrit le marché d'un village, ses étals, ses prix, sa foire et son crédit.

PREMIÈRE PARTIE

CHAPITRE I.

LE MARCHÉ.

Le marché du village se tient chaque samedi sur la place de l'église.

DES ÉTALS.

Les étals de bois s'alignent le long de la fontaine, les maraîchers au nord.

Le fromager installe sa table à l'ombre du tilleul pour garder ses tommes au frais.

DES PRIX.

Les prix montent quand la grêle a couché les blés et baissent après la moisson.

CHAPITRE II.

LA FOIRE.

La foire d'automne attire les éleveurs des vallées voisines avec leurs bœufs.

Les marchands de bestiaux concluent leurs affaires d'une poignée de main.

DEUXIÈME PARTIE

CHAPITRE I.

LE CRÉDIT.

DU PRÊTEUR.

Le notaire prête aux meuniers contre une hypothèque sur le moulin.

DE L'EMPRUNTEUR.

L'emprunteur rembourse à la Saint-Martin, quand la récolte est vendue.

LE PAYSAN.

Le paysan emprunte pour acheter des semences et une charrue neuve.

L'ARTISAN.

L'artisan emprunte pour payer le cuir et le fer avant de vendre ses outils.
"""

MANIFEST = """[book]
slug = "marche-du-village"
title = "Le marché du village"
author = "Équipe bookrag"
year = 2026
language = "fr"

[source]
kind = "text"
folder = "marche"
encoding = "utf-8"

[[source.files]]
name = "marche.txt"

[theme]
field = "économie"
period = "essai contemporain"
genre = "petit traité"
angle = "Les échanges d'un village."

[[front_matter]]
slug = "avant-propos"
title = "Avant-propos"
kind = "front-matter"
start = "AVANT-PROPOS"
end = "PREMIÈRE PARTIE"

[[parts]]
slug = "premiere-partie"
title = "Première partie"
start = "PREMIÈRE PARTIE"
end = "DEUXIÈME PARTIE"

[[parts.sections]]
slug = "chapitre-01-le-marche"
title = "Le marché"
label = "Chapitre I"
start = "CHAPITRE I."
heading_blocks = 2

[[parts.sections.sections]]
slug = "00-debut"
title = "Le marché (début)"
kind = "section"
start = "CHAPITRE I."
heading_blocks = 2

[[parts.sections.sections]]
slug = "01-des-etals"
title = "Des étals"
kind = "section"
start = "DES ÉTALS."

[[parts.sections.sections]]
slug = "02-des-prix"
title = "Des prix"
kind = "section"
start = "DES PRIX."

[[parts.sections]]
slug = "chapitre-02-la-foire"
title = "La foire"
label = "Chapitre II"
start = "CHAPITRE II."
heading_blocks = 2

[[parts]]
slug = "deuxieme-partie"
title = "Deuxième partie"
start = "DEUXIÈME PARTIE"

[[parts.sections]]
slug = "chapitre-01-le-credit"
title = "Le crédit"
label = "Chapitre I"
start = "CHAPITRE I."
heading_blocks = 2

[[parts.sections.sections]]
slug = "01-du-preteur"
title = "Du prêteur"
kind = "section"
start = "DU PRÊTEUR."

[[parts.sections.sections]]
slug = "02-de-l-emprunteur"
title = "De l'emprunteur"
kind = "section"
start = "DE L'EMPRUNTEUR."

[[parts.sections.sections.sections]]
slug = "00-debut"
title = "De l'emprunteur (début)"
kind = "section"
start = "DE L'EMPRUNTEUR."

[[parts.sections.sections.sections]]
slug = "01-le-paysan"
title = "Le paysan"
kind = "section"
start = "LE PAYSAN."

[[parts.sections.sections.sections]]
slug = "02-l-artisan"
title = "L'artisan"
kind = "section"
start = "L'ARTISAN."
"""


def write_book(tmp: Path, manifest: str = MANIFEST, raw: str = RAW) -> Settings:
    home, sources = tmp / "home", tmp / "sources"
    (home / "corpus" / SLUG).mkdir(parents=True)
    (home / "corpus" / SLUG / "book.toml").write_text(manifest, encoding="utf-8")
    (sources / "marche").mkdir(parents=True)
    (sources / "marche" / "marche.txt").write_text(raw, encoding="utf-8")
    return Settings(
        home=home,
        database_url=None,
        sources=sources,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The nested book prepared, summarised (extractive) and with its sidecars (real embeddings)."""
    from loader.embedding import get_embedder
    from loader.sidecars import write_sidecars

    s = write_book(tmp_path_factory.mktemp("nested"))
    book = find_book(s.corpus, SLUG)
    prepare(s, book)
    report = summarize_book(s, book, provider="extractive", progress=False, say=lambda _line: None)
    assert not report.failed
    write_sidecars(
        sorted((s.corpus / SLUG).rglob("*.md")), s.home, 400, get_embedder("local"), progress=False
    )
    return s


@pytest.fixture(scope="module")
def nested_url(postgresql_proc, built: Settings) -> Iterator[str]:
    from loader.load import load

    admin, name = _conninfo(postgresql_proc, "postgres"), "bookrag_nested_fixture"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        c.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(postgresql_proc.template_dbname)
            )
        )
    url = _conninfo(postgresql_proc, name)
    c = db.connect(url)
    load(c, built.home, [built.corpus / SLUG])
    c.close()
    yield url
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def nested(nested_url: str) -> Iterator[psycopg.Connection]:
    c = db.connect(nested_url)
    yield c
    c.rollback()
    c.close()


# --- the manifest and the tree ---------------------------------------------------------------


def test_tree_levels_parents_and_heading_paths(tmp_path):
    book = find_book(write_book(tmp_path).corpus, SLUG)
    tree = {n.source_file: n for n in book_tree(book)}
    # a leaf section (paragraphs) is level 1 at any depth; a node of summaries is level 2; the book 3
    assert tree[f"{C}/summary.md"].level == 3
    assert tree[f"{P1}/summary.md"].level == 2 and tree[f"{MARCHE}/summary.md"].level == 2
    assert tree[f"{MARCHE}/01-des-etals/summary.md"].level == 1
    assert tree[f"{MARCHE}/01-des-etals/source.md"].level == 0
    assert f"{MARCHE}/source.md" not in tree  # a chapter with sections has no text of its own
    assert tree[f"{P1}/chapitre-02-la-foire/summary.md"].level == 1  # a chapter without sections stays a leaf
    assert (
        tree[f"{EMPRUNTEUR}/summary.md"].level == 2
        and tree[f"{EMPRUNTEUR}/01-le-paysan/summary.md"].level == 1
    )
    assert tree[f"{EMPRUNTEUR}/01-le-paysan/summary.md"].parent_source_file == f"{EMPRUNTEUR}/summary.md"
    assert tree[f"{EMPRUNTEUR}/summary.md"].parent_source_file == f"{CREDIT}/summary.md"
    assert (
        tree[f"{EMPRUNTEUR}/01-le-paysan/source.md"].heading_path
        == "Le marché du village > Deuxième partie > Chapitre I (Le crédit) > De l'emprunteur > Le paysan"
    )
    assert [
        tree[f].depth
        for f in (
            f"{C}/summary.md",
            f"{P2}/summary.md",
            f"{CREDIT}/summary.md",
            f"{EMPRUNTEUR}/summary.md",
            f"{EMPRUNTEUR}/01-le-paysan/summary.md",
        )
    ] == [0, 1, 2, 3, 4]
    # summaries are written deepest first within level 2: a section of sections, its chapter, then the part
    order = [n.source_file for n in summary_nodes(book_tree(book), {2})]
    assert (
        order.index(f"{EMPRUNTEUR}/summary.md")
        < order.index(f"{CREDIT}/summary.md")
        < order.index(f"{P2}/summary.md")
    )
    assert order.index(f"{MARCHE}/summary.md") < order.index(f"{P1}/summary.md")


def test_a_nesting_that_skips_a_level_is_refused_with_its_line(tmp_path):
    text = MANIFEST.replace(
        '[[parts.sections]]\nslug = "chapitre-01-le-credit"\ntitle = "Le crédit"\nlabel = "Chapitre I"\n'
        'start = "CHAPITRE I."\nheading_blocks = 2\n\n',
        "",
    )
    s = write_book(tmp_path, text)
    line = (
        text.splitlines().index(
            "[[parts.sections.sections]]", text.splitlines().index('slug = "deuxieme-partie"')
        )
        + 1
    )
    with pytest.raises(BookragError) as exc:
        find_book(s.corpus, SLUG)
    assert str(exc.value) == (
        f"{s.corpus / SLUG / 'book.toml'}:{line}: [[parts.sections.sections]] has no "
        f"[[parts.sections]] above it: the nesting skips a level"
    )
    front = 'slug = "x"\ntitle = "X"\n'
    path = tmp_path / "skip" / "book.toml"
    path.parent.mkdir()
    path.write_text(
        f'[book]\nslug = "skip"\ntitle = "T"\n\n[[front_matter.sections]]\n{front}', encoding="utf-8"
    )
    with pytest.raises(
        BookragError, match=r"book.toml:5: \[\[front_matter.sections\]\] has no \[\[front_matter\]\] above it"
    ):
        load_book(path)


def test_a_section_error_names_its_manifest_line(tmp_path):
    text = MANIFEST.replace('slug = "02-des-prix"\n', "")
    s = write_book(tmp_path, text)
    line = [k for k, x in enumerate(text.splitlines(), 1) if x == "[[parts.sections.sections]]"][2]
    with pytest.raises(BookragError) as exc:
        find_book(s.corpus, SLUG)
    assert str(exc.value) == f"{s.corpus / SLUG / 'book.toml'}:{line}: section lacks 'slug'"


def test_text_before_the_first_section_without_a_leading_section_is_refused(tmp_path):
    text = MANIFEST.replace(
        '[[parts.sections.sections]]\nslug = "00-debut"\ntitle = "Le marché (début)"\nkind = "section"\n'
        'start = "CHAPITRE I."\nheading_blocks = 2\n\n',
        "",
    )
    s = write_book(tmp_path, text)
    line = text.splitlines().index(
        'slug = "chapitre-01-le-marche"'
    )  # its [[parts.sections]] is the line above
    with pytest.raises(BookragError) as exc:
        prepare(s, find_book(s.corpus, SLUG))
    assert str(exc.value) == (
        f"{s.corpus / SLUG / 'book.toml'}:{line}: section premiere-partie/chapitre-01-le-marche has text between its "
        "heading (marche.txt line 7) and its first sub-section (line 13) that belongs to no sub-section: add a leading "
        "sub-section whose start is 'CHAPITRE I.'"
    )
    assert not list(s.corpus.rglob("source.md"))  # nothing written


def test_a_section_without_paragraphs_is_refused(tmp_path):
    raw = RAW.replace("Le notaire prête aux meuniers contre une hypothèque sur le moulin.\n\n", "")
    s = write_book(tmp_path, raw=raw)
    line = MANIFEST.splitlines().index('slug = "01-du-preteur"')
    with pytest.raises(BookragError) as exc:
        prepare(s, find_book(s.corpus, SLUG))
    assert str(exc.value).startswith(
        f"{s.corpus / SLUG / 'book.toml'}:{line}: section "
        "deuxieme-partie/chapitre-01-le-credit/01-du-preteur has no paragraphs in marche.txt"
    )
    assert not list(s.corpus.rglob("source.md"))


# --- prepare, summaries, anchors, check --------------------------------------------------------


def test_prepare_writes_each_leaf_in_its_folder(built: Settings):
    sources = sorted(p.relative_to(built.home).as_posix() for p in built.corpus.rglob("source.md"))
    assert sources == sorted(
        [
            f"{C}/avant-propos/source.md",
            f"{MARCHE}/00-debut/source.md",
            f"{MARCHE}/01-des-etals/source.md",
            f"{MARCHE}/02-des-prix/source.md",
            f"{P1}/chapitre-02-la-foire/source.md",
            f"{CREDIT}/01-du-preteur/source.md",
            f"{EMPRUNTEUR}/00-debut/source.md",
            f"{EMPRUNTEUR}/01-le-paysan/source.md",
            f"{EMPRUNTEUR}/02-l-artisan/source.md",
        ]
    )
    debut = (built.home / f"{MARCHE}/00-debut/source.md").read_text(encoding="utf-8")
    assert debut.rstrip().endswith("Le marché du village se tient chaque samedi sur la place de l'église.")
    assert "ÉTALS" not in debut and "LE MARCHÉ" not in debut  # headings live in the heading path
    etals = (built.home / f"{MARCHE}/01-des-etals/source.md").read_text(encoding="utf-8")
    assert "fromager" in etals and "grêle" not in etals


def test_a_chapter_summary_reads_and_cites_its_sections(built: Settings):
    from loader import frontmatter

    meta, body = frontmatter.read(built.home / f"{MARCHE}/summary.md")
    assert meta["level"] == 2 and meta["prompt_template"] == "chapter.md.j2"
    part = frontmatter.read(built.home / f"{P1}/summary.md")[0]
    assert part["prompt_template"] == "part.md.j2"
    # a chapter's units are its sections' summaries; a part's, its chapters (one of them a level-2 summary)
    assert units_of(built.home, f"{MARCHE}/summary.md") == [
        f"{MARCHE}/{s}/summary.md" for s in ("00-debut", "01-des-etals", "02-des-prix")
    ]
    assert units_of(built.home, f"{P1}/summary.md") == [
        f"{MARCHE}/summary.md",
        f"{P1}/chapitre-02-la-foire/summary.md",
    ]
    assert "fromager" in body or "étals" in body  # built from the sections' summaries
    problems, line = check_corpus(built, [SLUG])
    assert problems == [] and line.startswith("1 book, 24 files checked, 0 problems")


# --- the database ------------------------------------------------------------------------------


def test_outline_levels_and_depth(nested):
    rows = nested.execute("SELECT source_file, level, depth FROM rag.outline(%s)", (SLUG,)).fetchall()
    got = {f: (lvl, d) for f, lvl, d in rows}
    assert rows[0] == (f"{C}/summary.md", 3, 0)
    assert got[f"{P2}/summary.md"] == (2, 1) and got[f"{CREDIT}/summary.md"] == (2, 2)
    assert got[f"{EMPRUNTEUR}/summary.md"] == (2, 3) and got[f"{EMPRUNTEUR}/01-le-paysan/summary.md"] == (
        1,
        4,
    )
    assert got[f"{EMPRUNTEUR}/01-le-paysan/source.md"] == (0, 5)
    assert got[f"{C}/avant-propos/source.md"] == (0, 2)
    # preorder: the chapter, then its sections, each followed by its text
    order = [f for f, _l, _d in rows]
    assert (
        order.index(f"{MARCHE}/summary.md")
        < order.index(f"{MARCHE}/00-debut/summary.md")
        < order.index(f"{MARCHE}/00-debut/source.md")
        < order.index(f"{MARCHE}/01-des-etals/summary.md")
    )
    levels = nested.execute("SELECT levels FROM rag.list_books() WHERE book = %s", (SLUG,)).fetchone()[0]
    assert levels == [0, 1, 2, 3]


def test_get_children_of_a_chapter_are_its_sections(nested):
    rows = nested.execute(
        "SELECT DISTINCT source_file, level, role FROM rag.get_children(%s, 100000)",
        (f"{CREDIT}/summary.md",),
    ).fetchall()
    assert sorted(rows) == [
        (f"{CREDIT}/01-du-preteur/summary.md", 1, "child"),
        (f"{EMPRUNTEUR}/summary.md", 2, "child"),
    ]
    kids = nested.execute(
        "SELECT DISTINCT source_file FROM rag.get_children(%s)", (f"{EMPRUNTEUR}/01-le-paysan/summary.md",)
    )
    assert [r[0] for r in kids] == [f"{EMPRUNTEUR}/01-le-paysan/source.md"]


def test_levels_filter_and_within_a_chapter(nested, e5):
    from bookrag.search import vector_literal

    vec = vector_literal(e5.query("emprunter pour acheter des semences"))
    hits = nested.execute(
        "SELECT DISTINCT level FROM rag.search('emprunte', %s::vector, 'hybrid', 20, %s, ARRAY[2])",
        (vec, SLUG),
    ).fetchall()
    assert hits == [(2,)]
    files = nested.execute(
        "SELECT source_file FROM rag.search('emprunte', %s::vector, 'hybrid', 20, %s, NULL, %s)",
        (vec, SLUG, f"{EMPRUNTEUR}/summary.md"),
    ).fetchall()
    assert files and all(f.startswith(EMPRUNTEUR + "/") for (f,) in files)
    assert any(f == f"{EMPRUNTEUR}/01-le-paysan/source.md" for (f,) in files)


def test_two_stage_picks_leaf_sections(nested, e5):
    from bookrag.search import vector_literal

    vec = vector_literal(e5.query("Quand la grêle couche les blés, que font les prix ?"))
    hits = nested.execute(
        "SELECT source_file, level, parent_source_file, section_score FROM "
        "rag.search('grêle prix blés', %s::vector, 'two-stage', 3, %s)",
        (vec, SLUG),
    ).fetchall()
    assert hits[0][0] == f"{MARCHE}/02-des-prix/source.md"
    # every hit is a paragraph whose section is a leaf (level-1) summary, never a chapter of sections
    assert all(level == 0 and parent.endswith("summary.md") for _f, level, parent, _s in hits)
    parents = {p for _f, _l, p, _s in hits}
    leaf = {r[0] for r in nested.execute("SELECT source_file FROM rag.outline(%s) WHERE level = 1", (SLUG,))}
    assert parents <= leaf


def test_cli_outline_indents_by_depth(nested_url, built, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", nested_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(built.home))
    assert main(["outline", SLUG]) == 0
    out = capsys.readouterr().out.splitlines()
    titled = {
        line.strip().split("  (")[0]: len(line) - len(line.lstrip()) for line in out if "chunks," in line
    }
    assert titled["Deuxième partie (résumé)"] == 2
    assert titled["Chapitre I (Le crédit) (résumé)"] == 4
    assert titled["De l'emprunteur (résumé)"] == 6
    assert titled["Le paysan (résumé)"] == 8 and titled["Le paysan"] == 10
    assert main(["outline", SLUG, "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {r["depth"] for r in rows} == {0, 1, 2, 3, 4, 5}


def test_sidecars_are_unchanged_on_a_second_run(built: Settings, tmp_path, e5):
    """A nested tree's sidecars are deterministic: a second run over a copy writes nothing."""
    from loader.sidecars import write_sidecars

    home = tmp_path / "again"
    shutil.copytree(built.home, home)
    stats = write_sidecars(sorted((home / "corpus" / SLUG).rglob("*.md")), home, 400, e5, progress=False)
    assert stats.written == 0 and stats.unchanged == 24


def test_direct_algorithm_reads_every_leaf_under_a_chapter(tmp_path):
    from loader.summarize import input_nodes

    tree = book_tree(find_book(write_book(tmp_path).corpus, SLUG))
    credit = next(n for n in tree if n.source_file == f"{CREDIT}/summary.md")
    assert [n.source_file for n in input_nodes(tree, credit, "direct")] == [
        f"{CREDIT}/01-du-preteur/source.md",
        f"{EMPRUNTEUR}/00-debut/source.md",
        f"{EMPRUNTEUR}/01-le-paysan/source.md",
        f"{EMPRUNTEUR}/02-l-artisan/source.md",
    ]
    assert [n.source_file for n in input_nodes(tree, credit, "bottom-up")] == [
        f"{CREDIT}/01-du-preteur/summary.md",
        f"{EMPRUNTEUR}/summary.md",
    ]


def test_a_chapter_summary_cites_its_sections_in_the_database(nested):
    rows = nested.execute(
        "SELECT DISTINCT source_file, level FROM rag.get_citations(%s)", (f"{CREDIT}/summary.md",)
    ).fetchall()
    assert rows and {f for f, _l in rows} <= {
        f"{CREDIT}/01-du-preteur/summary.md",
        f"{EMPRUNTEUR}/summary.md",
    }
    rows = nested.execute(
        "SELECT DISTINCT source_file, level FROM rag.get_citations(%s)",
        (f"{EMPRUNTEUR}/01-le-paysan/summary.md",),
    ).fetchall()
    assert rows == [(f"{EMPRUNTEUR}/01-le-paysan/source.md", 0)]  # a section's summary cites its paragraphs


def test_mcp_tools_on_a_nested_tree(nested_url, built):
    import anyio

    from tests.mcp_server.test_server import stdio_session

    async def main() -> dict:
        async with stdio_session(nested_url, built.home) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            outline = (await session.call_tool("outline", {"book": SLUG})).structured_content
            kids = (
                await session.call_tool("get_children", {"source_file": f"{CREDIT}/summary.md"})
            ).structured_content
            parent = await session.call_tool(
                "get_parent", {"source_file": f"{EMPRUNTEUR}/01-le-paysan/summary.md"}
            )
            return {"tools": tools, "outline": outline, "kids": kids, "parent": parent.structured_content}

    got = anyio.run(main)
    assert "a chapter's sections" in got["tools"]["get_children"].description
    levels = json.dumps(got["tools"]["search"].input_schema["properties"]["levels"])
    assert "chapters that hold sections" in levels
    depth = {e["source_file"]: (e["level"], e["depth"]) for e in got["outline"]["entries"]}
    assert depth[f"{EMPRUNTEUR}/summary.md"] == (2, 3) and depth[f"{EMPRUNTEUR}/01-le-paysan/source.md"] == (
        0,
        5,
    )
    assert [n["source_file"] for n in got["kids"]["included"]] == [
        f"{CREDIT}/01-du-preteur/summary.md",
        f"{EMPRUNTEUR}/summary.md",
    ]
    assert got["parent"]["source_file"] == f"{EMPRUNTEUR}/summary.md" and got["parent"]["level"] == 2
