"""Server time of the reading room's refusals of a search's wordings (bookrag.search.check_wordings,
checked before anything is embedded): issue 43 measured 1–2 s for a 400 to 50 `also` values, and
9 s of CPU under load, because each value was embedded before the "at most 4" check.

The reading room's ASGI app is called in process (no database: the check comes before the page
reads any), each request timed from entering the app to its last byte; the embedder is wrapped
and its calls counted (target: none). Cases: 50 `also` values (a 17 KB query string), 5 values,
a value repeating the question, a value over the 2,000 characters the page takes.
--rounds requests per case after one warm-up request. Target: p95 ≤ 50 ms, 0 embeddings.

Run:  .venv/bin/python bench/bench_wordings.py [--rounds 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import time
from typing import Any
from urllib.parse import urlencode

import anyio
from common import machine, markdown_table, percentiles, write_json

from mcp_server import reading_room
from mcp_server.http import security_for
from mcp_server.server import Running

CASES = {
    "50 also values": [("q", "pain")] + [("also", f"mot {i} " * 50) for i in range(50)],
    "5 also values": [("q", "pain")] + [("also", f"mot {i}") for i in range(5)],
    "also repeats the question": [("q", "pain cher"), ("also", "Pain cher ")],
    "also of 2,001 characters": [("q", "pain"), ("also", "b" * 2001)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args()
    embedded: list[int] = []
    real = reading_room.query_vectors

    def counted(model: str, texts: list[str]) -> Any:
        embedded.append(len(texts))
        return real(model, texts)

    reading_room.query_vectors = counted  # type: ignore[assignment]
    app = reading_room.reading_room_app(Running(), security_for("127.0.0.1"))  # never started: no database

    async def request(query: bytes) -> tuple[int, float]:
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/search",
            "raw_path": b"/search",
            "query_string": query,
            "headers": [(b"host", b"127.0.0.1:8765")],
            "scheme": "http",
            "server": ("127.0.0.1", 8765),
            "client": ("127.0.0.1", 1),
            "root_path": "",
            "http_version": "1.1",
            "asgi": {"version": "3.0"},
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        started = time.perf_counter()
        await app(scope, receive, send)
        return sent[0]["status"], time.perf_counter() - started

    async def run() -> list[list[Any]]:
        rows = []
        for name, params in CASES.items():
            query = urlencode(params).encode()
            await request(query)  # warm-up: the error template's first compilation
            samples, statuses = [], set()
            for _ in range(args.rounds):
                status, seconds = await request(query)
                statuses.add(status)
                samples.append(seconds)
            p = percentiles(samples)
            rows.append(
                [
                    name,
                    f"{len(query):,} B",
                    "/".join(map(str, sorted(statuses))),
                    p["p50_ms"],
                    p["p95_ms"],
                    p["max_ms"],
                ]
            )
        return rows

    start = machine()
    rows = anyio.run(run)
    print(markdown_table(["case", "query string", "status", "p50 ms", "p95 ms", "max ms"], rows))
    print(f"\nembedder calls: {len(embedded)} (target 0)")
    write_json(
        args.json, {"machine": start, "rounds": args.rounds, "rows": rows, "embedder_calls": len(embedded)}
    )


if __name__ == "__main__":
    main()
