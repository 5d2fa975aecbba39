"""What a hostile `read_only_sql` costs the database: peak backend memory under each red-team
bomb, and the latency another client's searches see meanwhile.

Builds the MCP server in this process against the real `bookrag` database (the embedded one, or
DATABASE_URL; the server logs in as bookrag_mcp, as `bookrag mcp` does) and drives it with the
SDK's own client:
  (a) each bomb alone: while the call runs, every PostgreSQL process of this machine is sampled
      every 5 ms (/proc/<pid>/status: VmRSS, RssAnon); the table gives the answer's first words,
      the call's time and the largest VmRSS / RssAnon any backend reached (shared buffers it
      touched count in VmRSS, not in RssAnon);
  (b) two bombs at once (the server allows two read_only_sql calls): the sum of the two largest
      backends' peaks;
  With --without-plan-bound the plan bound is lifted, so the bombs run until the memory watchdog
  (or the time and temp-file limits) stops them: what the second wall holds alone.
  (c) searches during bombs: one client calls `search` sequentially (real French queries) while
      --bomb-clients clients fire the bombs in a loop; p50/p95 of the searches, against the same
      searches with no bomb running.
Goals (issue 33): each bomb's peak backend RSS <= 512 MB, <= 1 GB for two at once; searches
p95 <= 100 ms during the bombs. Timings depend on the machine; the memory figures do not much.

Run:  .venv/bin/python bench/bench_sql_bombs.py [--searches 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import threading
import time
from pathlib import Path

from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json
from mcp import Client

from bookrag.config import load_settings
from mcp_server import sql_guard
from mcp_server.server import build_server

N = "rag.hierarchical_content_nodes"
#: The red-team suite's memory and time bombs, and two that misjudge the planner's estimates.
BOMBS: dict[str, str] = {
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


def postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"postgres: "):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) in bytes, 0 when the process is gone."""
    rss = anon = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, anon


class Sampler:
    """Largest VmRSS and RssAnon of each PostgreSQL process while running."""

    def __init__(self) -> None:
        self.peaks: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._sample(postgres_pids())  # a call shorter than one period is still sampled
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(postgres_pids())

    def _sample(self, pids: list[int]) -> None:
        for pid in pids:
            rss, anon = memory(pid)
            old = self.peaks.get(pid, (0, 0))
            self.peaks[pid] = (max(old[0], rss), max(old[1], anon))

    def _run(self) -> None:
        pids, refreshed = postgres_pids(), time.monotonic()
        while not self._stop.wait(0.005):
            if time.monotonic() - refreshed > 0.2:
                pids, refreshed = postgres_pids(), time.monotonic()
            self._sample(pids)

    def top(self, n: int) -> tuple[int, int]:
        """Sum of the n largest VmRSS peaks, and of the n largest RssAnon peaks."""
        rss = sorted((p[0] for p in self.peaks.values()), reverse=True)[:n]
        anon = sorted((p[1] for p in self.peaks.values()), reverse=True)[:n]
        return sum(rss), sum(anon)


def first_words(result) -> str:
    text = result.content[0].text if result.content else ""
    text = text.partition(": ")[2] if text.startswith("Error executing tool ") else text
    return ("error: " if result.is_error else "ran: ") + " ".join(text.split())[:70]


async def run(args: argparse.Namespace) -> dict:
    if args.without_plan_bound:  # the watchdog alone: what the second wall holds by itself
        sql_guard.VALUE_BUILDING_BYTES = sql_guard.COST_BOUND = float("inf")
    server = build_server(load_settings())
    MB = 2**20
    out: dict = {"bombs": [], "pairs": [], "searches": {}}
    async with Client(server) as client, Client(server) as other:
        await client.call_tool("search", {"query": FRENCH_QUERIES[0]})  # warm: model loaded, pool open
        rows = []
        for name, sql in BOMBS.items():
            with Sampler() as s:
                t0 = time.perf_counter()
                r = await client.call_tool("read_only_sql", {"sql": sql, "max_rows": 5})
                took = time.perf_counter() - t0
            rss, anon = s.top(1)
            rows.append((name, first_words(r), took, rss / MB, anon / MB))
            out["bombs"].append(
                {
                    "bomb": name,
                    "answer": first_words(r),
                    "seconds": took,
                    "peak_rss_mb": rss / MB,
                    "peak_anon_mb": anon / MB,
                }
            )
        print(markdown_table(["bomb", "answer", "s", "peak backend RSS MB", "peak RssAnon MB"], rows))

        print()
        rows = []
        names = list(BOMBS)
        for a, b in [(names[0], names[1]), (names[3], names[4]), (names[6], names[7])]:
            with Sampler() as s:
                await asyncio.gather(
                    client.call_tool("read_only_sql", {"sql": BOMBS[a]}),
                    other.call_tool("read_only_sql", {"sql": BOMBS[b]}),
                )
            rss, anon = s.top(2)
            rows.append((f"{a} + {b}", rss / MB, anon / MB))
            out["pairs"].append({"pair": [a, b], "peak_rss_mb": rss / MB, "peak_anon_mb": anon / MB})
        print(markdown_table(["two at once", "two largest backends' RSS MB", "RssAnon MB"], rows))

        async def searches(session: Client, n: int) -> list[float]:
            times = []
            for i in range(n):
                t0 = time.perf_counter()
                r = await session.call_tool("search", {"query": FRENCH_QUERIES[i % len(FRENCH_QUERIES)]})
                times.append(time.perf_counter() - t0)
                assert not r.is_error, r.content
            return times

        quiet = percentiles(await searches(other, args.searches))
        stop = asyncio.Event()

        async def bomber(offset: int) -> None:
            async with Client(server) as session:  # entered and left in this task (anyio's rule)
                i = offset
                while not stop.is_set():
                    await session.call_tool("read_only_sql", {"sql": BOMBS[names[i % len(names)]]})
                    i += 1

        tasks = [asyncio.create_task(bomber(i)) for i in range(args.bomb_clients)]
        await asyncio.sleep(1.0)
        busy = percentiles(await searches(other, args.searches))
        stop.set()
        await asyncio.gather(*tasks)
        print()
        print(
            markdown_table(
                ["searches (tool `search`, default mode)", "n", "p50 ms", "p95 ms", "max ms"],
                [
                    ("no bomb running", quiet["n"], quiet["p50_ms"], quiet["p95_ms"], quiet["max_ms"]),
                    (
                        f"{args.bomb_clients} clients firing bombs",
                        busy["n"],
                        busy["p50_ms"],
                        busy["p95_ms"],
                        busy["max_ms"],
                    ),
                ],
            )
        )
        out["searches"] = {"quiet": quiet, "during_bombs": busy, "bomb_clients": args.bomb_clients}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--searches", type=int, default=100, help="search calls timed, quiet and during bombs")
    ap.add_argument(
        "--bomb-clients", type=int, default=2, help="clients firing bombs during the timed searches"
    )
    ap.add_argument(
        "--without-plan-bound",
        action="store_true",
        help="lift the plan bounds (cost, value-building input): every bomb runs until the memory watchdog or a limit stops it",
    )
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as `bookrag mcp` runs the embedder
    logging.getLogger("mcp").setLevel(logging.WARNING)  # each refused call is logged at INFO
    start = machine()
    data = asyncio.run(run(args))
    print(f"\n{load_note(start)}")
    write_json(args.json, {"machine": start, **data})


if __name__ == "__main__":
    main()
