"""Prepare a Wikisource book into the corpus tree (source.md files) from a MediaWiki export.

Input: the XML that Special:Export produces (<mediawiki><page><title>…</title><revision>
<text>wikitext</text></revision></page>…), read from a local file or folder of .xml files
(`bookrag prepare <book> --from export.xml`), from BOOKRAG_SOURCES/<folder>/*.xml, or fetched
with --download from the manifest's `[source] export_url`. Each manifest section names its
Wikisource page with a `page` field (read here from book.toml, since loader.manifest keeps only
the fields every importer shares); the page's last revision is its text.

Wikitext to paragraphs (parsed with mwparserfromhell, not regular expressions, so nested
templates and tags are handled): templates are dropped, except a few that only format their
text ({{sc|…}}, {{lang|la|…}}, {{corr|wrong|right}}: the text is kept); headings, comments,
<noinclude>, <references/>, category and file links are dropped; [[target|label]] becomes its
label; ''italic'' and <i> become _italic_, '''bold''' becomes plain; <div>, <span> and other
HTML tags keep their content; entities (&nbsp;) are decoded. Blank lines separate paragraphs
and single newlines join with a space, as MediaWiki renders them. Footnotes follow
loader.importers.gutenberg's convention: <ref>…</ref> becomes a `[^n]` marker (numbered from 1 in each
section; a named <ref name=… /> reuses its number) and a `[^n]: …` definition, one paragraph,
right after the paragraph that first cites it. Pages that transclude scanned pages with
<pages index=… /> (ProofreadPage) hold no text in an export: they are refused by name.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import mwparserfromhell
from mwparserfromhell.nodes import (
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from bookrag.config import Settings
from bookrag.errors import BookragError
from loader.importers.base import PreparedBook, section_key, write_sources
from loader.manifest import Book, book_tree

#: Titles per Special:Export request when downloading (keeps GET URLs short).
BATCH = 10
USER_AGENT = "bookrag/0.1 (Wikisource importer; https://fr.wikisource.org/wiki/Special:Export)"

#: Templates whose visible text is one of their parameters: name (lower case) -> parameter.
TEXT_TEMPLATES = {"sc": "1", "pc": "1", "petites capitales": "1", "nobr": "1", "lang": "2", "corr": "2"}
#: Tags dropped with their content.
DROP_TAGS = {
    "noinclude",
    "references",
    "gallery",
    "imagemap",
    "timeline",
    "score",
    "templatestyles",
    "indicator",
    "section",
    "math",
}
#: Tags whose content stands apart from the text around it (a paragraph break on each side).
BLOCK_TAGS = {"div", "p", "center", "blockquote", "poem", "table", "hr", "ul", "ol", "dl"}
#: Links that render no text: categories and images, and (without a label) interlanguage links.
MEDIA_LINK_RE = re.compile(r"^\s*(catégorie|category|fichier|file|image)\s*:", re.I)
INTERLANGUAGE_RE = re.compile(r"^\s*[a-z]{2,3}(-[a-z]+)?\s*:")
#: Placeholders for footnote markers while rendering (private-use characters never in a text).
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
MARK_RE = re.compile(f"{MARK_OPEN}(\\d+){MARK_CLOSE}")
#: HTML tags mwparserfromhell leaves as text (unbalanced ones), and stray bold/italic quotes.
STRAY_TAG_RE = re.compile(r"</?(div|span|center|small|big|font|p|i|b|em|strong|u|s|sup|sub)\b[^>]*>", re.I)
STRAY_QUOTES_RE = re.compile(r"'{2,}")


@dataclass(frozen=True)
class WikiPage:
    title: str
    text: str
    redirect: str | None
    file: Path


@dataclass(frozen=True)
class Export:
    label: str  # the file (or folder) errors name
    pages: dict[str, WikiPage]  # normalised title -> page


@dataclass
class _Notes:
    """Footnotes met while rendering one section: texts by number, named refs' numbers."""

    texts: list[str] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)


# --- the export -----------------------------------------------------------------------------


def norm_title(title: str) -> str:
    """A title as MediaWiki stores it: underscores are spaces, first letter upper case."""
    t = re.sub(r"[\s_]+", " ", title).strip()
    return t[:1].upper() + t[1:]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in elem if _local(c.tag) == name), None)


def read_export(path: Path) -> dict[str, WikiPage]:
    """The pages of one Special:Export XML file (the last revision of each)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise BookragError(f"{path}: malformed XML export: {exc}") from exc
    except OSError as exc:
        raise BookragError(f"{path}: cannot read the export: {exc.strerror or exc}") from exc
    if _local(root.tag) != "mediawiki":
        raise BookragError(
            f"{path}: not a MediaWiki export (root element <{_local(root.tag)}>, expected <mediawiki>)"
        )
    pages: dict[str, WikiPage] = {}
    for elem in root:
        if _local(elem.tag) != "page":
            continue
        title_elem = _child(elem, "title")
        title = (title_elem.text or "").strip() if title_elem is not None else ""
        if not title:
            raise BookragError(f"{path}: a <page> has no <title>")
        revisions = [c for c in elem if _local(c.tag) == "revision"]
        text_elem = _child(revisions[-1], "text") if revisions else None
        redirect = _child(elem, "redirect")
        pages[norm_title(title)] = WikiPage(
            title=title,
            text=(text_elem.text or "") if text_elem is not None else "",
            redirect=redirect.get("title") if redirect is not None else None,
            file=path,
        )
    return pages


def load_export(paths: list[Path], label: str) -> Export:
    pages: dict[str, WikiPage] = {}
    for p in paths:
        pages.update(read_export(p))
    return Export(label, pages)


def find_page(export: Export, title: str, where: str) -> WikiPage:
    """The export's page with this title, following redirects held in the export."""
    page = export.pages.get(norm_title(title))
    if page is None:
        close = difflib.get_close_matches(norm_title(title), list(export.pages), n=1, cutoff=0.8)
        hint = f"; closest title in the export: {export.pages[close[0]].title!r}" if close else ""
        raise BookragError(f"{export.label}: page {title!r} ({where}) is not in the export{hint}")
    for _ in range(5):
        if page.redirect is None:
            return page
        target = export.pages.get(norm_title(page.redirect))
        if target is None:
            raise BookragError(
                f"{page.file}: page {page.title!r} redirects to {page.redirect!r}, which is not in the export"
            )
        page = target
    raise BookragError(f"{page.file}: page {title!r}: too many redirects")


# --- wikitext to paragraphs ------------------------------------------------------------------


def _param(tpl: Template, name: str) -> Wikicode | None:
    return tpl.get(name).value if tpl.has(name) else None


def _render_template(tpl: Template, notes: _Notes, in_note: bool) -> str:
    key = TEXT_TEMPLATES.get(str(tpl.name).strip().lower())
    value = _param(tpl, key) if key else None
    return _render(value, notes, in_note) if value is not None else ""


def _render_link(link: Wikilink, notes: _Notes, in_note: bool) -> str:
    title = str(link.title).strip()
    if title.startswith(":"):  # [[:Catégorie:X]] is a visible link, not a categorisation
        return _render(link.text, notes, in_note) if link.text is not None else title[1:]
    if MEDIA_LINK_RE.match(title):
        return ""
    if link.text is not None:
        return _render(link.text, notes, in_note)
    return "" if INTERLANGUAGE_RE.match(title) else title


def _italic(inner: str) -> str:
    """_inner_, the underscores against the words (whitespace stays outside)."""
    core = inner.strip()
    if not core:
        return inner
    lead, trail = inner[: len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()) :]
    return f"{lead}_{core}_{trail}"


def _render_ref(tag: Tag, notes: _Notes, in_note: bool) -> str:
    """A footnote marker (the note's text is kept in `notes`); a ref inside a note is inlined."""
    body = _render(tag.contents, notes, True) if tag.contents is not None else ""
    if in_note:
        return f" ({body.strip()})" if body.strip() else ""
    name = str(tag.get("name").value).strip() if tag.has("name") else None
    if name is not None and name in notes.names:
        number = notes.names[name]
        if body.strip() and not notes.texts[number - 1]:
            notes.texts[number - 1] = body
    else:
        notes.texts.append(body)
        number = len(notes.texts)
        if name is not None:
            notes.names[name] = number
    return f"{MARK_OPEN}{number}{MARK_CLOSE}"


class _Transclusion(Exception):
    """A <pages index=…/> tag: the text lives in the scans' Page: pages, not in this page."""


def _render_tag(tag: Tag, notes: _Notes, in_note: bool) -> str:
    name = str(tag.tag).strip().lower()
    if name == "pages":
        raise _Transclusion(str(tag.get("index").value).strip() if tag.has("index") else "")
    if name == "ref":
        return _render_ref(tag, notes, in_note)
    if name in DROP_TAGS:
        return ""
    if name == "br":
        return " "
    if name == "nowiki":
        return str(tag.contents or "")
    inner = _render(tag.contents, notes, in_note) if tag.contents is not None else ""
    if name in ("i", "em"):
        inner = _italic(inner)
    elif name in ("td", "th"):
        inner += " "
    return f"\n\n{inner}\n\n" if name in BLOCK_TAGS else inner


def _render_node(node: Node, notes: _Notes, in_note: bool) -> str:
    if isinstance(node, Text):
        return str(node)
    if isinstance(node, Tag):
        return _render_tag(node, notes, in_note)
    if isinstance(node, Template):
        return _render_template(node, notes, in_note)
    if isinstance(node, Wikilink):
        return _render_link(node, notes, in_note)
    if isinstance(node, ExternalLink):
        return _render(node.title, notes, in_note) if node.title is not None else str(node.url)
    if isinstance(node, HTMLEntity):
        return node.normalize()
    if isinstance(node, Heading):
        return "\n\n"
    if isinstance(node, Comment):
        return ""
    return ""  # template arguments {{{x}}} and anything else render nothing


def _render(code: Wikicode, notes: _Notes, in_note: bool = False) -> str:
    return "".join(_render_node(n, notes, in_note) for n in code.nodes)


def _squash(text: str) -> str:
    text = STRAY_QUOTES_RE.sub("", STRAY_TAG_RE.sub("", text))
    return re.sub(r"\s+", " ", text).strip()


def wikitext_paragraphs(wikitext: str) -> list[str]:
    """Paragraphs of a page's wikitext, each followed by the definitions of the footnotes it
    cites first. Raises _Transclusion when the page transcludes scans (<pages index=…/>)."""
    notes = _Notes()
    text = _render(mwparserfromhell.parse(wikitext), notes)
    paras: list[str] = []
    defined: set[int] = set()
    for block in re.split(r"\n[ \t\xa0]*\n", text):
        para = _squash(block)
        if not para:
            continue
        paras.append(MARK_RE.sub(r"[^\1]", para))
        for number in (int(m) for m in MARK_RE.findall(para)):
            if number not in defined:
                defined.add(number)
                paras.append(f"[^{number}]: {_squash(notes.texts[number - 1])}")
    return paras


def page_paragraphs(page: WikiPage) -> list[str]:
    """The paragraphs of one page; errors name the export file and the page."""
    if not page.text.strip():
        raise BookragError(f"{page.file}: page {page.title!r} has no text")
    try:
        paras = wikitext_paragraphs(page.text)
    except _Transclusion as exc:
        raise BookragError(
            f'{page.file}: page {page.title!r} transcludes scanned pages (<pages index="{exc.args[0]}" …/>) '
            "instead of holding its text; an export does not include them, so this page cannot be imported"
        ) from None
    if not paras:
        raise BookragError(
            f"{page.file}: page {page.title!r} has no text once templates and markup are removed"
        )
    return paras


# --- finding the export ----------------------------------------------------------------------


def section_pages(book: Book) -> dict[str, str]:
    """Section key of each leaf ('slug' for front matter, 'part/slug' in a part, deeper for a
    sub-section) -> its Wikisource page title,
    from the `page` fields of book.toml."""
    data = tomllib.loads(book.path.read_text(encoding="utf-8"))

    def leaves(prefix: str, sections: list[dict]) -> list[tuple[str, dict]]:
        return [
            x
            for s in sections
            for x in (
                leaves(f"{prefix}{s['slug']}/", s["sections"])
                if s.get("sections")
                else [(f"{prefix}{s['slug']}", s)]
            )
        ]

    entries = leaves("", data.get("front_matter", []))
    entries += [x for p in data.get("parts", []) for x in leaves(f"{p['slug']}/", p.get("sections", []))]
    missing = [key for key, s in entries if not str(s.get("page", "")).strip()]
    if missing:
        raise BookragError(
            f"{book.path}: section(s) without a page field (their Wikisource page title): {', '.join(missing)}"
        )
    return {key: s["page"] for key, s in entries}


def _xml_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.xml"))
        if not files:
            raise BookragError(f"{path}: no .xml export in this folder")
        return files
    if not path.exists():
        raise BookragError(f"{path}: no such export file")
    return [path]


def export_url(template: str, titles: list[str]) -> str:
    """The Special:Export URL for these titles: `{pages}` in the manifest's export_url stands for
    the titles, newline-separated and URL-encoded (a URL without it is fetched as it is)."""
    return (
        template.replace("{pages}", urllib.parse.quote("\n".join(titles), safe=""))
        if "{pages}" in template
        else template
    )


def _fetch(url: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp, tmp.open("wb") as out:
            out.write(resp.read())
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BookragError(
            f"cannot download {url}: {exc}; offline? pass --from <a Special:Export XML file> instead"
        ) from exc
    tmp.replace(path)


def download_exports(settings: Settings, book: Book, titles: list[str]) -> list[Path]:
    """Fetch the export in batches of titles into .bookrag/downloads/<book>/ (kept: a file
    already there for the same titles is not fetched again)."""
    template = book.extra.get("export_url")
    if not template:
        raise BookragError(f"{book.path}: [source] has no export_url to download the Wikisource export from")
    folder = settings.state_dir / "downloads" / book.slug
    batches = (
        [titles[i : i + BATCH] for i in range(0, len(titles), BATCH)] if "{pages}" in template else [titles]
    )
    paths = []
    for i, batch in enumerate(batches, 1):
        digest = hashlib.sha256("\n".join(batch).encode()).hexdigest()[:8]
        path = folder / f"export-{i:02d}-{digest}.xml"
        if not path.exists():
            _fetch(export_url(template, batch), path)
        paths.append(path)
    return paths


def locate_export(
    settings: Settings, book: Book, titles: list[str], download: bool, export: Path | None
) -> Export:
    if export is not None:
        return load_export(_xml_files(export), str(export))
    if download:
        paths = download_exports(settings, book, titles)
        return load_export(paths, str(paths[0]) if len(paths) == 1 else str(paths[0].parent))
    if settings.sources is not None:
        folder = settings.sources / (book.source_folder or book.slug)
        return load_export(_xml_files(folder), str(folder))
    raise BookragError(
        f"{book.path}: no Wikisource export to read: pass --from <a Special:Export XML file or folder>, "
        f"set BOOKRAG_SOURCES (reads <BOOKRAG_SOURCES>/{book.source_folder or book.slug}/*.xml), "
        "or pass --download to fetch it (needs internet)"
    )


# --- the corpus files ------------------------------------------------------------------------


def prepare(
    settings: Settings, book: Book, *, download: bool = False, source: Path | None = None
) -> PreparedBook:
    """Write every source.md of a Wikisource book from the export `source` (a file or folder),
    BOOKRAG_SOURCES or, with `download`, the manifest's export_url. Every section is converted
    before any file is written."""
    pages = section_pages(book)
    exp = locate_export(settings, book, list(dict.fromkeys(pages.values())), download, source)
    bodies = []
    for node in book_tree(book):
        if node.node_type != "source":
            continue
        key = section_key(node)
        page = find_page(exp, pages[key], f"section {key}")
        bodies.append((node, "\n\n".join(page_paragraphs(page))))
    return write_sources(settings, book, bodies)
