"""The extractive provider's chapter summaries against the team-written ones (decisions 0032,
0040): for every level-1 summary of a book whose summaries the team wrote (its source.md
prepared), the extractive summary of the same inputs is scored on

- word recall: the team summary's words (three letters or more, stop words out) found in it;
- thesis recall: the same for the team summary's first sentence alone (where the team states the
  chapter's thesis: « Tocqueville soutient que… », « Bastiat montre que… »);
- cites shared: of the paragraphs it cites, the share the team summary also cites;
- thesis cited: whether it cites a paragraph the team's first sentence cites.

A chapter is in the tuning half when the first byte of the sha256 of its summary's path is even
(the evalsets' rule, docs/evalsets.md), in the held-out half otherwise. `--grid` chooses weights
on the tuning half (mean word recall plus mean thesis recall) and reports them on the held-out
half beside decision 0032's ranking and the provider's weights. Only figures are printed or
written, never text of a book.

`--synthesis` (needs the books' source sidecars, e.g. after `bookrag demo`): the synthesis
questions of the team's evalsets (evals/<book>.jsonl) asked in mode auto, each book's whole summary
tree written by the extractive provider (decision 0032's ranking, then the provider's weights) in a
copy of its corpus folder, loaded into a scratch database; the team's own summaries beside them.
By question half (held-out: the first byte of sha256(id) odd). Nothing in the checkout changes.

Run:  .venv/bin/python -m evaluation.extractive [--book B]… [--grid] [--synthesis] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bookrag.config import Settings, load_settings
from loader import frontmatter, summarize
from loader.anchors import cited_units, strip_anchors
from loader.anchors import sentences as anchor_sentences
from loader.manifest import book_tree, find_book
from loader.summarize import (
    CENTROID_ONLY,
    EXTRACTIVE_WEIGHTS,
    ExtractiveWeights,
    Item,
    _terms,
    extractive_summary,
    job_inputs,
)

SHIPPED = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")
METRICS = ("word_recall", "thesis_recall", "cites_shared", "thesis_cited")


@dataclass(frozen=True)
class Case:
    """One chapter: its summary's path, the team's summary and the extractive provider's inputs."""

    node: str
    team: str
    inputs: list[Item]

    @property
    def tuning(self) -> bool:
        return hashlib.sha256(self.node.encode()).digest()[0] % 2 == 0


def cases(settings: Settings, book: str) -> list[Case]:
    """Every level-1 summary of the book written by the team, with its inputs."""
    tree = book_tree(find_book(settings.corpus, book))
    out = []
    for node in tree:
        if node.node_type != "summary" or node.level != 1:
            continue
        meta, team = frontmatter.read(settings.home / node.source_file)
        if meta.get("generator") != "team":
            continue
        out.append(Case(node.source_file, team, job_inputs(settings.home, tree, node, "bottom-up")))
    return out


def _words(text: str) -> set[str]:
    return set(_terms(strip_anchors(text)))


def first_sentence(text: str) -> str:
    """The team summary's first sentence, anchors kept."""
    found = anchor_sentences(text.strip())
    return found[0][1] if found else text


def scores(team: str, candidate: str) -> dict[str, float]:
    ref, cand, thesis = _words(team), _words(candidate), first_sentence(team)
    thesis_words = _words(thesis)
    ref_cites, cand_cites, thesis_cites = (
        set(cited_units(team)),
        set(cited_units(candidate)),
        set(cited_units(thesis)),
    )
    return {
        "word_recall": len(ref & cand) / len(ref) if ref else 0.0,
        "thesis_recall": len(thesis_words & cand) / len(thesis_words) if thesis_words else 0.0,
        "cites_shared": len(ref_cites & cand_cites) / len(cand_cites) if cand_cites else 0.0,
        "thesis_cited": float(bool(thesis_cites & cand_cites)),
    }


def evaluate(chapters: list[Case], weights: ExtractiveWeights) -> dict[str, float]:
    """Mean of each metric over the chapters."""
    rows = [scores(c.team, extractive_summary(c.inputs, 1, weights)) for c in chapters]
    return {m: statistics.mean(r[m] for r in rows) if rows else 0.0 for m in METRICS}


def objective(means: dict[str, float]) -> float:
    return means["word_recall"] + means["thesis_recall"]


GRID = {
    "opening": (0.0, 0.05, 0.1, 0.2),
    "closing": (0.0, 0.05, 0.1),
    "lead": (0.0, 0.05, 0.1),
    "aside": (0.0, 0.1),
    "redundancy": (0.0, 0.3, 0.6),
    "rest": (False, True),
}


def grid_search(chapters: list[Case]) -> tuple[ExtractiveWeights, dict[str, float]]:
    """The weights of GRID with the best objective on `chapters` (ties: the first in GRID's order,
    smaller weights first)."""
    best: tuple[float, ExtractiveWeights, dict[str, float]] | None = None
    for values in itertools.product(*GRID.values()):
        chosen: dict[str, Any] = dict(zip(GRID, values))
        w = replace(CENTROID_ONLY, **chosen)
        means = evaluate(chapters, w)
        if best is None or objective(means) > best[0] + 1e-12:
            best = (objective(means), w, means)
    assert best is not None
    return best[1], best[2]


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    out = [
        "| ranking | " + " | ".join(m.replace("_", " ") for m in METRICS) + " |",
        "|---" * (len(METRICS) + 1) + "|",
    ]
    out += [f"| {name} | " + " | ".join(f"{means[m]:.3f}" for m in METRICS) + " |" for name, means in rows]
    return "\n".join(out)


@contextmanager
def provider_weights(weights: ExtractiveWeights) -> Iterator[None]:
    """The extractive provider writes with `weights` for the duration (summarize_book takes its
    weights from loader.summarize.EXTRACTIVE_WEIGHTS)."""
    saved = summarize.EXTRACTIVE_WEIGHTS
    summarize.EXTRACTIVE_WEIGHTS = weights
    try:
        yield
    finally:
        summarize.EXTRACTIVE_WEIGHTS = saved


def copy_book(settings: Settings, home: Path, book: str, summaries: bool) -> None:
    """The book's manifest, .md files and source sidecars into home; its summaries' sidecars too
    when `summaries` (the team's tree as committed)."""
    src = settings.corpus / book
    for f in sorted(src.rglob("*")):
        keep = f.name in ("book.toml", "source.md", "summary.md", "source.md.jsonl")
        if f.is_file() and (keep or (summaries and f.name == "summary.md.jsonl")):
            dst = home / "corpus" / book / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst)


def held_out(question_id: str) -> bool:
    return hashlib.sha256(question_id.encode()).digest()[0] % 2 == 1


def synthesis(
    settings: Settings, books: list[str], rankings: list[tuple[str, ExtractiveWeights | None]]
) -> dict[str, Any]:
    """Mode auto on the synthesis questions of each book's evalset, for each ranking's extractive
    tree (None: the team's summaries); figures by question half (evaluation.harness.table)."""
    from bookrag import db
    from evaluation.evalset import load_evalset
    from evaluation.harness import evaluate as ask
    from evaluation.harness import table as harness_table
    from evaluation.scratch import scratch_database
    from loader.embedding import get_embedder
    from loader.load import load
    from loader.sidecars import write_sidecars

    items = [
        i
        for b in books
        for i in load_evalset(settings.home / "evals" / f"{b}.jsonl")
        if i.kind == "synthesis"
    ]
    embedder = get_embedder(settings.embedder, settings.embedding_model)
    out: dict[str, Any] = {"questions": {"held_out": sum(held_out(i.id) for i in items), "all": len(items)}}
    for label, weights in rankings:
        with (
            tempfile.TemporaryDirectory(prefix="extractive-synthesis-") as tmp,
            scratch_database(settings, "extractive") as url,
        ):
            home = Path(tmp)
            s = replace(settings, home=home, database_url=url)
            for b in books:
                copy_book(settings, home, b, summaries=weights is None)
                if weights is not None:
                    with provider_weights(weights):
                        summarize.summarize_book(
                            s, find_book(s.corpus, b), provider="extractive", force=True, progress=False
                        )
            mds = sorted(p for p in (home / "corpus").rglob("*.md"))
            write_sidecars(mds, home, settings.max_chunk_tokens, embedder, progress=False)
            conn = db.connect(url)
            try:
                load(conn, home, [home / "corpus" / b for b in books])
                results = {
                    f"{label} · {half}": ask(
                        conn,
                        [i for i in items if half == "all" or held_out(i.id)],
                        ["auto"],
                        10,
                        progress=False,
                        two_step=False,
                    )["auto"]
                    for half in ("held-out", "all")
                }
            finally:
                conn.close()
        md, data = harness_table(results, [1, 5, 10])
        print(md + "\n", flush=True)
        out[label] = data
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--book",
        action="append",
        help=f"a book whose summaries the team wrote (default: {', '.join(SHIPPED)})",
    )
    ap.add_argument("--grid", action="store_true", help="choose weights on the tuning half (GRID)")
    ap.add_argument(
        "--synthesis", action="store_true", help="synthesis questions, mode auto, per summary tree"
    )
    ap.add_argument(
        "--trees",
        default="team,centroid,provider",
        help="--synthesis: the summary trees, from team, centroid (decision 0032), provider, grid (with --grid)",
    )
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    settings = load_settings()
    chapters = [c for b in args.book or SHIPPED for c in cases(settings, b)]
    tuning = [c for c in chapters if c.tuning]
    held = [c for c in chapters if not c.tuning]
    rankings = [
        ("decision 0032 (centroid only)", CENTROID_ONLY),
        ("provider (EXTRACTIVE_WEIGHTS)", EXTRACTIVE_WEIGHTS),
    ]
    out: dict = {"books": args.book or list(SHIPPED), "tuning": len(tuning), "held_out": len(held)}
    if args.grid:
        best, means = grid_search(tuning)
        print(
            f"grid: {len(list(itertools.product(*GRID.values())))} weightings on {len(tuning)} tuning chapters; best {best}"
        )
        rankings.append(("grid's best on the tuning half", best))
        out["grid_best"] = asdict(best)
    for name, half in (("tuning half", tuning), ("held-out half", held)):
        results = [(label, evaluate(half, w)) for label, w in rankings]
        print(f"\n{name}: {len(half)} chapters\n")
        print(table(results))
        out[name] = {label: means for label, means in results}
    out["weights"] = {label: asdict(w) for label, w in rankings}
    if args.synthesis:
        print("\nsynthesis questions, mode auto, by summary tree\n")
        tuned = out.get("grid_best")
        trees: dict[str, ExtractiveWeights | None] = {
            "team": None,
            "centroid": CENTROID_ONLY,
            "provider": EXTRACTIVE_WEIGHTS,
            **({"grid": replace(CENTROID_ONLY, **tuned)} if tuned else {}),
        }
        wanted = args.trees.split(",")
        unknown = [t for t in wanted if t not in trees]
        if unknown:
            ap.error(f"--trees: unknown {', '.join(unknown)} (team, centroid, provider; grid with --grid)")
        out["synthesis"] = synthesis(settings, args.book or list(SHIPPED), [(t, trees[t]) for t in wanted])
    if args.json:
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
