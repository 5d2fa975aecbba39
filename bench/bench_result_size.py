"""What an agent reads: the characters of a tool's text content (the JSON a client shows the
model) for a k = 5 search, the same with expand_parent, and a whole chapter's get_node, on the
loaded books, through the SDK's own client (in process, the MCP server's pool and role).

Run from a checkout whose database holds both books (`./run demo`):
    .venv/bin/python bench/bench_result_size.py [--json out.json]
To compare with another version of the server, run the same file with that checkout's code
(`PYTHONPATH=<checkout> <checkout>/.venv/bin/python bench/bench_result_size.py`, with
DATABASE_URL naming this database).
"""

from __future__ import annotations

import argparse
import json

import anyio
from mcp import Client

from bookrag.config import load_settings
from mcp_server.server import build_server

PETITION = (
    "corpus/bastiat-sophismes-economiques/premiere-serie/"
    "chapitre-07-petition-des-fabricants-de-chandelles/source.md"
)
QUERY = {"query": "Quelle est la thèse de la Pétition des fabricants de chandelles ?", "k": 5}


def calls(source_file: str) -> tuple[tuple[str, str, dict[str, object]], ...]:
    return (
        ("search, k = 5", "search", QUERY),
        ("search, k = 5, expand_parent", "search", {**QUERY, "expand_parent": True}),
        ("get_node, a whole chapter", "get_node", {"source_file": source_file}),
    )


async def sizes(source_file: str) -> dict[str, int]:
    out = {}
    async with Client(build_server(load_settings())) as client:
        for name, tool, args in calls(source_file):
            r = await client.call_tool(tool, args)
            if r.is_error:
                raise SystemExit(f"{tool} failed: {r.content[0].text}")
            out[name] = len(r.content[0].text)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--source-file", default=PETITION, help="the chapter get_node reads (default: the Pétition)"
    )
    args = parser.parse_args()
    found = anyio.run(sizes, args.source_file)
    print("| call | characters of text content |\n|---|---|")
    for name, n in found.items():
        print(f"| {name} | {n:,} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(found, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
