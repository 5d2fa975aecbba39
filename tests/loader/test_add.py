"""`bookrag add`: the manifest proposed from a book's own headings.

The real books (BOOKRAG_SOURCES) prove it: the proposed trees of Bastiat and Tocqueville equal
the hand-written manifests, and Harmonies économiques matches its table of contents. A small
book written here for the tests covers the warnings, the plain-text path and every bad input.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bookrag.cli import main
from bookrag.config import DEFAULT_HOME, Settings
from loader.detect import count_words, normalize
from loader.importers.gutenberg import prepare, read_text, section_ranges
from loader.manifest import Book, find_book, load_book
from loader.propose import propose

SOURCES = os.environ.get("BOOKRAG_SOURCES")
needs_books = pytest.mark.skipif(not SOURCES, reason="BOOKRAG_SOURCES is not set (the raw books folder)")


def settings(home: Path, sources: Path | None) -> Settings:
    return Settings(
        home=home,
        database_url=None,
        sources=sources,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )


def proposed_book(tmp_path: Path, files: list[Path], **kw) -> Book:
    p = propose(files, sources=Path(SOURCES) if SOURCES else None, **kw)
    path = tmp_path / "corpus" / p.slug / "book.toml"
    path.parent.mkdir(parents=True)
    path.write_text(p.manifest, encoding="utf-8")
    return load_book(path)


def tree(book: Book, texts: dict[str, list[str]]) -> list[tuple]:
    """Every section as (level-1 parent: part position or 'book', kind, file, heading line,
    first body line, end line): what `bookrag prepare` cuts, so equal trees give equal source.md."""
    ranges = section_ranges(book, texts)
    out = [
        ("book", s.kind if s.kind != "chapter" else "front-matter", *ranges[s.slug])
        for s in book.front_matter
    ]
    out += [(k, s.kind, *ranges[f"{p.slug}/{s.slug}"]) for k, p in enumerate(book.parts) for s in p.sections]
    return out


def same_title(a: str, b: str) -> bool:
    """Titles compare after normalize() (case, accents, punctuation and footnote markers
    ignored); one may extend the other ("Pétition" + "des fabricants de chandelles, etc"), and an
    untitled part introduction is "Introduction" whatever the hand-written title adds."""
    x, y = normalize(a), normalize(b)
    return x == y or x.startswith(y + " ") or y.startswith(x + " ")


def titles(book: Book) -> list[str]:
    return [s.title for s in book.front_matter] + [
        t for p in book.parts for t in [p.title] + [s.title for s in p.sections]
    ]


def texts_of(book: Book) -> dict[str, list[str]]:
    folder = Path(SOURCES) / (book.source_folder or book.slug)
    return {f.name: read_text(folder / f.name, book.encoding) for f in book.files}


@needs_books
@pytest.mark.parametrize("slug", ["bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"])
def test_proposed_tree_equals_the_hand_written_one(slug, tmp_path):
    hand = find_book(DEFAULT_HOME / "corpus", slug)
    files = [Path(SOURCES) / hand.source_folder / f.name for f in hand.files]
    proposed = proposed_book(tmp_path, files)
    texts = texts_of(hand)
    assert tree(proposed, texts) == tree(hand, texts)
    assert [len(p.sections) for p in proposed.parts] == [len(p.sections) for p in hand.parts]
    for got, want in zip(titles(proposed), titles(hand)):
        assert same_title(got, want) or (got == "Introduction" and want.startswith("Introduction")), (
            got,
            want,
        )
    assert [s.label for s in proposed.front_matter] == [s.label for s in hand.front_matter]
    assert [[s.label for s in p.sections] for p in proposed.parts] == [
        [s.label for s in p.sections] for p in hand.parts
    ]
    assert proposed.heading_blocks == hand.heading_blocks
    assert [(f.name, f.sha256) for f in proposed.files] == [(f.name, f.sha256) for f in hand.files]
    assert proposed.source_kind == "gutenberg" and proposed.encoding == "iso-8859-1"


@needs_books
def test_harmonies_economiques_matches_its_table_of_contents(tmp_path):
    raw = Path(SOURCES) / "bastiat-oeuvres-tome-6" / "pg46627-8.txt"
    p = propose([raw], sources=Path(SOURCES))
    s = p.structure
    assert (p.title, p.author, p.slug) == (
        "Harmonies économiques",
        "Frédéric Bastiat",
        "bastiat-harmonies-economiques",
    )
    assert s.parts == []
    assert [x.title for x in s.front_matter[:1]] == ["À la jeunesse française"]
    chapters = s.front_matter[1:]
    assert [x.number for x in chapters] == list(range(1, 26)) and {x.kind for x in chapters} == {"chapter"}
    listed = [e for e in s.toc if e.kind == "chapter"]
    assert [e.number for e in listed] == list(range(1, 26))
    assert [normalize(x.title) for x in chapters] == [normalize(e.title) for e in listed]
    assert chapters[0].title == "Organisation naturelle, Organisation artificielle"
    assert [p.books[0].offset + x.line + 1 for x in (s.front_matter[0], chapters[0], chapters[-1])] == [
        103,
        795,
        22287,
    ]
    # the contents agree with the body; the only warning is chapter V's length
    assert p.warnings == ["Chapitre V: 22,651 words (over 20,000): a missed heading?"]
    book = proposed_book(tmp_path, [raw])
    assert [x.slug for x in book.front_matter][:3] == [
        "a-la-jeunesse-francaise",
        "chapitre-01-organisation-naturelle-organisation-artificielle",
        "chapitre-02-besoins-efforts-satisfactions",
    ]
    assert book.front_matter[0].end == "HARMONIES ÉCONOMIQUES"  # the half-title is not part of the dedication


# --- a small book written for these tests ------------------------------------------------------

PROSE = (
    "Le voyageur qui part du village avant l'aube compte les bornes du chemin, pèse le prix du péage "
    "et se demande qui paie l'entretien de la route quand la pluie emporte le gravier. "
)


def para(n: int) -> str:
    words = (PROSE * (n // len(PROSE.split()) + 1)).split()[:n]
    lines, line = [], []
    for w in words:
        line.append(w)
        if len(" ".join(line)) > 64:
            lines.append(" ".join(line))
            line = []
    return "\n".join(lines + [" ".join(line)] if line else lines)


def small_book(gap: bool = True) -> str:
    def ch(n: str, t: str) -> str:
        return f"CHAPITRE {n}.\n\n    {t}.\n\n\n{para(120)}\n\nV.--MAIS NON, DIT-IL.\n\n{para(80)}\n\n\n"

    part2 = ch("I", "Des péages") + (ch("III", "Des octrois") if gap else ch("II", "Des octrois"))
    return (
        "The Project "
        "Gutenberg EBook of Essai sur les routes, by Jean Essai\n\n"
        "Title: Essai sur les routes\n\nAuthor: Jean Essai\n\nRelease Date: May 1, 2026 [EBook #99999]\n\n"
        "Language: French\n\nCharacter set encoding: UTF-8\n\n"
        "*** START OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES ROUTES ***\n\n\n"
        "ESSAI SUR LES ROUTES\n\n\n1901\n\n\n\n"
        f"PRÉFACE.\n\n\n{para(150)}\n\n\n\n"
        "ESSAI SUR LES ROUTES\n\n\n\n"
        "PREMIÈRE PARTIE.\n\nDES CHEMINS.\n\n\n\n"
        + ch("I", "Des bornes")
        + ch("II", "Des ponts")
        + "DEUXIÈME PARTIE.\n\nDES TAXES.\n\n\n\n"
        + part2
        + "FIN.\n\n\n\nTABLE DES MATIÈRES.\n\n"
        "  Préface                                     1\n\n"
        "PREMIÈRE PARTIE.\n\n"
        "    CHAPITRE I.--Des bornes.                  3\n\n"
        "    CHAPITRE II.--Des ponts.                  9\n\n"
        "DEUXIÈME PARTIE.\n\n"
        "    CHAPITRE I.--Des péages.                 15\n\n"
        "    CHAPITRE II.--Des octrois.               21\n\n"
        "FIN DE LA TABLE.\n\n"
        "*** END OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES ROUTES ***\n\nLicence text.\n"
    )


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.setenv("BOOKRAG_SOURCES", str(tmp_path / "books"))
    (tmp_path / "books" / "essai").mkdir(parents=True)
    return home


def write(home: Path, name: str, data: bytes) -> Path:
    path = home.parent / "books" / "essai" / name
    path.write_bytes(data)
    return path


def test_small_book_tree_and_warnings(home, capsys):
    raw = write(home, "essai.txt", small_book().encode("iso-8859-1").replace(b"\n", b"\r\n"))
    assert main(["add", str(raw), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Essai sur les routes — Jean Essai, 1901  (essai.txt, 1,027 words)"
    assert (
        "  1  Préface" in out
        and "  2  Première partie — Des chemins" in out
        and "    1  Chapitre II — Des ponts" in out
    )
    assert "warning: numbering gap in Deuxième partie: III comes after I (II missing)\n" in out
    assert "warning: Chapitre III: the body says 'Des octrois', the contents 'Des octrois'" not in out
    assert "warning: in the contents, not in the tree: 'CHAPITRE II.--Des octrois'\n" in out
    assert "warning: in the tree, not in the contents: 'Chapitre III (Des octrois)'\n" in out
    assert out.endswith("dry run: corpus/essai-essai-sur-les-routes/book.toml not written\n")
    assert not (home / "corpus" / "essai-essai-sur-les-routes").exists()


def test_small_book_goes_through_prepare(home, capsys):
    raw = write(home, "essai.txt", small_book(gap=False).encode("utf-8"))
    assert main(["add", str(raw), "--slug", "essai", "--year", "1900"]) == 0
    out = capsys.readouterr().out
    assert "warning" not in out
    assert out.endswith("wrote corpus/essai/book.toml; fill [theme], then: bookrag prepare essai\n")
    book = find_book(home / "corpus", "essai")
    assert (book.title, book.year, book.source_kind, book.encoding, book.source_folder) == (
        "Essai sur les routes",
        1900,
        "gutenberg",
        "utf-8",
        "essai",
    )
    assert [s.slug for s in book.front_matter] == ["preface"]
    assert [(p.slug, p.subtitle, [s.slug for s in p.sections]) for p in book.parts] == [
        ("premiere-partie", "Des chemins", ["chapitre-01-des-bornes", "chapitre-02-des-ponts"]),
        ("deuxieme-partie", "Des taxes", ["chapitre-01-des-peages", "chapitre-02-des-octrois"]),
    ]
    text = (home / "corpus/essai/book.toml").read_text(encoding="utf-8")
    assert "[theme]   # fed to the summary prompts" in text and f"size = {raw.stat().st_size}" in text
    paths = prepare(settings(home, raw.parent.parent), book).files
    assert len(paths) == 5
    body = (home / "corpus/essai/deuxieme-partie/chapitre-02-des-octrois/source.md").read_text(
        encoding="utf-8"
    )
    assert "V—MAIS NON, DIT-IL." in body.replace(".—", "—") and "CHAPITRE" not in body
    # a second run refuses to overwrite, --force does
    before = (home / "corpus/essai/book.toml").read_bytes()
    assert main(["add", str(raw), "--slug", "essai", "--year", "1901"]) == 1
    assert capsys.readouterr() == (
        "",
        "error: corpus/essai/book.toml already exists: choose another --slug, "
        "or pass --force to overwrite it\n",
    )
    assert (home / "corpus/essai/book.toml").read_bytes() == before
    assert main(["add", str(raw), "--slug", "essai", "--force"]) == 0


def test_plain_text_without_gutenberg_markers(home, capsys, monkeypatch):
    text = small_book(gap=False).split("***\n", 2)[1].rsplit("*** END", 1)[0]
    raw = write(home, "essai-libre.txt", text.encode("utf-8"))
    monkeypatch.delenv("BOOKRAG_SOURCES")
    assert main(["add", str(raw), "--slug", "libre", "--title", "Essai libre", "--author", "Jean Essai"]) == 0
    assert capsys.readouterr().out.endswith(
        f"then: BOOKRAG_SOURCES={raw.parent.parent} bookrag prepare libre\n"
    )  # where prepare will look for it
    book = find_book(home / "corpus", "libre")
    assert (book.title, book.source_kind) == ("Essai libre", "text")
    assert len(prepare(settings(home, raw.parent.parent), book).files) == 5


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "{path} is empty: there is no text to find a structure in"),
        (b"  \r\n\r\n", "{path} is empty: there is no text to find a structure in"),
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "{path} is a binary file, not plain text: give the book as a .txt file (UTF-8 or ISO-8859-1)",
        ),
        (
            "CHAPITRE I.\n\n“Guillemets” de Windows.\n".encode("cp1252"),
            "{path} has bytes that are neither UTF-8 nor ISO-8859-1 text (byte 0x93 at offset 13; UTF-8 fails at offset 13): "
            "convert the file to UTF-8",
        ),
        (
            b"The Project Gutenberg EBook of Nothing\n\nCHAPITRE I.\n\nTexte.\n",
            "{path} looks like a Gutenberg file but its START marker line ('*** START OF THE \u2026 GUTENBERG "
            "EBOOK \u2026') is missing: use the complete file as downloaded",
        ),
        (
            (
                "Une ligne.\n\n"
                + "Un paragraphe sans titre qui continue. " * 40
                + "\n\nSection 1\n\nTexte.\n\nSection 2\n\nTexte.\n"
                "\n\nSection 3\n\nFin du texte.\n"
            ).encode("utf-8"),
            "no chapter or part headings found in {path} (most frequent heading-like lines: 'Section #' (3×); 'Texte.' (2×)); "
            "write corpus/<slug>/book.toml by hand, see docs/manifests.md",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_nothing_is_written(home, capsys, data, message):
    raw = write(home, "bad.txt", data)
    assert main(["add", str(raw), "--slug", "bad"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: {message.format(path=raw)}\n"
    assert captured.out == ""
    assert list((home / "corpus").iterdir()) == []


# --- sub-sections (issue 36) ---------------------------------------------------------------------


def contents_1835(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The 1835 volume's table of contents read plainly (not with loader.detect): each chapter
    entry ("CHAP. V.--…", indented four spaces) with the entries indented further under it."""
    first = next(i for i, x in enumerate(lines) if x.strip() == "TABLE DES MATIÈRES")
    last = next(i for i, x in enumerate(lines) if x.strip().startswith("FIN DE LA TABLE"))
    chapters: list[tuple[str, list[str]]] = []
    block: list[str] = []
    for line in lines[first + 1 : last] + [""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            text = re.sub(r"\s+(\d+|_Ib\._)$", "", " ".join(x.strip() for x in block))
            if text.startswith("CHAP."):
                chapters.append((text, []))
            elif len(block[0]) - len(block[0].lstrip()) > 4 and chapters:
                chapters[-1][1].append(text)
        block = []
    return chapters


@needs_books
def test_1835_volume_every_listed_sub_section_becomes_a_node(tmp_path):
    raw = Path(SOURCES) / "tocqueville-democratie-1835" / "pg30514-8.txt"
    lines = raw.read_bytes().decode("iso-8859-1").replace("\r\n", "\n").split("\n")
    listed = contents_1835(lines)
    assert len(listed) == 10 and sum(len(subs) for _c, subs in listed) == 44
    p = propose([raw], sources=Path(SOURCES))
    chapters = [x for x in p.structure.front_matter if x.kind == "chapter"]
    assert len(chapters) == len(listed)
    for sec, (entry, subs) in zip(chapters, listed):
        got = [normalize(x.title) for x in sec.sections if not x.title.endswith(" (début)")]
        assert got == [normalize(t) for t in subs], entry
    assert not [w for w in p.warnings if "contents" in w]  # the contents and the body agree
    book = proposed_book(tmp_path, [raw])
    texts = texts_of(book)
    ranges = section_ranges(book, texts)
    words = {key: count_words(texts[f][body:end]) for key, (f, _h, body, end) in ranges.items()}
    assert max(words.values()) <= 20_000  # 46,399 words in chapter X before it had sections
    assert len(words) == 59
    chapter_v = next(s for s in book.front_matter if s.label == "Chapitre V")
    assert [s.slug for s in chapter_v.sections][:3] == [
        "00-debut",
        "01-du-vote-universel",
        "02-des-choix-du-peuple-et-des",
    ]
    assert (
        chapter_v.sections[0].start == chapter_v.start
    )  # the text before "DU VOTE UNIVERSEL." leads the chapter
    files = prepare(settings(tmp_path, Path(SOURCES)), book).files
    assert (
        len(files) == 59
        and (tmp_path / f"corpus/{book.slug}/{chapter_v.slug}/01-du-vote-universel/source.md") in files
    )


def sections_book() -> str:
    """A book whose first chapter has sections: the contents list one the body lacks ("Des
    mesures"), and the body has one the contents do not list ("DES POIDS.")."""
    return (
        "The Project "
        "Gutenberg EBook of Essai sur les foires, by Jean Essai\n\n"
        "Title: Essai sur les foires\n\nAuthor: Jean Essai\n\nLanguage: French\n\n"
        "*** START OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES FOIRES ***\n\n\n1902\n\n\n\n"
        f"CHAPITRE I.\n\n    Des marchés.\n\n\n{para(120)}\n\n\nDES ÉTALS.\n\n{para(90)}\n\n\n"
        f"DES PRIX.\n\n{para(90)}\n\n\nDES POIDS.\n\n{para(60)}\n\n\n"
        f"CHAPITRE II.\n\n    Des foires.\n\n\n{para(150)}\n\n\n"
        "FIN.\n\n\n\nTABLE DES MATIÈRES.\n\n"
        "    CHAPITRE I.--Des marchés.                  1\n\n"
        "      Des étals                                2\n\n"
        "      Des prix et des\n        gages                                 _Ib._\n\n"
        "      Des mesures                              4\n\n"
        "    CHAPITRE II.--Des foires.                  5\n\n"
        "FIN DE LA TABLE.\n\n"
        "*** END OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES FOIRES ***\n"
    )


def test_sub_sections_confirmed_by_the_contents_and_the_disagreements(home, capsys):
    text = sections_book()
    raw = write(home, "foires.txt", text.encode("utf-8"))
    lines = text.split("\n")
    assert main(["add", str(raw), "--slug", "foires"]) == 0
    out = capsys.readouterr().out
    assert (
        "  2  Chapitre I — Des marchés" in out
        and "    1  Des marchés (début)" in out
        and "    1  Des étals" in out
    )
    assert "  1  Chapitre II — Des foires" in out
    mesures = lines.index("      Des mesures                              4") + 1
    poids = lines.index("DES POIDS.") + 1
    assert (
        f"warning: foires.txt line {mesures}: the contents list 'Des mesures' under Chapitre I, but no heading "
        "inside Chapitre I matches it; left in the text around it\n"
    ) in out
    assert (
        f"warning: foires.txt line {poids}: upper-case heading 'DES POIDS.' inside Chapitre I is not in the "
        "contents; left in the text of the sub-section before it\n"
    ) in out
    assert "in the contents, not in the tree" not in out  # said once, with its line, above
    manifest = (home / "corpus/foires/book.toml").read_text(encoding="utf-8")
    assert manifest.count("[[front_matter.sections]]") == 3
    book = find_book(home / "corpus", "foires")
    chapter = book.front_matter[0]
    assert [(s.slug, s.title, s.start) for s in chapter.sections] == [
        ("00-debut", "Des marchés (début)", "CHAPITRE I."),
        ("01-des-etals", "Des étals", "DES ÉTALS."),
        ("02-des-prix-et-des-gages", "Des prix et des gages", "DES PRIX."),
    ]
    files = prepare(settings(home, raw.parent.parent), book).files
    assert len(files) == 4
    prix = (home / "corpus/foires/chapitre-01-des-marches/02-des-prix-et-des-gages/source.md").read_text(
        encoding="utf-8"
    )
    assert "DES POIDS." in prix  # a heading the contents do not list stays in the text, as the warning says


def test_a_book_whose_contents_list_no_sections_keeps_its_chapters_whole(home, capsys):
    text = (
        sections_book()
        .replace("      Des étals                                2\n\n", "")
        .replace("      Des prix et des\n        gages                                 _Ib._\n\n", "")
        .replace("      Des mesures                              4\n\n", "")
    )
    raw = write(home, "foires.txt", text.encode("utf-8"))
    assert main(["add", str(raw), "--slug", "foires", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "  1  Chapitre I — Des marchés" in out and "(début)" not in out and "warning" not in out


def test_a_listed_section_without_paragraphs_stops_add(home, capsys):
    text = (
        sections_book()
        .replace("DES PRIX.\n\n", "DES PRIX.\n\n\nDES GAGES.\n\n")
        .replace(
            "      Des mesures                              4\n\n",
            "      Des gages                                4\n\n",
        )
    )
    raw = write(home, "foires.txt", text.encode("utf-8"))
    assert main(["add", str(raw), "--slug", "foires"]) == 1
    line = text.split("\n").index("DES PRIX.") + 1
    assert capsys.readouterr().err == (
        f"error: sections without paragraphs (a heading followed by the next heading): "
        f"{raw} line {line} 'Des prix et des gages'; fix the file or write the manifest "
        "by hand (docs/manifests.md)\n"
    )
    assert not (home / "corpus" / "foires").exists()
