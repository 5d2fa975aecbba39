"""The extractive provider's chapter summaries against the team-written ones (decisions 0032,
0040, 0041): for every level-1 summary of a book whose summaries the team wrote (its source.md
prepared), the extractive summary of the same inputs is scored on

- word recall: the team summary's words (three letters or more, stop words out) found in it;
- thesis recall: the same for the team summary's first sentence alone (where the team states the
  chapter's thesis: « Tocqueville soutient que… », « Bastiat montre que… »);
- cites shared: of the paragraphs it cites, the share the team summary also cites;
- thesis cited: whether it cites a paragraph the team's first sentence cites;

and, for the synthesis questions of the team's evalsets (evals/<book>.jsonl), answers held: whether
the extractive summary of the chapter a question asks about holds one of its answer sentences.

A chapter is in the tuning half when the first byte of the sha256 of its summary's path is even
(the evalsets' rule, docs/evalsets.md), a question when that of its id is; the held-out halves
only report. `--grid` chooses, among the weightings that keep THESIS_SECTION's thesis ahead of its
digression, the best mean word recall + thesis recall + answers held on the tuning halves, and
reports it beside decision 0032's ranking and the provider's weights, by half (answers held also
by book). Only figures are printed or written, never text of a book.

`--synthesis` (needs the books' source sidecars, e.g. after `bookrag demo`): the synthesis
questions asked in mode auto and against the summaries alone (hybrid, level 1), each book's whole
summary tree written by the extractive provider (decision 0032's ranking, then the provider's
weights) in a copy of its corpus folder, loaded into a scratch database; the team's own summaries
beside them. By book and by question half. Nothing in the checkout changes.

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
from loader.chunking import paragraphs, split_sentences
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
    """One chapter: its summary's path, the team's summary, the extractive provider's inputs and
    the chapter's title."""

    node: str
    team: str
    inputs: list[Item]
    title: str = ""

    def summary(self, weights: ExtractiveWeights) -> str:
        """The extractive provider's summary of the chapter with `weights`."""
        return extractive_summary(self.inputs, 1, weights, title=self.title)

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
        out.append(
            Case(
                node.source_file,
                team,
                job_inputs(settings.home, tree, node, "bottom-up"),
                summarize.own_title(node),
            )
        )
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
    rows = [scores(c.team, c.summary(weights)) for c in chapters]
    return {m: statistics.mean(r[m] for r in rows) if rows else 0.0 for m in METRICS}


def objective(means: dict[str, float]) -> float:
    return means["word_recall"] + means["thesis_recall"] + means.get("answers_held", 0.0)


GRID = {
    "opening": (0.0, 0.05, 0.1, 0.2),
    "closing": (0.0, 0.05, 0.1),
    "lead": (0.0, 0.05, 0.1),
    "aside": (0.0, 0.1),
    "redundancy": (0.0, 0.3, 0.6),
    "rest": (False, True),
    "title": (0.0, 0.25, 0.5, 1.0, 2.0),
}


@dataclass(frozen=True)
class Question:
    """A synthesis question of a team evalset whose expected summary is one of `cases`: the
    chapter it asks about and the author's sentences that answer it."""

    id: str
    case: Case
    answers: tuple[str, ...]

    @property
    def tuning(self) -> bool:
        return not held_out(self.id)

    @property
    def book(self) -> str:
        return self.case.node.split("/")[1]


def questions(settings: Settings, books: list[str], chapters: list[Case]) -> list[Question]:
    """The synthesis questions of the books' evalsets (evals/<book>.jsonl; a book without one has
    none), each with the chapter its expected summary.md names (questions on another node are
    left out)."""
    from evaluation.evalset import load_evalset

    by_node = {c.node: c for c in chapters}
    sets = [settings.home / "evals" / f"{b}.jsonl" for b in books]
    return [
        Question(i.id, by_node[f], i.answers)
        for path in sets
        if path.exists()
        for i in load_evalset(path)
        if i.kind == "synthesis"
        for f in i.expected_files
        if f in by_node
    ]


def answers_held(asked: list[Question], weights: ExtractiveWeights) -> float:
    """The share of questions whose chapter's extractive summary holds one of the author's
    sentences that answer it (the thesis the question asks for, as the evalset's writer found it)."""
    from evaluation.metrics import contains_answer

    if not asked:
        return 0.0
    return statistics.mean(float(contains_answer(q.case.summary(weights), q.answers)) for q in asked)


#: Issue 46's failure as a section of five paragraphs: the thesis opens it (and the rest of the
#: section elaborates it), a middle digression repeats its own words. Centrality alone (decision
#: 32) summarises it by the digression; a weighting the provider may take must put the thesis first,
#: keep at most one sentence of the digression and no question, in THESIS_BUDGET words.
DIGRESSION = (
    "Les comètes traversent le ciel nocturne et les astronomes comptent les comètes. "
    "Les astronomes suivent les comètes dans le ciel nocturne chaque nuit. "
    "Les comètes du ciel nocturne occupent les astronomes chaque nuit claire. "
    "Que disent les astronomes des comètes du ciel nocturne ?"
)
THESIS_SECTION = (
    "La liberté du commerce enrichit toutes les nations qui la pratiquent sans crainte. "
    "Elle abaisse le prix du pain pour chaque ouvrier.",
    "Le commerce libre enrichit les ouvriers, car le pain coûte moins cher aux nations.",
    DIGRESSION,
    "Le pain des ouvriers coûte moins quand la liberté du commerce règne entre les nations.",
    "Ainsi la liberté du commerce enrichit les nations et nourrit mieux les ouvriers.",
)
THESIS_BUDGET = 40  # room for three sentences of the five paragraphs
THESIS_TITLE = "Introduction"  # the failure's heading, which names no subject


def thesis_section_summary(weights: ExtractiveWeights) -> list[str]:
    """The sentences the extractive summary of THESIS_SECTION keeps with `weights`, anchors out."""
    inputs = [Item("", p, k) for k, p in enumerate(THESIS_SECTION, start=1)]
    text = extractive_summary(inputs, 1, weights, budget=THESIS_BUDGET, title=THESIS_TITLE)
    return [strip_anchors(s) for p in paragraphs(text) for s in split_sentences(p)]


def keeps_the_thesis(weights: ExtractiveWeights) -> bool:
    kept = thesis_section_summary(weights)
    return (
        bool(kept)
        and kept[0] == split_sentences(THESIS_SECTION[0])[0]
        and sum("comètes" in s for s in kept) <= 1
        and not any(s.endswith("?") for s in kept)
    )


def grid_search(chapters: list[Case], asked: list[Question]) -> tuple[ExtractiveWeights, dict[str, float]]:
    """Of the weights of GRID that keep the thesis (keeps_the_thesis), those with the best
    objective on `chapters` and `asked` (the tuning halves): word recall + thesis recall against
    the team's summaries + the share of synthesis questions whose answer the summary holds (ties:
    the first in GRID's order, smaller weights first)."""
    best: tuple[float, ExtractiveWeights, dict[str, float]] | None = None
    for values in itertools.product(*GRID.values()):
        chosen: dict[str, Any] = dict(zip(GRID, values))
        w = replace(CENTROID_ONLY, **chosen)
        if not keeps_the_thesis(w):
            continue
        means = {**evaluate(chapters, w), "answers_held": answers_held(asked, w)}
        if best is None or objective(means) > best[0] + 1e-12:
            best = (objective(means), w, means)
    if best is None:
        raise ValueError("no weighting of GRID keeps the thesis of THESIS_SECTION ahead of its digression")
    return best[1], best[2]


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    out = [
        "| ranking | " + " | ".join(m.replace("_", " ") for m in METRICS) + " |",
        "|---" * (len(METRICS) + 1) + "|",
    ]
    out += [f"| {name} | " + " | ".join(f"{means[m]:.3f}" for m in METRICS) + " |" for name, means in rows]
    return "\n".join(out)


def answers_table(
    asked: list[Question], books: list[str], rankings: list[tuple[str, ExtractiveWeights]]
) -> dict[str, dict[str, float]]:
    """answers_held by ranking, for each book's and both books' question halves; printed as a table."""
    cols = {
        f"{b if b != 'both' else 'both books'} · {half}": [
            q for q in asked if b in ("both", q.book) and q.tuning == (half == "tuning")
        ]
        for b in (*books, "both")
        for half in ("tuning", "held-out")
    }
    lines = [
        "| ranking | " + " | ".join(f"{name} ({len(qs)})" for name, qs in cols.items()) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    out = {label: {name: answers_held(qs, w) for name, qs in cols.items()} for label, w in rankings}
    for label, held in out.items():
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in held.values()) + " |")
    print("\n".join(lines))
    return out


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
    """The synthesis questions of each book's evalset, for each ranking's extractive tree (None:
    the team's summaries), asked two ways: `auto` (the default search: paragraphs, the summaries
    choosing the sections) and `summaries` (mode hybrid, level 1 only: the chapter summary an
    agent reads first; its answer recall counts a summary that holds the author's answer sentence,
    i.e. one that picked the thesis). Figures by book (and both together) and by question half
    (evaluation.harness.table). The books are searched together, as a reader's shelf."""
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
    out: dict[str, Any] = {
        "questions": {
            b: {
                "held_out": sum(held_out(i.id) for i in items if i.book == b),
                "all": sum(i.book == b for i in items),
            }
            for b in books
        }
    }
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
                asked = {
                    "auto": ask(conn, items, ["auto"], 10, progress=False, two_step=False)["auto"],
                    "summaries": ask(conn, items, ["hybrid"], 10, levels=[1], progress=False, two_step=False)[
                        "hybrid"
                    ],
                }
                results = {
                    f"{label} · {how} · {shelf} · {half}": [
                        r
                        for i, r in zip(items, asked[how])
                        if shelf in ("both", i.book)
                        and half in ("all", "held-out" if held_out(i.id) else "tuning")
                    ]
                    for how in asked
                    for shelf in (*books, "both")
                    for half in ("tuning", "held-out", "all")
                }
            finally:
                conn.close()
        md, data = harness_table(results, [1, 5, 10])
        print(md + "\n", flush=True)
        out[label] = {
            **data,
            "answer_rank": {
                how: {i.id: r.answer_rank for i, r in zip(items, res)} for how, res in asked.items()
            },
        }
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
    books = args.book or list(SHIPPED)
    chapters = [c for b in books for c in cases(settings, b)]
    tuning = [c for c in chapters if c.tuning]
    held = [c for c in chapters if not c.tuning]
    rankings = [
        ("decision 0032 (centroid only)", CENTROID_ONLY),
        ("provider (EXTRACTIVE_WEIGHTS)", EXTRACTIVE_WEIGHTS),
    ]
    out: dict = {"books": books, "tuning": len(tuning), "held_out": len(held)}
    asked = questions(settings, books, chapters)
    if args.grid:
        best, means = grid_search(tuning, [q for q in asked if q.tuning])
        print(
            f"grid: {len(list(itertools.product(*GRID.values())))} weightings on {len(tuning)} tuning chapters "
            f"and {sum(q.tuning for q in asked)} tuning questions; best {best}"
        )
        rankings.append(("grid's best on the tuning half", best))
        out["grid_best"] = asdict(best)
    for name, half in (("tuning half", tuning), ("held-out half", held)):
        results = [(label, evaluate(half, w)) for label, w in rankings]
        print(f"\n{name}: {len(half)} chapters\n")
        print(table(results))
        out[name] = {label: means for label, means in results}
    out["weights"] = {label: asdict(w) for label, w in rankings}
    print("\nsynthesis questions whose chapter's extractive summary holds an answer sentence\n")
    out["answers_held"] = answers_table(asked, books, rankings)
    if args.synthesis:
        print("\nsynthesis questions, mode auto and the summaries alone, by summary tree\n")
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
        out["synthesis"] = synthesis(settings, books, [(t, trees[t]) for t in wanted])
    if args.json:
        Path(args.json).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
