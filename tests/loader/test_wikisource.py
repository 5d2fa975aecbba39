"""`bookrag prepare` for Wikisource books (loader.importers.wikisource) on a small Special:Export file
written by the team (tests/fixtures/wikisource/list-export.xml: original test text, not List's),
and the real List manifest (corpus/list-systeme-national-economie-politique/book.toml)."""

from __future__ import annotations

import io
import re
import shutil
import tomllib
import urllib.error
import urllib.parse
from pathlib import Path

import pytest

from bookrag.config import DEFAULT_HOME, Settings
from bookrag.errors import BookragError
from loader import frontmatter
from loader.importers import importer_for
from loader.importers.base import source_meta
from loader.importers.wikisource import prepare, wikitext_paragraphs
from loader.manifest import Book, book_tree, load_book

SLUG = "list-systeme-national-economie-politique"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "wikisource"
EXPORT = FIXTURES / "list-export.xml"
REAL_MANIFEST = DEFAULT_HOME / "corpus" / SLUG / "book.toml"
ROOT = "Système national d’économie politique"
L1C1 = "livre-1-l-histoire/chapitre-01-les-italiens"
L2C1 = "livre-2-la-theorie/chapitre-01-l-economie-politique-et-l-economie-cosmopolite"


def settings(home: Path, sources: Path | None = None) -> Settings:
    return Settings(
        home=home,
        database_url=None,
        sources=sources,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A checkout-like folder holding the fixture manifest (the List manifest cut to three sections)."""
    folder = tmp_path / "home" / "corpus" / SLUG
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / SLUG / "book.toml", folder / "book.toml")
    return tmp_path / "home"


def book_of(home: Path) -> Book:
    return load_book(home / "corpus" / SLUG / "book.toml")


def body(home: Path, key: str) -> str:
    return frontmatter.read(home / "corpus" / SLUG / key / "source.md")[1]


def export_with(tmp_path: Path, title: str, wikitext: str) -> Path:
    """A copy of the fixture export with one page's text replaced (wikitext XML-escaped)."""
    xml = EXPORT.read_text(encoding="utf-8")
    escaped = wikitext.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    start = xml.index(f"<title>{title}</title>")
    t0 = xml.index('xml:space="preserve">', start) + len('xml:space="preserve">')
    t1 = xml.index("</text>", t0)
    path = tmp_path / "variant.xml"
    path.write_text(xml[:t0] + escaped + xml[t1:], encoding="utf-8")
    return path


# --- the importer on the fixture export -------------------------------------------------------


def test_chapter_body_is_exactly_its_paragraphs_and_footnotes(home):
    paths = prepare(settings(home), book_of(home), source=EXPORT).files
    assert [p.relative_to(home).as_posix() for p in paths] == [
        f"corpus/{SLUG}/preface/source.md",
        f"corpus/{SLUG}/{L1C1}/source.md",
        f"corpus/{SLUG}/{L2C1}/source.md",
    ]
    # Dropped: {{TextQuality}}, the nested {{ChapitreNav|…{{sc|…}}…}}, {{t3|…}}, {{—|4}}, the
    # heading, the HTML comment, <div>, <references />, the category link.
    assert body(home, L1C1) == (
        "Au sortir des siècles obscurs, les cités de la péninsule[^1] trouvèrent dans la mer un chemin que "
        "les routes de terre leur refusaient. Venise et Gênes armèrent des flottes ; Florence tissa la laine "
        "que d’autres avaient tondue.\n"
        "\n"
        "[^1]: On entend ici les villes de l’Italie du Nord et de la Toscane.\n"
        "\n"
        "La richesse, dit un chroniqueur imaginaire, _vient moins de l’or amassé que des bras exercés_.[^2] "
        "Les marchands le savaient : ils achetaient des métiers plutôt que des trésors. "
        "Ils se souvenaient de la leçon.[^2]\n"
        "\n"
        "[^2]: Cette distinction entre le fonds et la force qui le produit revient dans tout le livre.\n"
        "\n"
        "Quand les discordes l’emportèrent, les ateliers passèrent les Alpes, et avec eux l’habileté qui "
        "les faisait vivre.\n"
    )


def test_markup_of_the_other_pages(home):
    prepare(settings(home), book_of(home), source=EXPORT)
    assert body(home, "preface") == (
        "Ce volume d’essai n’a d’autre ambition que d’éprouver un programme ; il parle pourtant de commerce, "
        "comme il sied à un traité d’économie.\n"
        "\n"
        "Le lecteur y trouvera des _italiques_, du gras et un renvoi à l’auteur écossais.\n"
    )
    paras = body(home, L2C1).strip().split("\n\n")
    assert paras[1] == "[^1]: Le mot _économie_ est pris ici au sens large ; voir la bibliothèque."
    assert paras[2] == (
        "Les disciples de Smith confondent les deux ; ils raisonnent comme si la paix perpétuelle "
        "était signée, et comme si le _jus gentium_ tenait lieu de frontières."
    )
    assert paras[3].startswith("Nous ne nions pas l’union future des peuples ;")


def test_footnotes_follow_the_gutenberg_convention(home):
    """Markers [^n], numbered from 1 in each section; each definition is one paragraph right
    after the paragraph citing it first; a named ref cited twice is defined once."""
    prepare(settings(home), book_of(home), source=EXPORT)
    for key, numbers in ((L1C1, ["1", "2"]), (L2C1, ["1", "2"])):
        paras = body(home, key).strip().split("\n\n")
        defs = [i for i, p in enumerate(paras) if re.match(r"\[\^\d+\]: ", p)]
        assert [paras[i][2] for i in defs] == numbers, key
        for i in defs:
            n = paras[i][2]
            assert f"[^{n}]" in paras[i - 1] and not paras[i - 1].startswith("[^"), key
            assert sum(f"[^{n}]" in p and not p.startswith(f"[^{n}]:") for p in paras[: i - 1]) == 0, key
    assert body(home, L2C1).rstrip().endswith("nations fortes[^2].\n\n[^2]: Voir le livre quatrième.")


def test_frontmatter_is_the_gutenberg_importers(home):
    book = book_of(home)
    prepare(settings(home), book, source=EXPORT)
    sources = [n for n in book_tree(book) if n.node_type == "source"]
    for node in sources:
        meta, _ = frontmatter.read(home / node.source_file)
        frontmatter.validate(meta, node.source_file)
        assert meta == source_meta(book, node)
    meta = frontmatter.read(home / f"corpus/{SLUG}/{L1C1}/source.md")[0]
    assert meta == {
        "book": SLUG,
        "title": "Les Italiens",
        "heading_path": "Système national d'économie politique > Livre premier > Chapitre I (Les Italiens)",
        "level": 0,
        "node_type": "source",
        "parent_source_file": f"corpus/{SLUG}/{L1C1}/summary.md",
        "embed": True,
    }
    assert (
        frontmatter.read(home / f"corpus/{SLUG}/preface/source.md")[0]["parent_source_file"]
        == f"corpus/{SLUG}/preface/summary.md"
    )


def test_prepare_dispatches_wikisource_and_leaves_unchanged_files_alone(home):
    s = settings(home)
    book = book_of(home)
    first = importer_for(book).prepare(s, book, source=EXPORT).files
    stamps = [p.stat().st_mtime_ns for p in first]
    again = importer_for(book).prepare(s, book, source=EXPORT).files
    assert again == first and [p.stat().st_mtime_ns for p in again] == stamps


def test_export_from_bookrag_sources_folder(home, tmp_path):
    folder = tmp_path / "books" / "list-systeme-national"
    folder.mkdir(parents=True)
    shutil.copy(EXPORT, folder / "export.xml")
    assert len(prepare(settings(home, tmp_path / "books"), book_of(home)).files) == 3


def test_wikitext_cleanup():
    text = (
        "{{a|{{b|c}}|d}}[[Fichier:x.png|vignette|légende]]Un [[Page|lien]], [[Auteur:Adam Smith]], "
        "<span class=\"sc\">mot</span>&nbsp;; ''il''<!-- note -->.\n"
        "== Titre ==\n"
        "Deuxième<ref>Note ''a''<ref>interne</ref>.</ref> bloc.<br/>Suite {{sc|{{lang|la|nota}}}}.\n"
        "\n[[Catégorie:X]][[en:Y]]"
    )
    assert wikitext_paragraphs(text) == [
        "Un lien, Auteur:Adam Smith, mot ; _il_.",
        "Deuxième[^1] bloc. Suite nota.",
        "[^1]: Note _a_ (interne).",
    ]


# --- errors, word for word ------------------------------------------------------------------


def test_page_missing_from_the_export(home, tmp_path):
    manifest = home / "corpus" / SLUG / "book.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace(
            f'page = "{ROOT}/Livre premier/Chapitre I"', f'page = "{ROOT}/Livre premier/Chapitre II"'
        ),
        encoding="utf-8",
    )
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=EXPORT)
    assert str(exc.value) == (
        f"{EXPORT}: page '{ROOT}/Livre premier/Chapitre II' (section {L1C1}) is not in the export; "
        f"closest title in the export: '{ROOT}/Livre premier/Chapitre I'"
    )
    assert not (home / "corpus" / SLUG / "preface" / "source.md").exists()  # nothing written on error

    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace(
            f'page = "{ROOT}/Livre premier/Chapitre II"', 'page = "Autre ouvrage"'
        ),
        encoding="utf-8",
    )
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=EXPORT)
    assert str(exc.value) == f"{EXPORT}: page 'Autre ouvrage' (section {L1C1}) is not in the export"


def refusal(home, source) -> str:
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=source)
    return str(exc.value)


def test_malformed_xml(home, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<mediawiki>\n  <page>\n    <title>Système</title>\n  </mediawiki>\n", encoding="utf-8")
    assert refusal(home, bad) == f"{bad}: malformed XML export: mismatched tag: line 4, column 4"

    cut = tmp_path / "cut.xml"
    cut.write_text(EXPORT.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    assert refusal(home, cut).startswith(f"{cut}: malformed XML export: ")


def test_not_a_mediawiki_export(home, tmp_path):
    other = tmp_path / "other.xml"
    other.write_text("<rss><channel/></rss>", encoding="utf-8")
    assert (
        refusal(home, other) == f"{other}: not a MediaWiki export (root element <rss>, expected <mediawiki>)"
    )


def test_page_that_only_transcludes_scans(home, tmp_path):
    index = "List - Système national d'économie politique, trad Richelot, 2è édition, 1857.djvu"
    variant = export_with(
        tmp_path,
        f"{ROOT}/Livre premier/Chapitre I",
        f'{{{{TextQuality|100%}}}}\n<pages index="{index}" from=128 to=141 header=1 />\n',
    )
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=variant)
    assert str(exc.value) == (
        f"{variant}: page '{ROOT}/Livre premier/Chapitre I' transcludes scanned pages "
        f'(<pages index="{index}" …/>) instead of holding its text; an export does not include them, '
        "so this page cannot be imported"
    )


def test_page_with_empty_text(home, tmp_path):
    variant = export_with(tmp_path, f"{ROOT}/Livre deuxième/Chapitre I", "")
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=variant)
    assert str(exc.value) == f"{variant}: page '{ROOT}/Livre deuxième/Chapitre I' has no text"

    variant = export_with(
        tmp_path, f"{ROOT}/Livre deuxième/Chapitre I", "{{TextQuality|50%}}\n== Titre ==\n<!-- vide -->"
    )
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), source=variant)
    assert str(exc.value) == (
        f"{variant}: page '{ROOT}/Livre deuxième/Chapitre I' has no text once templates "
        "and markup are removed"
    )


def test_redirect_is_followed_within_the_export(home, tmp_path):
    xml = EXPORT.read_text(encoding="utf-8").replace(
        "</mediawiki>",
        f"  <page>\n    <title>Système national d’économie politique/Préface</title>\n    <ns>0</ns>\n"
        f'    <redirect title="{ROOT}/Préface de l’auteur" />\n    <revision>\n'
        f'      <text xml:space="preserve">#REDIRECTION [[{ROOT}/Préface de l’auteur]]</text>\n'
        "    </revision>\n  </page>\n</mediawiki>",
    )
    variant = tmp_path / "redirect.xml"
    variant.write_text(xml, encoding="utf-8")
    manifest = home / "corpus" / SLUG / "book.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace("/Préface de l’auteur", "/Préface"), encoding="utf-8"
    )
    prepare(settings(home), book_of(home), source=variant)
    assert body(home, "preface").startswith("Ce volume d’essai")


def test_no_export_given(home):
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home))
    assert str(exc.value) == (
        f"{home / 'corpus' / SLUG / 'book.toml'}: no Wikisource export to read: pass --from "
        "<a Special:Export XML file or folder>, set BOOKRAG_SOURCES (reads "
        "<BOOKRAG_SOURCES>/list-systeme-national/*.xml), or pass --download to fetch it (needs internet)"
    )


def test_download_builds_special_export_urls_and_says_when_offline(home, monkeypatch):
    asked: list[str] = []

    def offline(request, timeout):
        asked.append(request.full_url)
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("loader.importers.wikisource.urllib.request.urlopen", offline)
    with pytest.raises(BookragError) as exc:
        prepare(settings(home), book_of(home), download=True)
    url = asked[0]
    assert str(exc.value) == (
        f"cannot download {url}: <urlopen error [Errno -3] Temporary failure in name "
        "resolution>; offline? pass --from <a Special:Export XML file> instead"
    )
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert url.startswith("https://fr.wikisource.org/w/index.php?")
    assert query == {
        "title": ["Special:Export"],
        "curonly": ["1"],
        "pages": [
            f"{ROOT}/Préface de l’auteur\n{ROOT}/Livre premier/Chapitre I\n{ROOT}/Livre deuxième/Chapitre I"
        ],
    }
    assert not list((home / ".bookrag").rglob("*.part"))


def test_download_keeps_the_export(home, monkeypatch):
    calls: list[str] = []

    def online(request, timeout):
        calls.append(request.full_url)
        assert request.get_header("User-agent").startswith("bookrag/")
        return io.BytesIO(EXPORT.read_bytes())

    monkeypatch.setattr("loader.importers.wikisource.urllib.request.urlopen", online)
    assert len(prepare(settings(home), book_of(home), download=True).files) == 3
    assert len(prepare(settings(home), book_of(home), download=True).files) == 3
    assert (
        len(calls) == 1 and len(list((home / ".bookrag" / "downloads" / SLUG).glob("export-01-*.xml"))) == 1
    )


# --- the real List manifest ------------------------------------------------------------------


def test_list_manifest_parses_into_the_specified_tree():
    book = load_book(REAL_MANIFEST)
    assert (book.slug, book.source_kind, book.policy, book.language) == (SLUG, "wikisource", "all", "fr")
    assert book.extra["site"] == "fr.wikisource.org" and book.extra["title"] == ROOT
    assert book.extra["export_url"].startswith("https://fr.wikisource.org/w/index.php?title=Special:Export&")
    assert all(getattr(book.theme, f) for f in ("field", "period", "genre", "angle"))
    assert [s.slug for s in book.front_matter] == ["preface", "introduction"]
    assert book.front_matter[0].title == "Préface de l'auteur"
    assert [(p.slug, len(p.sections)) for p in book.parts] == [
        ("livre-1-l-histoire", 10),
        ("livre-2-la-theorie", 17),
        ("livre-3-les-systemes", 5),
        ("livre-4-la-politique", 4),
    ]
    firsts = [p.sections[0].slug for p in book.parts]
    assert firsts == [
        "chapitre-01-les-italiens",
        "chapitre-01-l-economie-politique-et-l-economie-cosmopolite",
        "chapitre-01-les-economistes-italiens",
        "chapitre-01-la-suprematie-insulaire-et-les-puissances-continentales",
    ]
    assert book.parts[0].sections[1].slug == "chapitre-02-les-anseates"
    folders = {n.folder.split("/")[2] for n in book_tree(book) if n.parent_source_file is not None}
    assert folders == {
        "preface",
        "introduction",
        "livre-1-l-histoire",
        "livre-2-la-theorie",
        "livre-3-les-systemes",
        "livre-4-la-politique",
    }
    sources = [n for n in book_tree(book) if n.node_type == "source"]
    assert len(sources) == 2 + 10 + 17 + 5 + 4
    for part in book.parts:
        assert all(s.slug.startswith(f"chapitre-{i:02d}-") for i, s in enumerate(part.sections, 1))


def test_list_manifest_pages_follow_one_scheme():
    data = tomllib.loads(REAL_MANIFEST.read_text(encoding="utf-8"))
    livres = ["Livre premier", "Livre deuxième", "Livre troisième", "Livre quatrième"]
    romans = [
        "I",
        "II",
        "III",
        "IV",
        "V",
        "VI",
        "VII",
        "VIII",
        "IX",
        "X",
        "XI",
        "XII",
        "XIII",
        "XIV",
        "XV",
        "XVI",
        "XVII",
    ]
    assert [s["page"] for s in data["front_matter"]] == [
        f"{ROOT}/Préface de l’auteur",
        f"{ROOT}/Introduction",
    ]
    for livre, part in zip(livres, data["parts"], strict=True):
        assert part["title"] == livre
        assert [s["page"] for s in part["sections"]] == [
            f"{ROOT}/{livre}/Chapitre {r}" for r in romans[: len(part["sections"])]
        ]
        assert [s["label"] for s in part["sections"]] == [
            f"Chapitre {r}" for r in romans[: len(part["sections"])]
        ]


def test_fixture_manifest_agrees_with_the_list_manifest():
    real, fixture = (
        tomllib.loads(p.read_text(encoding="utf-8")) for p in (REAL_MANIFEST, FIXTURES / SLUG / "book.toml")
    )
    assert fixture["book"] == real["book"]
    assert {k: v for k, v in fixture["source"].items()} == {
        k: v for k, v in real["source"].items() if k != "index"
    }
    assert fixture["front_matter"][0] == real["front_matter"][0]
    sections = {(p["slug"], s["slug"]): s for p in real["parts"] for s in p["sections"]}
    for part in fixture["parts"]:
        for s in part["sections"]:
            assert s == sections[(part["slug"], s["slug"])]
