"""bench_verify: how well and how fast rag.check_quotes checks quotes against the loaded books (issue 45).

From the books in the `bookrag` database it builds, with a fixed seed:
  true        random 8-40-word spans of random paragraphs, cited at their own paragraph;
  and altered quotes, about as many of each kind:
  changed     one word of the span replaced by a word from elsewhere in the books;
  dropped     one word left out (inside the span: dropping its first or last word leaves a true quote);
  swapped     two neighbouring words in the other order;
  off-by-one  the true span cited one paragraph off (the same file);
  chapter     the true span cited at a paragraph of another chapter of its book;
  other-book  the true span cited at a paragraph of the other book;
  summary     a sentence of the team's chapter summaries (corpus/*/**/summary.md, committed:
              paraphrases of the book by construction), cited at the first paragraph its anchor names.
Each quote is checked alone (one rag.check_quotes call, timed from Python: execute + fetch over the
unix socket), and the verdicts are counted per kind. Targets (issue 45): no altered quote and no
summary sentence `exact`; true quotes `exact` >= 99.5 %; wrong place -> `elsewhere` at the right
paragraph >= 99 %; one-word alterations -> `close` >= 95 %; p50 <= 5 ms when the cited paragraph
holds the words, <= 30 ms when they must be found elsewhere; a 20-quote answer through MCP
(`bookrag mcp`, stdio, the SDK's client) p50 <= 100 ms.

--rows N also times true quotes (cited at their paragraph, and one paragraph off) on a synthetic
corpus of N rows built in a scratch database (bench_search.synthetic_rows: its summary tree of
random words drawn from the books' vocabulary; text only, no vectors). --quick: 70 true quotes and 10 of each altered kind, no MCP call, no
synthetic corpus (the test suite runs it on the fixture corpus).

    nice .venv/bin/python bench/bench_verify.py --json /tmp/verify.json
    nice .venv/bin/python bench/bench_verify.py --rows 100000 --no-mcp
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import load_note, machine, markdown_table, percentiles, write_json
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bookrag import db  # noqa: E402
from bookrag.cite import book_meta, scholarly  # noqa: E402
from bookrag.config import load_settings  # noqa: E402

KINDS = ("true", "changed", "dropped", "swapped", "off-by-one", "chapter", "other-book", "summary")
VERDICTS = ("exact", "elsewhere", "close", "summary", "not found")
WORD = re.compile(r"^[^\W\d_]{3,}[,.;:!?»)]*$")  # a token that is one word (and its punctuation)
ELLIPSIS = re.compile(r"…|\.\.\.")
ANCHOR = re.compile(r"\[§(\d+)[^\]]*\]")
CHECK = "SELECT verdict, source_file, paragraph, paragraph_last FROM rag.check_quotes(%s::jsonb)"


@dataclass
class Quote:
    kind: str
    quote: str
    cited_file: str
    cited_paragraph: int
    true_file: str | None  # where the words are (None: a summary's, or nowhere)
    true_paragraph: int | None


def paragraphs(conn: Any) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT source_file, paragraph, book, string_agg(content, ' ' ORDER BY chunk_index) AS text "
        "FROM rag.hierarchical_content_nodes WHERE level = 0 AND paragraph IS NOT NULL "
        "GROUP BY source_file, paragraph, book ORDER BY source_file, paragraph"
    ).fetchall()


def span(
    rng: random.Random, paras: list[dict[str, Any]], clean: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """A random 8-40-word span of a random paragraph (clean: no ellipsis in it)."""
    while True:
        p = rng.choice(paras)
        tokens = p["text"].split()
        if len(tokens) < 8:
            continue
        n = rng.randint(8, min(40, len(tokens)))
        start = rng.randint(0, len(tokens) - n)
        words = tokens[start : start + n]
        if clean and ELLIPSIS.search(" ".join(words)):
            continue
        return p, words


def normalised(text: str) -> str:
    """rag._quote_words's rule, near enough to tell an altered quote that is still the book's words."""
    text = re.sub(r"\[[\^§][^\]]*\]", " ", text.lower()).replace("œ", "oe").replace("æ", "ae")
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def words_of(tokens: list[str]) -> str:
    return normalised(" ".join(tokens))


def word_of(token: str) -> str:
    return re.sub(r"[,.;:!?»)]+$", "", token)


def altered(rng: random.Random, kind: str, paras: list[dict[str, Any]], vocabulary: list[str]) -> Quote:
    while True:
        p, words = span(rng, paras, clean=True)
        inner = [i for i in range(1, len(words) - 1) if WORD.match(words[i])]
        if kind == "changed" and inner:
            i = rng.choice(inner)
            new = rng.choice(vocabulary)
            if new.lower() == word_of(words[i]).lower():
                continue
            words = [*words[:i], new + words[i][len(word_of(words[i])) :], *words[i + 1 :]]
        elif kind == "dropped" and inner:
            i = rng.choice(inner)
            words = [*words[:i], *words[i + 1 :]]
        elif kind == "swapped":
            pairs = [
                i
                for i in inner
                if i + 1 in inner and word_of(words[i]).lower() != word_of(words[i + 1]).lower()
            ]
            if not pairs:
                continue
            i = rng.choice(pairs)
            a, b = word_of(words[i]), word_of(words[i + 1])
            words = [*words[:i], b + words[i][len(a) :], a + words[i + 1][len(b) :], *words[i + 2 :]]
        else:
            continue
        if (
            f" {words_of(words)} " in f" {normalised(p['text'])} "
        ):  # still the book's words (e.g. an edge word dropped)
            continue
        return Quote(
            kind, " ".join(words), p["source_file"], p["paragraph"], p["source_file"], p["paragraph"]
        )


def misplaced(
    rng: random.Random, kind: str, paras: list[dict[str, Any]], by_file: dict[str, list[int]]
) -> Quote | None:
    books = sorted({p["book"] for p in paras})
    for _ in range(1000):
        p, words = span(rng, paras)
        if kind == "off-by-one":
            options = [n for n in (p["paragraph"] - 1, p["paragraph"] + 1) if n in by_file[p["source_file"]]]
            if not options:
                continue
            cited = (p["source_file"], rng.choice(options))
        else:
            others = [
                q
                for q in paras
                if (q["book"] == p["book"] and q["source_file"] != p["source_file"]) == (kind == "chapter")
                and (kind == "chapter" or q["book"] != p["book"])
            ]
            if not others or (kind == "other-book" and len(books) < 2):
                return None
            q = rng.choice(others)
            cited = (q["source_file"], q["paragraph"])
        return Quote(kind, " ".join(words), *cited, p["source_file"], p["paragraph"])
    return None


def summary_sentences(home: Path, books: set[str], rng: random.Random, n: int) -> list[Quote]:
    """Sentences of the chapter summaries (a summary.md beside a source.md), cited at their first anchor."""
    found = []
    for book in sorted(books):
        for summary in sorted((home / "corpus" / book).rglob("summary.md")):
            if not (summary.parent / "source.md").exists():
                continue
            body = summary.read_text(encoding="utf-8").split("\n---\n", 1)[-1]
            source = summary.parent.joinpath("source.md").relative_to(home).as_posix()
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-ZÀ-ÝŒ«])", body):
                anchor = ANCHOR.search(sentence)
                text = " ".join(ANCHOR.sub("", sentence).split())
                if anchor and len(text.split()) >= 8:
                    found.append(Quote("summary", text, source, int(anchor.group(1)), None, None))
    rng.shuffle(found)
    return found[:n]


def check_one(conn: Any, q: Quote) -> tuple[dict[str, Any], float]:
    payload = json.dumps([{"quote": q.quote, "source_file": q.cited_file, "paragraph": q.cited_paragraph}])
    t0 = time.perf_counter()
    (row,) = conn.execute(CHECK, (payload,)).fetchall()
    return row, time.perf_counter() - t0


def right_place(q: Quote, row: dict[str, Any]) -> bool:
    return (
        row["verdict"] == "elsewhere"
        and row["source_file"] == q.true_file
        and row["paragraph"] <= (q.true_paragraph or 0) <= (row["paragraph_last"] or row["paragraph"])
    )


def build_quotes(conn: Any, home: Path, n_true: int, per_kind: int, seed: int) -> list[Quote]:
    rng = random.Random(seed)
    paras = paragraphs(conn)
    by_file: dict[str, list[int]] = defaultdict(list)
    for p in paras:
        by_file[p["source_file"]].append(p["paragraph"])
    vocabulary = sorted({word_of(t) for p in paras for t in p["text"].split() if WORD.match(t)})
    quotes = []
    for _ in range(n_true):
        p, words = span(rng, paras)
        quotes.append(
            Quote("true", " ".join(words), p["source_file"], p["paragraph"], p["source_file"], p["paragraph"])
        )
    for kind in ("changed", "dropped", "swapped"):
        quotes += [altered(rng, kind, paras, vocabulary) for _ in range(per_kind)]
    for kind in ("off-by-one", "chapter", "other-book"):
        quotes += [q for q in (misplaced(rng, kind, paras, by_file) for _ in range(per_kind)) if q]
    quotes += summary_sentences(home, {p["book"] for p in paras}, rng, per_kind)
    return quotes


def run_checks(conn: Any, quotes: list[Quote]) -> dict[str, Any]:
    confusion: dict[str, Counter] = {k: Counter() for k in KINDS}
    right: Counter = Counter()
    times: dict[str, list[float]] = {"cited paragraph holds it": [], "found elsewhere": [], "other": []}
    for q in quotes:  # warm-up: the first calls plan the statements
        check_one(conn, q)
        if q.kind == "off-by-one":
            break
    for q in quotes:
        row, s = check_one(conn, q)
        confusion[q.kind][row["verdict"]] += 1
        right[q.kind] += right_place(q, row)
        if q.kind == "true" and row["verdict"] == "exact":
            times["cited paragraph holds it"].append(s)
        elif row["verdict"] == "elsewhere":
            times["found elsewhere"].append(s)
        else:
            times["other"].append(s)
    return {
        "confusion": confusion,
        "right_place": right,
        "latency": {k: percentiles(v) for k, v in times.items()},
    }


def mcp_answer(settings_env: dict[str, str], conn: Any, quotes: list[Quote], runs: int) -> dict[str, Any]:
    """A 20-quote answer (scholarly citations, as the tools print them) checked in one MCP call, `runs` times."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    meta = book_meta(conn)
    heads = {
        r["source_file"]: r
        for r in conn.execute(
            "SELECT DISTINCT ON (source_file) source_file, book, heading_path FROM rag.hierarchical_content_nodes "
            "WHERE level = 0 ORDER BY source_file, chunk_index"
        ).fetchall()
    }
    picked = [
        q for q in quotes if q.kind == "true" and '"' not in q.quote and not re.search("[«»“”]", q.quote)
    ][:20]
    answer = "\n".join(
        f"Point {i} : « {q.quote} » ({scholarly(meta.get(heads[q.cited_file]['book']), heads[q.cited_file]['heading_path'], q.cited_paragraph)})."
        for i, q in enumerate(picked, start=1)
    )

    async def go() -> tuple[list[float], Counter]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "bookrag.cli", "mcp"], env=settings_env
        )
        samples: list[float] = []
        verdicts: Counter = Counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("check_quotes", {"answer": answer})  # warm-up
            for _ in range(runs):
                t0 = time.perf_counter()
                r = await session.call_tool("check_quotes", {"answer": answer})
                samples.append(time.perf_counter() - t0)
                assert not r.is_error, r.content
                verdicts = Counter(x["verdict"] for x in r.structured_content["results"])
        return samples, verdicts

    samples, verdicts = anyio.run(go)
    return {"quotes": len(picked), **percentiles(samples), "verdicts": dict(verdicts)}


def synthetic(settings: Any, rows: int, n: int, seed: int) -> dict[str, Any]:
    import numpy as np
    from bench_search import COPY_COLUMNS, COPY_TYPES, synthetic_rows, vocabulary

    from evaluation.scratch import scratch_database
    from loader.load import LoadReport, merge_bm25_segments

    rng = np.random.default_rng(seed)
    words, freq = vocabulary(db.database_url(settings), 4000, rng)
    with scratch_database(settings, f"verify{rows}") as url:
        # bench_search's synthetic tree, its text only: rag.check_quotes reads no vector (no HNSW to build)
        tree, _sentences = synthetic_rows(rows, words, freq, rng)
        keep = [i for i, c in enumerate(COPY_COLUMNS) if c not in ("embedding_model", "embedding")]
        with db.connect(url, autocommit=True) as conn:
            books = sorted({r[3].split("/")[1] for r in tree})
            conn.cursor().executemany(
                "INSERT INTO rag.books (book, title) VALUES (%s, %s)", [(b, b) for b in books]
            )
            columns = ", ".join(COPY_COLUMNS[i] for i in keep)
            with (
                conn.cursor() as cur,
                cur.copy(
                    f"COPY rag.hierarchical_content_nodes ({columns}) FROM STDIN (FORMAT BINARY)"
                ) as copy,
            ):
                copy.set_types([COPY_TYPES[i] for i in keep])
                for node in tree:
                    copy.write_row([node[i] for i in keep])
            conn.execute("ANALYZE rag.hierarchical_content_nodes")
            merge_bm25_segments(conn, LoadReport())
            conn.autocommit = True
        build = {"rows": len(tree)}
        with db.connect(url, autocommit=True) as conn:
            conn.row_factory = dict_row  # type: ignore[assignment]
            prng = random.Random(seed)
            paras = paragraphs(conn)
            times: dict[str, list[float]] = {"cited paragraph holds it": [], "found elsewhere": []}
            verdicts: Counter[tuple[str, str]] = Counter()
            for i in range(n + 20):
                p, ws = span(prng, paras)
                off = p["paragraph"] + (1 if p["paragraph"] < 20 else -1)
                for name, cited in (("cited paragraph holds it", p["paragraph"]), ("found elsewhere", off)):
                    row, s = check_one(conn, Quote("x", " ".join(ws), p["source_file"], cited, None, None))
                    if i >= 20:  # the first 20: warm-up
                        times[name].append(s)
                        verdicts[(name, row["verdict"])] += 1
    return {
        "rows": build["rows"],
        "latency": {k: percentiles(v) for k, v in times.items()},
        "verdicts": {f"{a}: {b}": c for (a, b), c in verdicts.items()},
    }


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f} %" if b else "—"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--true", type=int, default=1000, help="true quotes")
    ap.add_argument("--per-kind", type=int, default=150, help="altered quotes of each kind (7 kinds)")
    ap.add_argument(
        "--quick", action="store_true", help="70 true, 10 of each kind; no MCP, no synthetic corpus"
    )
    ap.add_argument("--no-mcp", action="store_true", help="skip the 20-quote answer through MCP")
    ap.add_argument("--mcp-runs", type=int, default=30)
    ap.add_argument(
        "--rows", type=int, default=0, help="also time quotes on a synthetic corpus of this many rows"
    )
    ap.add_argument("--synthetic-quotes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    if args.quick:
        args.true, args.per_kind, args.no_mcp, args.rows = 70, 10, True, 0
    host = machine()
    settings = load_settings()
    url = db.database_url(settings)
    with db.connect(url, autocommit=True) as conn:
        conn.row_factory = dict_row  # type: ignore[assignment]
        conn.execute("SET default_transaction_read_only = on")  # never write to the corpus database
        quotes = build_quotes(conn, settings.home, args.true, args.per_kind, args.seed)
        result = run_checks(conn, quotes)
        mcp = None
        if not args.no_mcp:
            env = {k: v for k, v in os.environ.items()} | {"BOOKRAG_HOME": str(settings.home)}
            mcp = mcp_answer(env, conn, quotes, args.mcp_runs)
    scaled = synthetic(settings, args.rows, args.synthetic_quotes, args.seed) if args.rows else None

    confusion, right = result["confusion"], result["right_place"]
    print(f"# bench_verify: {len(quotes)} quotes (seed {args.seed}), each checked alone by rag.check_quotes")
    print(f"{load_note(host)}\n")
    rows = []
    for kind in KINDS:
        n = sum(confusion[kind].values())
        rows.append(
            [
                kind,
                n,
                *[confusion[kind][v] for v in VERDICTS],
                right[kind] if kind in ("off-by-one", "chapter", "other-book") else "—",
            ]
        )
    print(markdown_table(["kind", "quotes", *VERDICTS, "elsewhere at the right §"], rows))
    altered_exact = sum(confusion[k]["exact"] for k in KINDS if k != "true")
    one_word = [k for k in ("changed", "dropped", "swapped")]
    wrong_place = ["off-by-one", "chapter", "other-book"]
    n_true = sum(confusion["true"].values())
    targets = [
        ["altered quotes called exact", altered_exact, "0"],
        ["summary sentences called exact", confusion["summary"]["exact"], "0"],
        ["true quotes exact", pct(confusion["true"]["exact"], n_true), ">= 99.5 %"],
        [
            "wrong place -> elsewhere at the right §",
            pct(sum(right[k] for k in wrong_place), sum(sum(confusion[k].values()) for k in wrong_place)),
            ">= 99 %",
        ],
        [
            "one-word alterations -> close",
            pct(
                sum(confusion[k]["close"] for k in one_word),
                sum(sum(confusion[k].values()) for k in one_word),
            ),
            ">= 95 %",
        ],
    ]
    lat = result["latency"]
    targets += [
        ["p50 ms, cited paragraph holds it", lat["cited paragraph holds it"]["p50_ms"], "<= 5"],
        ["p50 ms, found elsewhere", lat["found elsewhere"]["p50_ms"], "<= 30"],
    ]
    if mcp:
        targets.append([f"p50 ms, {mcp['quotes']}-quote answer through MCP", mcp["p50_ms"], "<= 100"])
    print("\n" + markdown_table(["measure", "value", "target"], targets))
    print(
        "\n"
        + markdown_table(
            ["latency per quote", "n", "p50 ms", "p95 ms", "max ms"],
            [[k, v["n"], v["p50_ms"], v["p95_ms"], v["max_ms"]] for k, v in lat.items()],
        )
    )
    if mcp:
        print(
            f"\nMCP: {mcp['quotes']}-quote answer, {mcp['n']} calls: p50 {mcp['p50_ms']:.1f} ms, p95 {mcp['p95_ms']:.1f} ms; verdicts {mcp['verdicts']}"
        )
    if scaled:
        print(f"\n## synthetic corpus, {scaled['rows']:,} rows\n")
        print(
            markdown_table(
                ["latency per quote", "n", "p50 ms", "p95 ms", "max ms"],
                [[k, v["n"], v["p50_ms"], v["p95_ms"], v["max_ms"]] for k, v in scaled["latency"].items()],
            )
        )
        print(f"verdicts: {scaled['verdicts']}")
    write_json(
        args.json,
        {
            "machine": host,
            "quotes": len(quotes),
            "confusion": {k: dict(v) for k, v in confusion.items()},
            "right_place": dict(right),
            "latency": lat,
            "mcp": mcp,
            "synthetic": scaled,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
