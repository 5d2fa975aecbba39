"""JSONL sidecars: one `<file>.md.jsonl` next to every corpus .md, embedded or not.

Line 1 is the manifest (the spec's fields, then `chunking` and, for embedded files,
`embedding_recipe`: what else decides the content, so a change re-chunks or re-embeds);
then one line per chunk: chunk_index, content_token_count, text, paragraph (the 1-based
paragraph of the .md it comes from), `cites` on summary chunks carrying anchors (the
paragraphs or child nodes they cite, docs/anchors.md; the anchors themselves are stripped
from `text`) and on source chunks calling end notes ("(_A_)": the note's source.md, whole),
`kind: "author_summary"` on the chunks of a paragraph that is the author's own summary (the
source.md frontmatter's `author_summaries`; absent for the text: loader.author_summary),
`kind: "extractive_summary"` on every chunk of a summary the extractive provider wrote (and in
its manifest: the author's sentences arranged by a program, decision 0040), embedding when the file is embedded, and, on an embedded chapter (level-1)
summary written by the team or an LLM (not extractive), `sentences`: each anchored sentence
of the chunk without its anchors, the paragraphs it cites and its own embedding (the sentence
branch of the search; the manifest then names `sentence_recipe`). Same .md + same settings ->
byte-identical sidecar. Rewriting a sidecar re-embeds only chunks whose embedded input
changed: vectors of unchanged chunks are taken from the sidecar being replaced.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bookrag.errors import BookragError
from loader import author_summary, frontmatter
from loader.anchors import AnchorError, anchored_sentences, find_anchors, strip_anchors
from loader.chunking import Chunk, chunk_body
from loader.embedding import RECIPE, Embedder, embedding_input
from loader.tokens import ENCODING, count_tokens

MANIFEST_KEYS = (
    "type",
    "source_file",
    "source_file_hash",
    "parent_source_file",
    "heading_path",
    "level",
    "node_type",
)


@dataclass
class Sidecar:
    path: Path
    manifest: dict[str, Any]
    chunks: list[dict[str, Any]]

    @property
    def source_file(self) -> str:
        return self.manifest["source_file"]

    @property
    def embedded(self) -> bool:
        return self.manifest.get("embedding_model") is not None


@dataclass
class SidecarStats:
    written: int = 0
    unchanged: int = 0
    chunks_embedded: int = 0
    sentences_embedded: int = 0  # chapter-summary sentences embedded alone (the sentence branch)
    files: list[Path] = field(default_factory=list)

    def embedded(self) -> str:
        """'8 chunks embedded', or '8 chunks and 5 summary sentences embedded'."""
        more = f" and {self.sentences_embedded} summary sentences" if self.sentences_embedded else ""
        return f"{self.chunks_embedded} chunks{more} embedded"


def sidecar_path(md: Path) -> Path:
    return md.with_name(md.name + ".jsonl")


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


#: Version of the chunk lines' shape: 2 added `paragraph` and `cites` (issue 11).
CHUNK_FORMAT = 2
#: How a summary sentence is embedded: alone, without the heading path (measured: the heading in
#: front of a one-sentence text drowned it; decision 0017, `git show 1818990:evaluation/experiments/sentence_anchors/`).
SENTENCE_RECIPE = "plain-v1"


def chunking_settings(max_tokens: int) -> dict[str, Any]:
    return {"max_tokens": max_tokens, "tokenizer": ENCODING, "format": CHUNK_FORMAT}


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def _vector(v: Any) -> list[float]:
    return [round(float(x), 7) for x in v]


def render_sidecar(
    manifest: dict[str, Any],
    chunks: list[Chunk],
    vectors: Any | None,
    cites: list[list[dict[str, Any]]] | None = None,
    sentences: list[list[dict[str, Any]]] | None = None,
    author_paragraphs: frozenset[int] = frozenset(),
) -> str:
    """The sidecar's text; `sentences[i]` are chunk i's anchored sentences, each with its
    `embedding` already computed; chunks of `author_paragraphs` get `"kind": "author_summary"`,
    every chunk of a summary whose manifest has a `kind` gets that kind."""
    lines = [_dump(manifest)]
    for c in chunks:
        row: dict[str, Any] = {
            "chunk_index": c.index,
            "content_token_count": c.tokens,
            "text": c.text,
            "paragraph": c.paragraph,
        }
        if c.paragraph in author_paragraphs:
            row["kind"] = author_summary.KIND
        elif manifest.get("kind"):
            row["kind"] = manifest["kind"]
        if cites and cites[c.index]:
            row["cites"] = cites[c.index]
        if vectors is not None:
            row["embedding"] = _vector(vectors[c.index])
        if sentences and sentences[c.index]:
            row["sentences"] = [{**s, "embedding": _vector(s["embedding"])} for s in sentences[c.index]]
        lines.append(_dump(row))
    return "\n".join(lines) + "\n"


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The first line of an existing sidecar, or None when absent or unreadable."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = fh.readline()
        obj = json.loads(first)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and obj.get("type") == "manifest" else None


@dataclass
class _Plan:
    manifest: dict[str, Any]
    chunks: list[Chunk]
    embed: bool
    cites: list[list[dict[str, Any]]]
    sentences: list[list[dict[str, Any]]]  # per chunk: {text, paragraphs} (level-1 summaries, embedded)
    author_paragraphs: frozenset[int] = frozenset()  # the author's own summaries (source.md)


def _plan(
    md: Path, home: Path, max_tokens: int, embedder: Embedder | None, recipe: str = RECIPE
) -> _Plan | None:
    """What the sidecar of md must contain; None when the existing one is up to date."""
    meta, body = frontmatter.read(md)
    frontmatter.validate(meta, md)
    rel = md.relative_to(home).as_posix()
    used = embedder if meta["embed"] else None  # the embedder, when this file is embedded
    embed = used is not None
    manifest: dict[str, Any] = {
        "type": "manifest",
        "source_file": rel,
        "source_file_hash": file_hash(md),
        "parent_source_file": meta["parent_source_file"],
        "heading_path": meta["heading_path"],
        "level": meta["level"],
        "node_type": meta["node_type"],
    }
    if used is not None:
        manifest["embedding_model"] = used.model
        manifest["dimension"] = used.dimension
    if meta["node_type"] == "summary" and meta.get("generator") == "extractive":
        manifest["kind"] = author_summary.EXTRACTIVE
    # An extractive summary's sentence is a paragraph's own words, which that paragraph's vector and
    # BM25 row already carry: only written summaries (team, LLM) give the sentence branch rows.
    with_sentences = (
        embed
        and meta["node_type"] == "summary"
        and meta["level"] == 1
        and meta.get("generator") != "extractive"
    )
    current = read_manifest(sidecar_path(md))
    settings = chunking_settings(max_tokens)
    if current is not None:
        same = all(
            current.get(k) == manifest.get(k)
            for k in (*MANIFEST_KEYS, "embedding_model", "dimension", "kind")
        )
        same = same and current.get("chunking") == settings
        same = same and current.get("embedding_recipe") == (recipe if embed else None)
        same = same and current.get("sentence_recipe") == (SENTENCE_RECIPE if with_sentences else None)
        if same:
            return None
    heading = meta["heading_path"]
    extra = (lambda t: used.fits(embedding_input(heading, t, recipe))) if used is not None else None
    chunks = chunk_body(body, max_tokens, extra)
    if not chunks:
        raise BookragError(f"{md}: the body is empty; nothing to chunk")
    cites: list[list[dict[str, Any]]] = []
    sentences: list[list[dict[str, Any]]] = []
    author_paragraphs: frozenset[int] = frozenset()
    if meta["node_type"] == "source":
        cites = _note_cites(md, home, rel, chunks, body)
        author_paragraphs = frozenset(author_summary.paragraphs_of(meta, md, chunks[-1].paragraph))
    if meta["node_type"] == "summary":
        first_line = _body_first_line(md)
        cites = [_cites(md, home, rel, meta["level"], c, first_line, body) for c in chunks]
        if with_sentences:
            sentences = [
                [{"text": t, "paragraphs": list(units)} for t, units in anchored_sentences(c.text)]
                for c in chunks
            ]
        chunks = [
            Chunk(c.index, stripped, count_tokens(stripped), c.paragraph)
            for c in chunks
            for stripped in [strip_anchors(c.text)]
        ]
    manifest["chunk_count"] = len(chunks)
    manifest["chunking"] = settings
    if embed:
        manifest["embedding_recipe"] = recipe
    if with_sentences:
        manifest["sentence_recipe"] = SENTENCE_RECIPE
    return _Plan(manifest, chunks, embed, cites, sentences, author_paragraphs)


def _body_first_line(md: Path) -> int:
    text = md.read_text(encoding="utf-8")
    _meta, body = frontmatter.split(text, md)
    return text[: len(text) - len(body)].count("\n") + 1


def _cites(
    md: Path, home: Path, rel: str, level: int, chunk: Chunk, first_line: int, body: str
) -> list[dict[str, Any]]:
    """What a summary chunk's anchors cite: paragraphs of the section's source.md (level 1) or
    child nodes (levels 2-3, numbered in manifest order). Errors name the .md line."""
    line = first_line + next((i for i, ln in enumerate(body.split("\n")) if chunk.text[:60] in ln), 0)
    try:
        anchors = find_anchors(chunk.text)
    except AnchorError as exc:
        raise BookragError(f"{md}:{line}: {exc}") from exc
    units = sorted({u for a in anchors for u in a.units})
    if not units:
        return []
    if level == 1:
        return [{"source_file": rel.rsplit("/", 1)[0] + "/source.md", "paragraphs": units}]
    children = _children(home, rel)
    beyond = [u for u in units if u > len(children)]
    if beyond:
        raise BookragError(f"{md}:{line}: anchor §{beyond[0]} is beyond the last child (§{len(children)})")
    return [{"source_file": children[u - 1]} for u in units]


def _call_line(md: Path, body: str, paragraph: int, call: str) -> int:
    """The .md line (1-based, frontmatter counted) of `call` in that paragraph of the body."""
    number, inside, start = 0, False, 0
    lines = body.split("\n")
    for i, ln in enumerate(lines):
        if ln.strip() and not inside:
            number += 1
            start = i
        inside = bool(ln.strip())
        if number == paragraph and call in ln:
            return _body_first_line(md) + i
    return _body_first_line(md) + start


def _note_cites(md: Path, home: Path, rel: str, chunks: list[Chunk], body: str) -> list[list[dict[str, Any]]]:
    """What each chunk of a source.md cites: the end notes it calls, "(_A_)" -> that note's
    source.md, whole (loader.endnotes; decision 0036). [] for a book without note sections and
    for the notes themselves; a call whose note the manifest lacks names the .md line."""
    from loader import endnotes

    notes = endnotes.book_notes(home, rel.split("/")[1])
    if not notes or rel in notes.values():
        return []
    out: list[list[dict[str, Any]]] = []
    for c in chunks:
        labels = endnotes.called_labels(c.text)
        missing = [label for label in labels if label not in notes]
        if missing:
            raise BookragError(
                f"{md}:{_call_line(md, body, c.paragraph, f'(_{missing[0]}_)')}: calls note (_{missing[0]}_), which the notes do not "
                "hold (the manifest's Notes part has no such section)"
            )
        out.append([{"source_file": notes[label]} for label in labels])
    return out if any(out) else []


def _children(home: Path, rel: str) -> list[str]:
    from loader.manifest import book_tree, find_book

    nodes = book_tree(find_book(home / "corpus", rel.split("/")[1]))
    return [n.source_file for n in nodes if n.parent_source_file == rel and n.node_type == "summary"]


def write_sidecars(
    mds: Iterable[Path],
    home: Path,
    max_tokens: int,
    embedder: Embedder | None,
    progress: bool = True,
    recipe: str = RECIPE,
    bar: tqdm | None = None,
) -> SidecarStats:
    """Write the sidecar of every .md that changed (hash, model, chunking or recipe);
    skip the others without embedding anything. Each write is atomic, one file at a time: an
    interrupted run keeps the files written before it. `bar`: a progress bar shared with other
    calls (`bookrag build --all`: one for the shelf), advanced but not closed here."""
    stats = SidecarStats()
    todo, reuse = _todo(mds, home, max_tokens, embedder, recipe, stats)
    total = sum(
        sum(c.text not in reuse[md][0] for c in p.chunks)
        + sum(s["text"] not in reuse[md][1] for ss in p.sentences for s in ss)
        for md, p in todo
        if p.embed
    )
    own = bar is None
    if bar is None:
        bar = tqdm(total=total, unit="chunk", desc="embedding", disable=not progress or total == 0)
    try:
        for md, p in todo:
            vectors = None
            sentences = None
            if p.embed:
                assert embedder is not None
                heading = p.manifest["heading_path"]
                known, known_sentences = reuse[md]
                fresh = [c for c in p.chunks if c.text not in known]
                if fresh:
                    computed = embedder.passages([embedding_input(heading, c.text, recipe) for c in fresh])
                    known = {**known, **{c.text: list(v) for c, v in zip(fresh, computed)}}
                vectors = [known[c.text] for c in p.chunks]
                fresh_sentences = sorted({s["text"] for ss in p.sentences for s in ss} - set(known_sentences))
                if fresh_sentences:
                    computed = embedder.passages(
                        [embedding_input(None, t, SENTENCE_RECIPE) for t in fresh_sentences]
                    )
                    known_sentences = {
                        **known_sentences,
                        **{t: list(v) for t, v in zip(fresh_sentences, computed)},
                    }
                sentences = [
                    [{**s, "embedding": known_sentences[s["text"]]} for s in ss] for ss in p.sentences
                ]
                bar.update(len(fresh) + len(fresh_sentences))
                stats.chunks_embedded += len(fresh)
                stats.sentences_embedded += len(fresh_sentences)
            frontmatter.write_atomic(
                sidecar_path(md),
                render_sidecar(p.manifest, p.chunks, vectors, p.cites, sentences, p.author_paragraphs),
            )
            stats.written += 1
            stats.files.append(md)
    finally:
        if own:
            bar.close()
    return stats


def _todo(
    mds: Iterable[Path],
    home: Path,
    max_tokens: int,
    embedder: Embedder | None,
    recipe: str,
    stats: SidecarStats,
) -> tuple[list[tuple[Path, _Plan]], dict[Path, tuple[dict[str, list[float]], dict[str, list[float]]]]]:
    """The sidecars to write (counting the up-to-date ones in stats) and the vectors each can reuse."""
    todo: list[tuple[Path, _Plan]] = []
    for md in mds:
        plan = _plan(md, home, max_tokens, embedder, recipe)
        if plan is None:
            stats.unchanged += 1
        else:
            todo.append((md, plan))
    return todo, {md: _previous_vectors(md, p.manifest) if p.embed else ({}, {}) for md, p in todo}


def texts_to_embed(
    mds: Iterable[Path], home: Path, max_tokens: int, embedder: Embedder, recipe: str = RECIPE
) -> list[str]:
    """The inputs `write_sidecars` would embed now (chunks and summary sentences, without the
    vectors it can reuse), for an estimate before the work starts; nothing is written."""
    todo, reuse = _todo(mds, home, max_tokens, embedder, recipe, SidecarStats())
    out: list[str] = []
    for md, p in todo:
        if p.embed:
            out += [
                embedding_input(p.manifest["heading_path"], c.text, recipe)
                for c in p.chunks
                if c.text not in reuse[md][0]
            ]
            out += sorted(
                {
                    embedding_input(None, s["text"], SENTENCE_RECIPE)
                    for ss in p.sentences
                    for s in ss
                    if s["text"] not in reuse[md][1]
                }
            )
    return out


def _previous_vectors(
    md: Path, manifest: dict[str, Any]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """text -> vector of the chunks, and of the sentences, from the sidecar about to be
    replaced, when it embedded the same way (model, heading path, recipes): a change of shape
    or of anchors does not re-embed."""
    try:  # read leniently: the sidecar may be of an older format, whose vectors are still good
        lines = [json.loads(line) for line in sidecar_path(md).read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError):
        return {}, {}
    m = lines[0] if lines and isinstance(lines[0], dict) else {}
    if (m.get("embedding_model"), m.get("dimension")) != (
        manifest.get("embedding_model"),
        manifest.get("dimension"),
    ):
        return {}, {}
    rows = [c for c in lines[1:] if isinstance(c, dict)]

    def good(obj: Any) -> bool:
        return (
            isinstance(obj, dict)
            and isinstance(obj.get("text"), str)
            and isinstance(obj.get("embedding"), list)
            and len(obj["embedding"]) == manifest.get("dimension")
        )

    chunks: dict[str, list[float]] = {}
    if (m.get("heading_path"), m.get("embedding_recipe")) == (
        manifest.get("heading_path"),
        manifest.get("embedding_recipe"),
    ):
        chunks = {c["text"]: c["embedding"] for c in rows if good(c)}
    sentences: dict[str, list[float]] = {}
    if m.get("sentence_recipe") == manifest.get("sentence_recipe"):
        sentences = {
            s["text"]: s["embedding"]
            for c in rows
            if isinstance(c.get("sentences"), list)
            for s in c["sentences"]
            if good(s)
        }
    return chunks, sentences


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def read_sidecar(path: Path) -> Sidecar:
    """Parse and check a sidecar's own consistency; errors name the file and the line."""
    manifest: dict[str, Any] | None = None
    chunks: list[dict[str, Any]] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise BookragError(f"{path}: sidecar not found") from exc
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        at = data[: exc.start].count(b"\n") + 1
        raise BookragError(
            f"{path}:{at}: not valid UTF-8 (byte 0x{data[exc.start]:02x}); "
            "regenerate it with `bookrag sidecars`"
        ) from None
    for n, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line, parse_constant=_reject_constant)
        except ValueError as exc:
            raise BookragError(f"{path}:{n}: malformed JSON line ({exc})") from exc
        if not isinstance(obj, dict):
            raise BookragError(f"{path}:{n}: a line must be a JSON object")
        if n == 1:
            if obj.get("type") != "manifest":
                raise BookragError(f'{path}:1: the first line must be the manifest ("type": "manifest")')
            manifest = obj
            continue
        if obj.get("type") == "manifest":
            raise BookragError(
                f"{path}:{n}: a second manifest line; the manifest must be the first line only"
            )
        chunks.append(obj)
        _check_chunk(path, n, obj, manifest)
    if manifest is None:
        raise BookragError(f"{path}: empty sidecar (no manifest line)")
    _check_manifest(path, manifest, chunks)
    return Sidecar(path, manifest, chunks)


def _check_manifest(path: Path, m: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
    for key in (*MANIFEST_KEYS[1:], "chunk_count"):
        if key not in m:
            raise BookragError(f"{path}:1: manifest lacks {key!r}")
    if not isinstance(m["chunk_count"], int) or m["chunk_count"] != len(chunks):
        raise BookragError(
            f"{path}:1: chunk_count is {m['chunk_count']} but the file has {len(chunks)} chunk lines"
        )
    if m["node_type"] not in ("source", "summary") or m["level"] not in (0, 1, 2, 3):
        raise BookragError(f"{path}:1: bad node_type/level {m['node_type']!r}/{m['level']!r}")
    if not str(m["source_file_hash"]).startswith("sha256:") or len(m["source_file_hash"]) != 71:
        raise BookragError(f"{path}:1: source_file_hash must be 'sha256:<64 hex>'")
    embedded = m.get("embedding_model") is not None
    if embedded and not isinstance(m.get("dimension"), int):
        raise BookragError(f"{path}:1: an embedded sidecar needs an integer dimension")


def _check_chunk(path: Path, n: int, obj: dict[str, Any], m: dict[str, Any] | None) -> None:
    assert m is not None
    expected = n - 2
    if obj.get("chunk_index") != expected:
        raise BookragError(
            f"{path}:{n}: chunk_index is {obj.get('chunk_index')!r}, expected {expected} (indices run 0..n-1 in order)"
        )
    if not isinstance(obj.get("text"), str) or not obj["text"]:
        raise BookragError(f"{path}:{n}: chunk text missing or empty")
    if "\x00" in obj["text"]:
        raise BookragError(f"{path}:{n}: chunk text contains a NUL character")
    tok = obj.get("content_token_count")
    if not isinstance(tok, int) or tok < 0:
        raise BookragError(f"{path}:{n}: content_token_count must be a non-negative integer")
    para = obj.get("paragraph")
    if not isinstance(para, int) or para < 1:
        raise BookragError(
            f"{path}:{n}: paragraph missing or not a positive integer (a sidecar from before "
            "format 2: run `bookrag sidecars` again)"
        )
    kind = obj.get("kind")
    if kind is not None and kind not in author_summary.KINDS:
        raise BookragError(
            f"{path}:{n}: kind must be {author_summary.KIND!r} (the author's own summary), "
            f"{author_summary.EXTRACTIVE!r} (an extractive summary) or absent (the text), got {kind!r}"
        )
    if kind == author_summary.KIND and m.get("node_type") != "source":
        raise BookragError(
            f"{path}:{n}: kind {kind!r} on a summary chunk; only a source.md holds the author's summaries"
        )
    if kind == author_summary.EXTRACTIVE and m.get("node_type") != "summary":
        raise BookragError(f"{path}:{n}: kind {kind!r} on a source chunk; only a summary.md is extractive")
    cites = obj.get("cites")
    if cites is not None:
        if m.get("node_type") != "summary" and (
            not isinstance(cites, list) or any(not isinstance(c, dict) or "paragraphs" in c for c in cites)
        ):
            raise BookragError(
                f"{path}:{n}: cites on a source chunk must name whole end notes ({{source_file}} "
                "objects without paragraphs)"
            )
        if not isinstance(cites, list) or not all(
            isinstance(c, dict)
            and isinstance(c.get("source_file"), str)
            and all(isinstance(p, int) and p >= 1 for p in c.get("paragraphs", []))
            for c in cites
        ):
            raise BookragError(f"{path}:{n}: cites must be a list of {{source_file, paragraphs?}} objects")
    _check_sentences(path, n, obj, m)
    emb = obj.get("embedding")
    if m.get("embedding_model") is None:
        if emb is not None:
            raise BookragError(f"{path}:{n}: an embedding in a sidecar whose manifest has no embedding_model")
        return
    _check_vector(f"{path}:{n}", emb, m)


def _check_vector(where: str, emb: Any, m: dict[str, Any]) -> None:
    """An embedding of an embedded sidecar: a list of the manifest's dimension of finite numbers."""
    if not isinstance(emb, list):
        raise BookragError(f"{where}: embedding missing (the manifest says the file is embedded)")
    if len(emb) != m.get("dimension"):
        raise BookragError(
            f"{where}: embedding has {len(emb)} values, the manifest's dimension is {m.get('dimension')}"
        )
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in emb):
        raise BookragError(f"{where}: embedding holds a non-finite or non-numeric value")


def _check_sentences(path: Path, n: int, obj: dict[str, Any], m: dict[str, Any]) -> None:
    """A chunk's `sentences`: only on an embedded chapter summary whose manifest names the
    sentence recipe; each a non-empty text, the paragraphs it cites and a vector of the
    manifest's dimension."""
    sentences = obj.get("sentences")
    if sentences is None:
        return
    if (
        m.get("node_type") != "summary"
        or m.get("level") != 1
        or not m.get("sentence_recipe")
        or m.get("embedding_model") is None
    ):
        raise BookragError(
            f"{path}:{n}: sentences on a chunk that is not of an embedded chapter summary "
            "(only level-1 summaries with a sentence_recipe carry them)"
        )
    if not isinstance(sentences, list):
        raise BookragError(f"{path}:{n}: sentences must be a list of {{text, paragraphs, embedding}} objects")
    for i, s in enumerate(sentences, start=1):
        where = f"{path}:{n}: sentence {i}"
        if not isinstance(s, dict) or not isinstance(s.get("text"), str) or not s["text"].strip():
            raise BookragError(f"{where}: text missing or empty")
        paras = s.get("paragraphs")
        if (
            not isinstance(paras, list)
            or not paras
            or not all(isinstance(p, int) and p >= 1 for p in paras)
            or paras != sorted(set(paras))
        ):
            raise BookragError(
                f"{where}: paragraphs must be a non-empty, sorted list of distinct positive integers"
            )
        _check_vector(where, s.get("embedding"), m)
