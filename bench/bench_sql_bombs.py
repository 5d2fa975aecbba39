"""What a hostile `read_only_sql` costs the database: the verdict, the busiest backend's peak
memory and the wall time of each bomb, and the latency another client's searches see meanwhile.

Builds the MCP server in this process against the real `bookrag` database (the embedded one, or
DATABASE_URL; the server logs in as bookrag_mcp, as `bookrag mcp` does) and drives it with the
SDK's own client. While a call runs, every process of the database server is sampled every 5 ms
(/proc/<pid>/status: RssAnon, the private memory a statement builds; VmRSS adds the shared buffers
it touched). Parts:
  (a) expression bombs (issue 43): `||` chains of 20/40/56/200 operands over every paragraph in one
      string, nested `||`, concat() of 100 arguments, ARRAY[c x 400]; one at a time, then four at
      once from four clients; a fifth client searches throughout;
  (b) parser-crash inputs (issue 43: they escaped the guard and took 11-14 s): each one's refusal
      time, then 20 of them in a row while another client searches;
  (c) the plan-bound bombs of issue 33 (array_agg over cross joins…), one at a time and in pairs.
Verdicts: "refused" (the guard or the plan bound, before anything runs), "stopped" (the time
limit, the memory watchdog or the server's data limit ended it), "ran" (an answer came back).
Targets (issue 43): every bomb refused or stopped with the busiest backend <= 512 MB and the wall
time <= the time limit + 1 s; another client's searches meanwhile p95 <= 150 ms with 0 errors;
a parser-crash input refused in <= 50 ms. With --without-budget the guard's expression budget is
lifted, and its token cap (the walls behind them alone); with --without-plan-bound the plan
bound too.

Run:  .venv/bin/python bench/bench_sql_bombs.py [--searches 100] [--json out.json]
      .venv/bin/python bench/bench_sql_bombs.py --quick     # seconds: tests/bench runs it
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # common.py, also when imported by a test

from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json
from mcp import Client

from bookrag.config import Settings, load_settings
from mcp_server import server as mcp_server
from mcp_server import sql_guard
from mcp_server.server import build_server

N = "rag.hierarchical_content_nodes"
MB = 2**20
#: Every paragraph of every book in one string (about 5 MB on the two shipped books).
AGG = f"(SELECT string_agg(content, '') AS c FROM {N}) s"
MEMORY_TARGET_MB = 512
SEARCH_P95_TARGET_MS = 150
REFUSAL_TARGET_MS = 50


def chain(n: int, operand: str = "c") -> str:
    return " || ".join([operand] * n)


def nested(depth: int, operand: str) -> str:
    for _ in range(depth):
        operand = f"({operand} || {operand})"
    return operand


#: Issue 43's expression bombs: PostgreSQL cannot cancel one expression while it evaluates.
EXPRESSION_BOMBS: dict[str, str] = {
    **{
        f"|| chain of {n} over all paragraphs": f"SELECT length({chain(n)}) FROM {AGG}"
        for n in (20, 40, 56, 200)
    },
    "nested || over all paragraphs (32 leaves)": f"SELECT length({nested(5, 'c')}) FROM {AGG}",
    "nested || per row, no aggregate (256 leaves)": f"SELECT max(length({nested(8, 'content')})) FROM {N}",
    "concat() of 100 arguments": f"SELECT length(concat({', '.join(['c'] * 100)})) FROM {AGG}",
    "ARRAY[c x 400]": f"SELECT cardinality(ARRAY[{', '.join(['c'] * 400)}]) FROM {AGG}",
    "one aggregate fed to ||": f"SELECT length(string_agg(content, '') || string_agg(content, '')) FROM {N}",
}
#: Inputs the guard's parser crashed on (issue 43), and more of their kind.
PARSER_CRASHES: list[str] = [
    "SELECT {:}",
    'SELECT & pg_backend_pid() ::text\f("",',
    "SELECT {a:b}",
    "SELECT 1 +",
    "SELECT * FROM rag.search(",
    "SELECT $$ never closed",
    "SELECT " + "(" * 2000 + "1" + ")" * 2000,
]
#: Issue 33's bombs, which the plan bound refuses (or the watchdog stops).
PLAN_BOMBS: dict[str, str] = {
    "array_agg over a 3-way cross join": f"SELECT array_agg(a.content) FROM {N} a, {N} b, {N} c",
    "string_agg over a cross join": f"SELECT string_agg(a.content, ' ') FROM {N} a, {N} b",
    "ARRAY() of a cross join": f"SELECT ARRAY(SELECT a.content FROM {N} a, {N} b)",
    "array_agg over a guessed join": f"SELECT array_agg(a.content || b.content) FROM {N} a JOIN {N} b ON a.id % 7 = b.id % 7",
    "array_agg over an equi-join by level": f"SELECT array_agg(a.content) FROM {N} a JOIN {N} b ON a.level = b.level",
    "window array_agg over a cross join": f"SELECT x FROM (SELECT array_agg(a.content) OVER () AS x FROM {N} a, {N} b) s LIMIT 1",
    "sort of a cross join": f"SELECT a.content FROM {N} a, {N} b ORDER BY a.content || b.content",
    "hash aggregate of a cross join": f"SELECT a.content, b.content, count(*) FROM {N} a, {N} b GROUP BY 1, 2",
    "count(*) over an 8-way cross join": "SELECT count(*) FROM " + ", ".join(f"{N} t{i}" for i in range(8)),
    "string_agg of every row (legitimate, large)": f"SELECT length(string_agg(content, ' ')) FROM {N}",
}


def server_pids(postmaster: int) -> list[int]:
    """The database server's processes: the postmaster's children (only this server's, not
    another database server's on the same machine)."""
    try:
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    except OSError:
        return []
    return [int(p) for p in children]


def memory(pid: int) -> tuple[int, int]:
    """(RssAnon, VmRSS) in bytes, 0 when the process is gone."""
    anon = rss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return anon, rss


class Sampler:
    """Largest RssAnon and VmRSS of each of the server's processes while running."""

    def __init__(self, postmaster: int | None) -> None:
        self.postmaster = postmaster
        self.peaks: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._sample()  # a call shorter than one period is still sampled
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        for pid in server_pids(self.postmaster) if self.postmaster else []:
            anon, rss = memory(pid)
            old = self.peaks.get(pid, (0, 0))
            self.peaks[pid] = (max(old[0], anon), max(old[1], rss))

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self._sample()

    def busiest(self) -> tuple[float, float]:
        """The largest RssAnon and VmRSS peaks of one process, in MB."""
        if not self.peaks:
            return float("nan"), float("nan")
        return max(p[0] for p in self.peaks.values()) / MB, max(p[1] for p in self.peaks.values()) / MB

    def total(self, n: int) -> float:
        """The sum of the n largest RssAnon peaks, in MB."""
        return sum(sorted((p[0] for p in self.peaks.values()), reverse=True)[:n]) / MB


def answer_text(result: Any) -> str:
    text = result.content[0].text if result.content else ""
    return text.partition(": ")[2] if text.startswith("Error executing tool ") else text


def verdict(result: Any) -> str:
    """refused (before running), stopped (a limit ended it), ran (an answer came back)."""
    if not result.is_error:
        return "ran"
    text = answer_text(result)
    if text.startswith(("rejected", "read_only_sql is busy")):
        return "refused"
    return "stopped"


class Searcher:
    """One client calling `search` in a loop (real French queries) until stopped."""

    def __init__(self, server: Any) -> None:
        self.server, self.errors = server, 0
        self.times: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        async with Client(self.server) as client:
            i = 0
            while not self._stop.is_set():
                t0 = time.perf_counter()
                r = await client.call_tool("search", {"query": FRENCH_QUERIES[i % len(FRENCH_QUERIES)]})
                self.times.append(time.perf_counter() - t0)
                self.errors += bool(r.is_error)
                i += 1
                await asyncio.sleep(0.05)  # a reader's pace, not a load test

    def __enter__(self) -> Searcher:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> dict[str, float]:
        self._stop.set()
        assert self._task is not None
        await self._task
        return {**percentiles(self.times), "errors": self.errors}

    def __exit__(self, *exc: object) -> None:
        pass


async def keep_firing(server: Any, sqls: list[str], done: Any, at_least: int = 0, clients: int = 2) -> int:
    """Call read_only_sql with sqls in turn from `clients` clients until done() and at least
    `at_least` calls were made; return how many were made."""
    fired = 0
    if not sqls:
        return 0

    async def one(offset: int) -> None:
        nonlocal fired
        async with Client(server) as session:
            i = offset
            while not done() or fired < at_least:
                await session.call_tool("read_only_sql", {"sql": sqls[i % len(sqls)], "max_rows": 5})
                fired += 1
                i += 1
                await asyncio.sleep(0.05)  # a client's pace (the searcher's), not a flood

    await asyncio.gather(*(one(c) for c in range(clients)))
    return fired


def postmaster_pid(settings: Settings) -> int | None:
    """The server's postmaster, when it runs on this machine: the parent of a backend."""
    import psycopg

    from bookrag import db

    try:
        with psycopg.connect(db.database_url(settings)) as conn:
            stat = Path(f"/proc/{conn.info.backend_pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, psycopg.Error, ValueError, IndexError):
        return None


async def run(args: argparse.Namespace, settings: Settings, postmaster: int | None = None) -> dict:
    if args.without_budget:  # the walls behind the guard's budget, alone
        sql_guard.check_budget = lambda tree: None  # type: ignore[assignment]
        sql_guard.MAX_TOKENS = 10**9
    if args.without_plan_bound:
        sql_guard.VALUE_BUILDING_BYTES = sql_guard.COST_BOUND = float("inf")  # type: ignore[assignment]
    server = build_server(settings)
    limit_s = mcp_server.SQL_TIMEOUT_S
    out: dict[str, Any] = {"time_limit_s": limit_s}
    bombs = dict(list(EXPRESSION_BOMBS.items())[:3]) if args.quick else EXPRESSION_BOMBS
    if args.only:
        bombs = {name: sql for name, sql in bombs.items() if any(o in name for o in args.only)}
    parts = set(args.parts.split(","))
    async with Client(server) as client:
        await client.call_tool("search", {"query": FRENCH_QUERIES[0]})  # warm: model loaded, pool open
        if postmaster is None:
            postmaster = postmaster_pid(settings)

        # quiet searches, for reference
        quiet = Searcher(server)
        with quiet:
            while len(quiet.times) < args.searches:
                await asyncio.sleep(0.05)
        out["searches_quiet"] = await quiet.stop()

        # (a) expression bombs, one at a time, another client searching throughout
        if "expression" not in parts:
            bombs = {}
        rows: list[Sequence[Any]] = []
        out["expression_bombs"] = []
        searcher = Searcher(server)
        with searcher:
            for name, sql in bombs.items():
                with Sampler(postmaster) as s:
                    t0 = time.perf_counter()
                    r = await client.call_tool("read_only_sql", {"sql": sql, "max_rows": 5})
                    took = time.perf_counter() - t0
                anon, rss = s.busiest()
                row: dict[str, Any] = {
                    "bomb": name,
                    "verdict": verdict(r),
                    "answer": " ".join(answer_text(r).split())[:90],
                    "busiest_backend_rssanon_mb": anon,
                    "busiest_backend_vmrss_mb": rss,
                    "seconds": took,
                }
                out["expression_bombs"].append(row)
                rows.append((name, row["verdict"], row["answer"][:60], anon, rss, took))
            # four at once, from four clients (the server runs two read_only_sql at a time)
            concurrent = list(bombs.values())[: 2 if args.quick else 4] if args.concurrent else []

            async def fire(sql: str) -> tuple[Any, float]:
                async with Client(server) as session:
                    t0 = time.perf_counter()
                    result = await session.call_tool("read_only_sql", {"sql": sql, "max_rows": 5})
                    return result, time.perf_counter() - t0

            with Sampler(postmaster) as s:
                results = await asyncio.gather(*(fire(sql) for sql in concurrent)) if concurrent else []
            anon, rss = s.busiest()
            verdicts = sorted({verdict(r) for r, _ in results})
            took = max((t for _, t in results), default=0.0)
            out["concurrent"] = {
                "bombs": len(concurrent),
                "verdicts": verdicts,
                "busiest_backend_rssanon_mb": anon,
                "total_rssanon_mb": s.total(len(concurrent)),
                "seconds": took,
            }
            if concurrent:
                rows.append(
                    (f"{len(concurrent)} of the above at once", "/".join(verdicts), "", anon, rss, took)
                )
            # then the bombs again and again from two clients, until the searcher has its sample
            out["bombs_fired_while_searching"] = await keep_firing(
                server, list(bombs.values()), lambda: len(searcher.times) >= args.searches
            )
        out["searches_during_expression_bombs"] = busy = await searcher.stop()
        print(
            markdown_table(
                ["expression bomb", "verdict", "answer", "busiest backend RssAnon MB", "VmRSS MB", "wall s"],
                rows,
            )
        )
        print(
            f"time limit {limit_s} s; target: busiest backend <= {MEMORY_TARGET_MB} MB, wall <= {limit_s + 1} s"
        )

        # (b) parser-crash inputs: each one's refusal time, then 20 in a row while a client searches
        crash_rows: list[Sequence[Any]] = []
        out["parser_crashes"] = []
        for sql in PARSER_CRASHES if "parser" in parts else []:
            t0 = time.perf_counter()
            r = await client.call_tool("read_only_sql", {"sql": sql})
            ms = (time.perf_counter() - t0) * 1000
            out["parser_crashes"].append({"input": sql[:60], "verdict": verdict(r), "ms": ms})
            crash_rows.append((repr(sql[:40]), verdict(r), " ".join(answer_text(r).split())[:60], ms))
        # the two inputs of the issue, again and again (at least 20), until the searcher has its sample
        crash_searcher = Searcher(server)
        with crash_searcher:
            out["parser_crashes_fired_while_searching"] = await keep_firing(
                server,
                PARSER_CRASHES[:2] if "parser" in parts else [],
                lambda: len(crash_searcher.times) >= args.searches,
                at_least=20,
            )
        out["searches_during_parser_crashes"] = during = await crash_searcher.stop()
        print()
        print(markdown_table(["parser-crash input", "verdict", "answer", "ms"], crash_rows))
        print(f"target: refused in <= {REFUSAL_TARGET_MS} ms")

        print()
        search_rows: list[Sequence[Any]] = []
        for label, p in (
            ("no bomb running", out["searches_quiet"]),
            (f"during {out.get('bombs_fired_while_searching', 0)} expression bombs", busy),
            (f"during {out['parser_crashes_fired_while_searching']} parser-crash inputs", during),
        ):
            search_rows.append((label, p["n"], p["p50_ms"], p["p95_ms"], p["max_ms"], p["errors"]))
        print(
            markdown_table(
                ["another client's searches", "n", "p50 ms", "p95 ms", "max ms", "errors"], search_rows
            )
        )
        print(f"target: p95 <= {SEARCH_P95_TARGET_MS} ms, 0 errors")

        if not args.quick and "plan" in parts:  # (c) issue 33's plan-bound bombs
            rows = []
            out["plan_bombs"] = []
            for name, sql in PLAN_BOMBS.items():
                with Sampler(postmaster) as s:
                    t0 = time.perf_counter()
                    r = await client.call_tool("read_only_sql", {"sql": sql, "max_rows": 5})
                    took = time.perf_counter() - t0
                anon, rss = s.busiest()
                out["plan_bombs"].append(
                    {"bomb": name, "verdict": verdict(r), "busiest_backend_rssanon_mb": anon, "seconds": took}
                )
                rows.append((name, verdict(r), " ".join(answer_text(r).split())[:60], anon, rss, took))
            print()
            print(
                markdown_table(
                    ["plan bomb", "verdict", "answer", "busiest RssAnon MB", "VmRSS MB", "wall s"], rows
                )
            )
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="three bombs, short search windows: a test's setting"
    )
    ap.add_argument("--searches", type=int, default=None, help="searches timed in each window (default 100)")
    ap.add_argument("--without-budget", action="store_true", help="lift the guard's expression budget")
    ap.add_argument(
        "--without-plan-bound", action="store_true", help="lift the plan bounds (cost, aggregate input)"
    )
    ap.add_argument("--only", action="append", help="only the expression bombs whose name holds this")
    ap.add_argument("--parts", default="expression,parser,plan", help="which parts to run (comma-separated)")
    ap.add_argument("--no-concurrent", dest="concurrent", action="store_false", help="skip the bombs at once")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    if args.searches is None:
        args.searches = 3 if args.quick else 100
    return args


def main(argv: Sequence[str] | None = None, settings: Settings | None = None) -> dict:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as `bookrag mcp` runs the embedder
    logging.getLogger("mcp").setLevel(logging.WARNING)  # each refused call is logged at INFO
    start = machine()
    data = asyncio.run(run(args, settings or load_settings()))
    print(f"\n{load_note(start)}")
    write_json(args.json, {"machine": start, **data})
    return data


if __name__ == "__main__":
    main()
