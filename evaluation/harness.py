"""`bookrag eval`: run an evalset through the real search path and report recall@k (answer
fragment found, and expected node found), MRR@10, nDCG@10, context precision and tokens
returned, by mode and by question kind; the agent-path measures (chapter recall@k, two-step
recall@k: search, take the top chapter, search `within` it) and the paragraph measures
(level-0 hits only: paragraph recall@k, paragraph MRR@10). Writes a Markdown table, a JSON
file and a PNG plot."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psycopg

from bookrag import db
from bookrag.argtypes import DeprecatedAlias, level_list, names_from, positive_int, positive_int_list
from bookrag.config import Settings
from bookrag.errors import BookragError
from bookrag.search import (
    MODES,
    SearchRequest,
    build_context,
    corpus_model,
    embed_query,
    query_vectors,
    search,
)
from evaluation.evalset import KINDS, EvalItem, load_evalset
from evaluation.metrics import QuestionResult, aggregate, normalise, score_question

#: Strategies: a search mode, optionally with parent expansion, or a built context (the default
#: mode, each hit with its parent, as `bookrag ask` builds it); hybrid-rrf
#: is hybrid with the former default fusion (RRF, equal weights, no chapter term, no sentence
#: branch), for comparison.
STRATEGIES = ("bm25", "vector", "auto", "hybrid", "hybrid-rrf", "two-stage", "hybrid+parent", "context")
RRF_SETTINGS = {
    "fusion": "rrf",
    "bm25_weight": 1.0,
    "vector_weight": 1.0,
    "chapter_weight": 0.0,
    "sentence_every": 0,
}


def request_for(
    strategy: str,
    question: str,
    k: int,
    book: str | None,
    levels: list[int] | None,
    base: SearchRequest | None = None,
) -> SearchRequest:
    """The SearchRequest a strategy sends (fusion settings from `base`, default: the SQL's)."""
    req = replace(base or SearchRequest(""), query=question, k=k, book=book, levels=levels)
    if strategy == "hybrid-rrf":
        return replace(req, mode="hybrid", tuning=RRF_SETTINGS)
    if strategy == "context":
        return replace(req, mode=MODES[0], expand_parent=True)
    return replace(req, mode=strategy.removesuffix("+parent"), expand_parent=strategy.endswith("+parent"))


#: Which wordings of a question are searched together (`bookrag eval --phrasings`): the first is
#: sent as the query, the others as its phrasings (rag.search_phrasings). "question" is the
#: evalset's own question; the others come from its phrasings file (evals/phrasings/, written by
#: a helper that saw only the questions: evals/phrasings/INSTRUCTIONS.md).
PHRASING_SETS: dict[str, tuple[str, ...]] = {
    "question": ("question",),
    "keywords": ("keywords",),
    "passage": ("passage",),
    "rephrase": ("rephrase",),
    "question+keywords": ("question", "keywords"),
    "question+passage": ("question", "passage"),
    "question+keywords+passage": ("question", "keywords", "passage"),
    "all": ("question", "keywords", "passage", "rephrase"),
}
WORDINGS = ("question", "keywords", "passage", "rephrase")


def load_phrasings(path: Path, items: list[EvalItem]) -> dict[str, dict[str, str]]:
    """id -> {wording: text} for every item (its question included), from a phrasings file:
    one JSON object per line with `id` and any of keywords, passage, rephrase."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise BookragError(
            f"{path}: phrasings file not found (one JSON line per question: id, keywords, passage, rephrase)"
        ) from None
    found: dict[str, dict[str, str]] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            found[row["id"]] = {w: row[w] for w in WORDINGS[1:] if row.get(w)}
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BookragError(f"{path}:{n}: not a phrasings line ({exc})") from None
    missing = [i.id for i in items if i.id not in found]
    if missing:
        raise BookragError(
            f"{path}: no phrasings for {len(missing)} question(s), e.g. {', '.join(missing[:3])}"
        )
    return {i.id: {"question": i.question, **found[i.id]} for i in items}


def top_chapter(hits: list[dict[str, Any]]) -> str | None:
    """The chapter an agent would open: the node of the best hit at level 1, or the parent of the
    best paragraph, whichever comes first (parts and book summaries are passed over)."""
    for h in hits:
        if h["level"] == 1:
            return h["source_file"]
        if h["level"] == 0 and h["parent_source_file"]:
            return h["parent_source_file"]
    return None


def run_strategy(
    conn: psycopg.Connection,
    item: EvalItem,
    strategy: str,
    k: int,
    book: str | None,
    embedding: Any,
    budget: int,
    levels: list[int] | None = None,
    base: SearchRequest | None = None,
    two_step: bool = True,
    wordings: list[tuple[str, Any]] | None = None,
) -> QuestionResult:
    """One question by one strategy; with `wordings` ([(text, vector)], the first as the query),
    the strategy's mode searches them all at once (rag.search_phrasings)."""
    req = request_for(strategy, item.question, k, book, levels, base)
    phrasing_embeddings = None
    if wordings:
        if strategy == "context":
            raise BookragError("the 'context' mode does not take phrasings")
        embedding = wordings[0][1]
        phrasing_embeddings = [v for _, v in wordings[1:]] if embedding is not None else None
        req = replace(req, query=wordings[0][0], phrasings=tuple(t for t, _ in wordings[1:]))
    if strategy == "context":
        rows = build_context(conn, replace(req, budget=budget), embedding)
        hits = sorted((r for r in rows if r["role"] == "hit"), key=lambda r: r["hit_rank"])
        return score_question(item, strategy, hits, rows)
    hits = search(conn, req, embedding, phrasing_embeddings=phrasing_embeddings)
    context = None
    if req.expand_parent:
        context = list(hits) + [p for h in hits for p in (h.get("parent") or [])]
    result = score_question(item, strategy, hits, context)
    chapter = top_chapter(hits) if two_step and not req.expand_parent else None
    if chapter:
        inner = search(conn, replace(req, within=chapter), embedding, phrasing_embeddings=phrasing_embeddings)
        result.two_step_rank = score_question(item, strategy, inner).answer_rank
    return result


def evaluate(
    conn: psycopg.Connection,
    items: list[EvalItem],
    strategies: list[str],
    k: int = 10,
    book: str | None = None,
    budget: int = 3000,
    progress: bool = True,
    levels: list[int] | None = None,
    base: SearchRequest | None = None,
    two_step: bool = True,
    phrasings: dict[str, dict[str, str]] | None = None,
    sets: list[str] | None = None,
) -> dict[str, list[QuestionResult]]:
    """Results by strategy, or with `phrasings` (load_phrasings) by "strategy · set" for each of
    `sets` (PHRASING_SETS names)."""
    from tqdm import tqdm

    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise BookragError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
    sets = sets or []
    names = [f"{s} · {w}" for s in strategies for w in sets] if phrasings else list(strategies)
    results: dict[str, list[QuestionResult]] = {n: [] for n in names}
    vectors = any(s != "bm25" for s in strategies)
    model = corpus_model(conn) if vectors else None
    for item in tqdm(items, unit="question", disable=not progress):
        if not phrasings:
            emb = embed_query(conn, item.question) if vectors else None
            for s in strategies:
                results[s].append(
                    run_strategy(conn, item, s, k, book or item.book, emb, budget, levels, base, two_step)
                )
            continue
        texts = phrasings[item.id]
        needed = [w for w in WORDINGS if any(w in PHRASING_SETS[name] for name in sets)]
        absent = [w for w in needed if w not in texts]
        if absent:
            raise BookragError(f"{item.id}: no {', '.join(absent)} in the phrasings file")
        embedded = dict(zip(needed, query_vectors(model[0], [texts[w] for w in needed]))) if model else {}
        for s in strategies:
            for name in sets:
                wordings = [(texts[w], embedded.get(w)) for w in PHRASING_SETS[name]]
                results[f"{s} · {name}"].append(
                    run_strategy(
                        conn, item, s, k, book or item.book, None, budget, levels, base, two_step, wordings
                    )
                )
    return results


def unreachable(conn: psycopg.Connection, items: list[EvalItem], book: str | None = None) -> list[str]:
    """The ids of the items none of whose answer fragments lies inside one paragraph chunk of the
    book searched (`book`, else each item's own) as loaded: a fragment across a chunk cut (a long
    paragraph is cut into several chunks) or absent from the loaded text is in no paragraph hit,
    whatever the search does (a summary quoting it, or a hit on the expected file, may still count)."""
    chunks: dict[str, list[str]] = {}
    out = []
    for item in items:
        b = book or item.book
        if b not in chunks:
            rows = conn.execute(
                "SELECT content FROM rag.hierarchical_content_nodes WHERE book = %s AND level = 0", (b,)
            ).fetchall()
            chunks[b] = [normalise(r[0]) for r in rows]
        answers = [normalise(a) for a in item.answers]
        if not any(a in c for a in answers for c in chunks[b]):
            out.append(item.id)
    return out


def table(results: dict[str, list[QuestionResult]], ks: list[int]) -> tuple[str, dict[str, Any]]:
    """Markdown table by mode (all kinds, then each kind) and the same numbers as a dict."""
    cols = (
        [f"recall@{k}" for k in ks]
        + ["node_recall@5", "mrr@10", "answer_mrr@10", "ndcg@10"]
        + [f"paragraph_recall@{k}" for k in ks]
        + [
            "paragraph_mrr@10",
            "chapter_recall@5",
            "two_step_recall@1",
            "two_step_recall@5",
            "two_step_mrr@10",
            "context_precision",
            "tokens_per_question",
        ]
    )
    head = "| mode | kind | n | " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 3)]
    data: dict[str, Any] = {}
    for mode, res in results.items():
        data[mode] = {}
        for kind in ("all", *KINDS):
            sub = res if kind == "all" else [r for r in res if r.kind == kind]
            if not sub:
                continue
            agg = aggregate(sub, sorted(set(ks) | {1, 5}))
            data[mode][kind] = agg
            cells = [f"{agg[c]:.3f}" if c != "tokens_per_question" else f"{agg[c]:.0f}" for c in cols]
            lines.append(f"| {mode} | {kind} | {len(sub)} | " + " | ".join(cells) + " |")
    return "\n".join(lines), data


def plot(data: dict[str, Any], ks: list[int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    modes = list(data)
    width = 0.8 / max(1, len(ks))
    for j, k in enumerate(ks):
        vals = [data[m]["all"][f"recall@{k}"] for m in modes]
        ax.bar([i + j * width for i in range(len(modes))], vals, width, label=f"recall@{k}")
    ax.set_xticks([i + width * (len(ks) - 1) / 2 for i in range(len(modes))], modes, rotation=15)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of questions")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(
    name: str, out: Path, md: str, data: dict[str, Any], ks: list[int], meta: dict[str, Any]
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.md", out / f"{name}.json", out / f"{name}.png"]
    paths[0].write_text(md + "\n", encoding="utf-8")
    paths[1].write_text(
        json.dumps({"meta": meta, "results": data}, ensure_ascii=False, indent=2), encoding="utf-8"
    )
    plot(data, ks, paths[2], name)
    return paths


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--evalset", required=True, help="JSONL evalset (docs/evalsets.md)")
    # --modes, plural: a list of what to measure (search's --mode is the one mode to search with)
    p.add_argument(
        "--modes",
        dest="mode",
        type=names_from(STRATEGIES),
        default="bm25,vector,auto,hybrid,hybrid-rrf,hybrid+parent",
        help=f"comma-separated, from {', '.join(STRATEGIES)}",
    )
    p.add_argument(
        "--mode", dest="mode", type=names_from(STRATEGIES), action=DeprecatedAlias, replacement="--modes"
    )
    p.add_argument(
        "--levels",
        type=level_list,
        help="search only these levels, e.g. 0 for paragraphs only (PIAF beside its peers)",
    )
    p.add_argument(
        "--limit", type=positive_int, help="evaluate only the first N questions of a deterministic spread"
    )
    p.add_argument(
        "--no-two-step", action="store_true", help="skip the second, `within` search of two-step recall"
    )
    p.add_argument("--k", type=positive_int_list, default="1,5,10", help="cut-offs for recall, e.g. 1,5,10")
    p.add_argument("--budget", type=int, default=3000, help="token budget of the 'context' mode")
    p.add_argument("--book", help="restrict the search to one book (default: each question's book)")
    p.add_argument(
        "--scratch",
        action="store_true",
        help="load the evalset's book into a scratch database first (default when it is not loaded)",
    )
    p.add_argument("--out", default=".bookrag/eval", help="folder for the .md/.json/.png outputs")
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--phrasings",
        type=names_from(tuple(PHRASING_SETS)),
        metavar="SETS",
        help="also search each question as these wordings at once (rag.search_phrasings), each set "
        f"against the others: comma-separated, from {', '.join(PHRASING_SETS)}",
    )
    p.add_argument("--phrasings-file", help="the phrasings (default: evals/phrasings/<evalset's file name>)")


def run_eval_cli(settings: Settings, args: argparse.Namespace) -> None:
    from evaluation.scratch import scratch_database
    from loader.load import load

    items = load_evalset(Path(args.evalset))
    if args.limit and args.limit < len(items):
        step = len(items) / args.limit
        items = [items[int(i * step)] for i in range(args.limit)]
    levels = args.levels
    ks = sorted(set(args.k))
    phrasings = None
    if args.phrasings:
        path = (
            Path(args.phrasings_file)
            if args.phrasings_file
            else Path(args.evalset).parent / "phrasings" / Path(args.evalset).name
        )
        phrasings = load_phrasings(path, items)
    strategies = args.mode
    books = sorted({i.book for i in items})
    url = db.database_url(settings)
    from bookrag.migrate import apply_migrations

    apply_migrations(url)
    conn = db.connect(url)
    loaded = {r[0] for r in conn.execute("SELECT book FROM rag.books").fetchall()}
    conn.close()

    def measure(conn: psycopg.Connection) -> tuple[list[str], dict[str, list[QuestionResult]]]:
        lost = unreachable(conn, items, args.book) if levels is None or 0 in levels else []
        return lost, evaluate(
            conn,
            items,
            strategies,
            max(ks + [10]),
            args.book,
            args.budget,
            not args.quiet,
            levels,
            two_step=not args.no_two_step,
            phrasings=phrasings,
            sets=args.phrasings,
        )

    start = time.perf_counter()
    if args.scratch or not set(books) <= loaded:
        with scratch_database(settings) as scratch:
            conn = db.connect(scratch)
            try:
                report = load(conn, settings.home, [settings.corpus / b for b in books])
                print(f"scratch database: {report.line()}")
                lost, results = measure(conn)
            finally:
                conn.close()
    else:
        conn = db.connect(url)
        try:
            lost, results = measure(conn)
        finally:
            conn.close()
    md, data = table(results, ks)
    name = Path(args.evalset).stem
    if lost:
        shown = ", ".join(lost[:20]) + (
            f" and {len(lost) - 20} more (all in the JSON)" if len(lost) > 20 else ""
        )
        print(
            f"warning: {len(lost)} question(s) have no answer fragment inside one paragraph chunk of the book "
            f"searched, so no paragraph hit can contain their answer: {shown}"
        )
    meta = {
        "evalset": args.evalset,
        "questions": len(items),
        "modes": strategies,
        "levels": levels,
        "unreachable": lost,
        "seconds": round(time.perf_counter() - start, 1),
        "per_question": {m: [asdict(r) for r in res] for m, res in results.items()},
    }
    paths = write_outputs(f"eval-{name}", Path(args.out), md, data, ks, meta)
    print(md)
    print("wrote " + ", ".join(str(p) for p in paths))
