"""Server time of the reading room's pages (mcp_server/reading_room.py) on the loaded books.

Builds the HTTP app of `bookrag mcp --http` in process (the MCP server's pool, its read-only
role, the real `bookrag` database; environment inherited) and requests pages through
Starlette's TestClient. A sample is the server time: from the request entering the ASGI app to
the last byte of its response (an ASGI wrapper around the whole app), so the test client's own
cost is left out.
  (a) chapter pages: every section (chapter or front matter) of every book, in --rounds rounds
      after one warm-up round, each page once plain and once with its summary's first anchor
      highlighted (?hl=…, as a citation link opens it); p50/p95/max. Target: p95 ≤ 50 ms.
  (b) book pages (the tree with every summary): each book, --rounds times.
  (c) the search page against the default search alone: for each of the 20 French queries of
      bench/common.py, --search-runs times, alternately: the page (/search?q=…), and what the
      page runs for it without HTTP or HTML (the corpus model, the query embedding, then
      bookrag.search.search on a pooled connection). Target: page p50 ≤ search p50 + 10 ms.

Run:  .venv/bin/python bench/bench_reading_room.py [--rounds 5] [--search-runs 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any
from urllib.parse import quote

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as `bookrag mcp` sets it for the query embedder

from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from bookrag.config import load_settings  # noqa: E402
from bookrag.links import citation_url, page_path  # noqa: E402
from bookrag.search import SearchRequest, query_vector, search  # noqa: E402
from mcp_server.http import http_app  # noqa: E402
from mcp_server.reading_room import SEARCH_K  # noqa: E402
from mcp_server.server import AppState, Running, build_server, with_connection  # noqa: E402


class ServerTime:
    """ASGI wrapper: the duration of each HTTP request, from its scope to its last body message."""

    def __init__(self, app: Any) -> None:
        self.app, self.samples = app, []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()

        async def timed_send(message: dict) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.samples.append(time.perf_counter() - started)

        await self.app(scope, receive, timed_send)


def get(client: TestClient, timer: ServerTime, url: str) -> float:
    r = client.get(url)
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return timer.samples[-1]


def chapter_urls(state: AppState) -> tuple[list[str], list[str], int]:
    """Each section's page, plain and with its summary's first anchor highlighted; the books'
    pages; the largest section's paragraph count."""

    def read(conn: Any) -> tuple[list[dict], list[dict]]:
        books = conn.execute("SELECT book FROM rag.list_books()").fetchall()
        sections = conn.execute(
            "SELECT o.source_file, o.chunk_count, (SELECT min(p) FROM rag.sentences s, "
            "unnest(s.cited_paragraphs) p WHERE s.cited_source_file = o.source_file) AS first "
            "FROM rag.list_books() b CROSS JOIN LATERAL rag.outline(b.book) o "
            "WHERE o.node_type = 'source'"
        ).fetchall()
        return books, sections

    books, sections = with_connection(state, read)
    urls = []
    for s in sections:
        urls.append(citation_url("", s["source_file"]))
        if s["first"]:
            urls.append(citation_url("", s["source_file"], s["first"]))
    return (
        [u for u in urls if u],
        [page_path(b["book"]) for b in books],
        max(s["chunk_count"] for s in sections),
    )


def search_alone(state: AppState, query: str) -> float:
    started = time.perf_counter()
    model = state.corpus_model()
    embedding = query_vector(model, query) if model else None
    with_connection(state, lambda conn: search(conn, SearchRequest(query, k=SEARCH_K), embedding, model))
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--search-runs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    start = machine()
    settings = load_settings()
    running = Running()
    timer = ServerTime(http_app(build_server(settings, running=running), settings, "127.0.0.1", running))
    out: dict[str, Any] = {"machine": start}
    with TestClient(timer, base_url="http://127.0.0.1:8765") as client:
        client.get("/")
        state = running.state
        assert state is not None
        chapters, books, largest = chapter_urls(state)
        for url in chapters:  # warm-up round
            get(client, timer, url)
        chapter_s = [get(client, timer, url) for _ in range(args.rounds) for url in chapters]
        book_s = [get(client, timer, url) for _ in range(args.rounds) for url in books]
        page_s, alone_s = [], []
        for query in FRENCH_QUERIES:
            get(client, timer, f"/search?q={quote(query)}")  # warm-up (the embedder's first call too)
            search_alone(state, query)
            for _ in range(args.search_runs):
                page_s.append(get(client, timer, f"/search?q={quote(query)}"))
                alone_s.append(search_alone(state, query))
    rows = [
        ("chapter page (plain and highlighted)", len(chapters), percentiles(chapter_s)),
        ("book page (tree, every summary)", len(books), percentiles(book_s)),
        ("search page", len(FRENCH_QUERIES), percentiles(page_s)),
        ("default search alone (embedding + rag.search)", len(FRENCH_QUERIES), percentiles(alone_s)),
    ]
    print(
        f"# bench_reading_room: server time per request (ASGI app in process), {args.rounds} rounds, "
        f"{args.search_runs} runs per query; sections up to {largest} passages"
    )
    print(load_note(start) + "\n")
    print(
        markdown_table(
            ["what", "pages or queries", "n", "p50 ms", "p95 ms", "max ms"],
            [(name, count, p["n"], p["p50_ms"], p["p95_ms"], p["max_ms"]) for name, count, p in rows],
        )
    )
    page, alone = percentiles(page_s), percentiles(alone_s)
    paired = percentiles(
        [a - b for a, b in zip(page_s, alone_s)]
    )  # each page against the search right after it
    print(
        f"\nchapter page p95 {percentiles(chapter_s)['p95_ms']:.1f} ms (target ≤ 50); search page p50 − default "
        f"search p50 = {page['p50_ms'] - alone['p50_ms']:+.1f} ms, median of the paired differences "
        f"{paired['p50_ms']:+.1f} ms (target ≤ +10)"
    )
    out["search page minus search, paired"] = paired
    out.update({name: p for name, _, p in rows})
    write_json(args.json, out)


if __name__ == "__main__":
    main()
