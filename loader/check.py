"""`bookrag check`: validate the corpus tree on disk against the book manifests."""

from __future__ import annotations

from pathlib import Path

from bookrag.config import Settings
from bookrag.errors import BookragError
from loader import author_summary, endnotes, frontmatter
from loader.anchors import check_body, cited_units
from loader.chunking import paragraphs
from loader.manifest import Node, all_books, book_tree, find_book


def check_corpus(settings: Settings, books: list[str] | None = None) -> tuple[list[str], str]:
    """(problems, summary line). Problems name the file: missing nodes, frontmatter that is
    incomplete or disagrees with the tree (parent, level, node type, heading path), parents
    that do not exist, more than one root, .md files the manifest does not know, end-note calls
    without their note or notes nobody calls (loader.endnotes)."""
    problems: list[str] = []
    counts = {"books": 0, "files": 0, "missing_sources": 0}
    skipped: list[str] = []
    cited: list[str] = []
    targets = [find_book(settings.corpus, b) for b in books] if books else all_books(settings.corpus)
    for book in targets:
        tree = book_tree(book)
        if not books and not any((settings.home / n.source_file).exists() for n in tree):
            skipped.append(book.slug)  # a book with a manifest only (not built here): say so, do not fail
            continue
        counts["books"] += 1
        known = {n.source_file for n in tree}
        roots = []
        for node in tree:
            path = settings.home / node.source_file
            if not path.exists():
                if node.node_type == "source":
                    counts["missing_sources"] += 1
                    problems.append(
                        f"{node.source_file}: missing (generated: run `bookrag prepare {book.slug}`)"
                    )
                else:
                    problems.append(
                        f"{node.source_file}: missing summary (run `bookrag summarize {book.slug}`)"
                    )
                continue
            counts["files"] += 1
            try:
                meta, body = frontmatter.read(path)
                frontmatter.validate(meta, node.source_file)
            except Exception as exc:  # BookragError carries file and line
                problems.append(str(exc))
                continue
            for key, want in (
                ("parent_source_file", node.parent_source_file),
                ("level", node.level),
                ("node_type", node.node_type),
                ("heading_path", node.heading_path),
                ("book", book.slug),
            ):
                if meta.get(key) != want:
                    problems.append(
                        f"{node.source_file}:1: {key} is {meta.get(key)!r}, the tree says {want!r}"
                    )
            parent = meta.get("parent_source_file")
            if parent is None:
                roots.append(node.source_file)
            elif not (settings.home / parent).exists():
                problems.append(f"{node.source_file}:1: parent_source_file {parent} does not exist")
            elif parent in known:
                plevel = next(n.level for n in tree if n.source_file == parent)
                level = meta.get("level", -1)
                if plevel < level or (
                    plevel == level and level != 2
                ):  # a level-2 chapter sits under a level-2 part
                    problems.append(
                        f"{node.source_file}:1: level {meta.get('level')} under a parent of level {plevel}"
                    )
            if not body.strip():
                problems.append(f"{node.source_file}: empty body")
            try:  # the author's own summaries: a well-formed list of its paragraphs (decision 0035)
                author_summary.paragraphs_of(meta, path, len(paragraphs(body)))
            except BookragError as exc:
                problems.append(str(exc).replace(str(path), node.source_file, 1))
            if node.node_type == "summary" and meta.get("generator") not in ("team", "llm", "extractive"):
                problems.append(
                    f"{node.source_file}:1: summary without provenance (generator team, llm or extractive)"
                )
            if node.node_type == "summary":
                problems += check_anchors(settings.home, tree, node, meta, path)
        problems += endnotes.corpus_problems(settings.home, book, tree)
        share = cited_share(settings.home, tree)
        if share is not None:
            cited.append(f"{book.slug} {share[0]}/{share[1]} ({100 * share[0] / max(share[1], 1):.0f} %)")
        if len(roots) != 1:
            problems.append(
                f"corpus/{book.slug}: {len(roots)} roots (files without parent): {', '.join(roots) or 'none'}"
            )
        folder = settings.corpus / book.slug
        for md in sorted(folder.rglob("*.md")):
            rel = md.relative_to(settings.home).as_posix()
            if rel not in known:
                problems.append(f"{rel}: not part of {book.slug}'s tree (book.toml does not name it)")
    line = (
        f"{plural(counts['books'], 'book')}, {plural(counts['files'], 'file')} checked, "
        f"{plural(len(problems), 'problem')}"
        + (f" ({counts['missing_sources']} source files not prepared)" if counts["missing_sources"] else "")
        + (f"; not built (manifest only): {', '.join(skipped)}" if skipped else "")
        + (f"\nparagraphs cited by a summary anchor: {'; '.join(cited)}" if cited else "")
    )
    return problems, line


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _units(home: Path, tree: list[Node], node: Node) -> int | None:
    """How many units node's anchors may cite (None: its source is not prepared)."""
    if node.level == 1:
        src = home / node.folder / "source.md"
        return len(paragraphs(frontmatter.read(src)[1])) if src.exists() else None
    return sum(1 for n in tree if n.parent_source_file == node.source_file and n.node_type == "summary")


def check_anchors(home: Path, tree: list[Node], node: Node, meta: dict, path: Path) -> list[str]:
    """Anchor problems of one summary (docs/anchors.md): malformed, out of range, too wide, or a
    level-1 sentence without one (extractive summaries excepted: their sentences are the
    source's own, anchored as picked)."""
    try:
        units = _units(home, tree, node)
    except BookragError as exc:
        return [str(exc)]
    if units is None:
        return []
    text = path.read_text(encoding="utf-8")
    body = frontmatter.split(text, path)[1]
    first_line = text[: len(text) - len(body)].count("\n") + 1
    every = node.level == 1 and meta.get("generator") in ("team", "llm")
    return [p.at(node.source_file) for p in check_body(body, first_line, units, every_sentence=every)]


def cited_share(home: Path, tree: list[Node]) -> tuple[int, int] | None:
    """(paragraphs cited by some level-1 anchor, paragraphs) over a book's prepared sections."""
    cited = total = 0
    for node in (n for n in tree if n.level == 1):
        src, summ = home / node.folder / "source.md", home / node.source_file
        if not (src.exists() and summ.exists()):
            continue
        try:
            n = len(paragraphs(frontmatter.read(src)[1]))
            units = cited_units(frontmatter.read(summ)[1])
        except BookragError:
            continue  # a broken file or anchor: reported on its own line
        total += n
        cited += len([u for u in units if u <= n])
    return (cited, total) if total else None
