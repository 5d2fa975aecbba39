"""`bookrag sweep`: what each choice costs. For each chunk threshold (tiktoken tokens, or whole
paragraphs) the book is re-chunked and re-embedded in a scratch copy of its corpus, loaded into
a scratch database, and every strategy is evaluated: flat hybrid, hybrid + parent expansion,
two-stage, the economic variant (vectors on summaries only, paragraphs BM25-only) and, to
measure what the heading path adds, vector and hybrid search over chunks embedded without it.
Embeddings are cached on disk by (model, exact input), so re-runs and shared texts are free."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bookrag import db
from bookrag.argtypes import names_from, positive_int
from bookrag.config import Settings
from evaluation.evalset import load_evalset
from evaluation.harness import STRATEGIES, evaluate
from evaluation.metrics import aggregate
from evaluation.scratch import scratch_database
from loader import frontmatter
from loader.embedding import RECIPE, Embedder, get_embedder
from loader.load import load
from loader.manifest import find_book
from loader.sidecars import write_sidecars

PARAGRAPH = 100_000  # "whole paragraphs": no token threshold (the embedder's window still applies)


@dataclass
class CachedEmbedder:
    """Wraps an embedder with an on-disk cache keyed by sha256(model, input text)."""

    base: Embedder
    path: Path

    def __post_init__(self) -> None:
        self.model, self.dimension = self.base.model, self.base.dimension
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self.hits = self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def fits(self, text: str) -> bool:
        return self.base.fits(text)

    def passages(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            q = f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})"
            found.update(dict(self.db.execute(q, part).fetchall()))
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vecs = self.base.passages([texts[i] for i in missing])
            rows = [(keys[i], vecs[j].astype(np.float32).tobytes()) for j, i in enumerate(missing)]
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self.db.commit()
            found.update(dict(rows))
        return np.stack([np.frombuffer(found[k], dtype=np.float32) for k in keys])

    def query(self, text: str) -> np.ndarray:
        return self.base.query(text)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.base.queries(texts)


def _copy_book(settings: Settings, book: str, home: Path, economic: bool) -> list[Path]:
    src = settings.corpus / book
    dst = home / "corpus" / book
    mds = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".md", ".toml"):
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".md":
            meta, body = frontmatter.read(path)
            if economic and meta["node_type"] == "source":
                meta["embed"] = False
            target.write_text(frontmatter.render(meta, body), encoding="utf-8")
            mds.append(target)
        else:
            shutil.copyfile(path, target)
    return mds


def sweep(
    settings: Settings,
    book: str,
    evalset: Path,
    thresholds: list[int],
    strategies: list[str],
    progress: bool = True,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    find_book(settings.corpus, book)  # an unknown book is refused before any work, naming the known ones
    items = [i for i in load_evalset(evalset) if i.book == book]
    if limit and len(items) > limit:  # a deterministic spread sample: every n-th question
        step = len(items) / limit
        items = [items[int(i * step)] for i in range(limit)]
    embedder = CachedEmbedder(
        get_embedder(settings.embedder, settings.embedding_model),
        settings.state_dir / "cache" / "embeddings.sqlite",
    )
    rows: list[dict[str, Any]] = []
    variants = [("full", [s for s in strategies if s not in ("economic", "no-heading")])]
    if "economic" in strategies:  # vectors only on summaries: flat fusion, and summaries-then-children
        variants.append(("economic", ["hybrid", "two-stage"]))
    if "no-heading" in strategies:  # the same chunks embedded without their heading path
        variants.append(("no-heading", ["vector", "hybrid"]))
    for t in thresholds:
        for variant, strats in variants:
            if not strats:
                continue
            with tempfile.TemporaryDirectory(prefix="bookrag-sweep-") as tmp:
                home = Path(tmp)
                mds = _copy_book(settings, book, home, variant == "economic")
                t0 = time.perf_counter()
                write_sidecars(
                    mds,
                    home,
                    t,
                    embedder,
                    progress=progress,
                    recipe="plain-v1" if variant == "no-heading" else RECIPE,
                )
                with scratch_database(settings, "sweep") as url:
                    conn = db.connect(url)
                    try:
                        load(conn, home, [home / "corpus" / book])
                        (chunks,) = conn.execute(
                            "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level = 0"
                        ).fetchone() or (0,)
                        results = evaluate(conn, items, strats, 10, book, 3000, progress, two_step=False)
                    finally:
                        conn.close()
                for s, res in results.items():
                    agg = aggregate(res, [1, 5, 10])
                    label = {"economic": f"{s} (economic)", "no-heading": f"{s} (no heading)"}.get(variant, s)
                    rows.append(
                        {
                            "threshold": "paragraph" if t == PARAGRAPH else t,
                            "strategy": label,
                            "level0_chunks": chunks,
                            "seconds": round(time.perf_counter() - t0, 1),
                            **agg,
                        }
                    )
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    cols = [
        "threshold",
        "strategy",
        "level0_chunks",
        "recall@1",
        "recall@5",
        "recall@10",
        "node_recall@5",
        "mrr@10",
        "context_precision",
        "tokens_per_question",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                f"{r[c]:.3f}"
                if isinstance(r[c], float) and c != "tokens_per_question"
                else f"{r[c]:.0f}"
                if isinstance(r[c], float)
                else str(r[c])
                for c in cols
            )
            + " |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = list(dict.fromkeys(str(r["threshold"]) for r in rows))
    for s in dict.fromkeys(r["strategy"] for r in rows):
        sub = [r for r in rows if r["strategy"] == s]
        xs = [labels.index(str(r["threshold"])) for r in sub]
        a1.plot(xs, [r["recall@5"] for r in sub], marker="o", label=s)
        a2.plot(xs, [r["context_precision"] for r in sub], marker="o", label=s)
    for ax, name in ((a1, "recall@5 (answer fragment)"), (a2, "context precision")):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("chunk threshold (tokens)")
        ax.set_ylim(0, 1)
        ax.set_title(name)
    a1.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: What --strategies takes: the harness's strategies, and two variants built in their own scratch database.
SWEEP_STRATEGIES = (*STRATEGIES, "economic", "no-heading")


def thresholds(text: str) -> list[int]:
    """--thresholds: comma-separated token counts >= 1, or 'paragraph' (PARAGRAPH)."""
    out = []
    for t in (x.strip() for x in text.split(",") if x.strip()):
        if t == "paragraph":
            out.append(PARAGRAPH)
        elif t.isdigit() and int(t) >= 1:
            out.append(int(t))
        else:
            raise argparse.ArgumentTypeError(f"thresholds are token counts >= 1 or 'paragraph', got {t!r}")
    if not out:
        raise argparse.ArgumentTypeError(f"thresholds are token counts >= 1 or 'paragraph', got {text!r}")
    return out


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--book", required=True, help="book folder under corpus/ (piaf included)")
    p.add_argument("--evalset", required=True)
    p.add_argument(
        "--thresholds",
        type=thresholds,
        default="64,128,256,512,paragraph",
        help="chunk thresholds in tokens, comma-separated ('paragraph': one chunk per paragraph)",
    )
    p.add_argument(
        "--strategies",
        type=names_from(SWEEP_STRATEGIES),
        default="bm25,vector,hybrid,hybrid+parent,two-stage,economic,no-heading",
        help=f"comma-separated, from {', '.join(SWEEP_STRATEGIES)}",
    )
    p.add_argument(
        "--limit", type=positive_int, help="evaluate an evenly spread sample of this many questions"
    )
    p.add_argument("--out", default=".bookrag/eval")
    p.add_argument("--quiet", action="store_true")


def run_sweep_cli(settings: Settings, args: argparse.Namespace) -> None:
    rows = sweep(
        settings, args.book, Path(args.evalset), args.thresholds, args.strategies, not args.quiet, args.limit
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = render(rows)
    name = f"sweep-{args.book}"
    (out / f"{name}.md").write_text(md + "\n", encoding="utf-8")
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    plot(rows, out / f"{name}.png", f"{args.book}: chunk threshold x strategy")
    print(md)
    print(f"wrote {out / name}.md, .json, .png")
