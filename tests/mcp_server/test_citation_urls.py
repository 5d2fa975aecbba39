"""`bookrag mcp --http --port N` links its citations to its own reading room (http://127.0.0.1:N),
unless BOOKRAG_READING_ROOM_URL names another (issue 43: a server on 8799 printed links to 8765)."""

from __future__ import annotations

import anyio
import pytest

from bookrag.config import Settings
from mcp_server.http import own_url
from tests.mcp_server.test_server import http_session, start_http, stop_http


def first_url(base: str) -> str:
    async def main() -> str:
        async with http_session(f"{base}/mcp") as session:
            r = await session.call_tool("search", {"query": "le péage sur le pont", "k": 1})
            assert not r.is_error, r.content
            return r.structured_content["hits"][0]["citation"]["url"]

    return anyio.run(main)


@pytest.mark.parametrize("room", [None, "https://books.example.org/room"])
def test_citations_link_to_the_servers_own_port(corpus_url, corpus_home, room):
    proc, base = start_http(corpus_url, corpus_home, **({"BOOKRAG_READING_ROOM_URL": room} if room else {}))
    try:
        url = first_url(base)
    finally:
        stop_http(proc)
    assert url.startswith(f"{room or base}/books/traite-des-echanges/"), url


def test_a_server_on_every_address_links_to_the_name_clients_use(tmp_path):
    settings = Settings(tmp_path, None, None, "local", None, 400, mcp_allowed_hosts=("books.example.org",))
    assert own_url(settings, "0.0.0.0", 8799) == "http://books.example.org:8799"
    assert own_url(settings, "::1", 8799) == "http://[::1]:8799"
    assert own_url(settings, "127.0.0.1", 8799) == "http://127.0.0.1:8799"
