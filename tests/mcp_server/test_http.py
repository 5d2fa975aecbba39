"""The HTTP transport as a local service should be (issue 13): Host and Origin checked against
DNS rebinding, bodies capped, a bearer token required beyond loopback and enforced when set."""

from __future__ import annotations

import dataclasses

import anyio
import httpx2 as httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bookrag.errors import BookragError
from mcp_server.http import MAX_BODY_BYTES, http_app, is_loopback
from mcp_server.server import Running, build_server
from tests.conftest import settings_for
from tests.mcp_server.test_server import start_http, stop_http

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def plain(corpus_url, corpus_home):
    proc, base = start_http(corpus_url, corpus_home)
    yield f"{base}/mcp"
    stop_http(proc)


@pytest.fixture
def guarded(corpus_url, corpus_home):
    proc, base = start_http(corpus_url, corpus_home, BOOKRAG_MCP_TOKEN="s3cret-token")
    yield f"{base}/mcp"
    stop_http(proc)


def test_host_and_origin_are_checked(plain):
    assert httpx.post(plain, json=INIT, headers=HEADERS, timeout=60).status_code == 200
    r = httpx.post(plain, json=INIT, headers={**HEADERS, "host": "evil.example:80"}, timeout=60)
    assert (r.status_code, r.text) == (421, "Invalid Host header")
    r = httpx.post(plain, json=INIT, headers={**HEADERS, "origin": "http://evil.example"}, timeout=60)
    assert (r.status_code, r.text) == (403, "Invalid Origin header")
    assert (
        httpx.post(
            plain, json=INIT, headers={**HEADERS, "origin": "http://localhost:3000"}, timeout=60
        ).status_code
        == 200
    )


def test_request_bodies_are_capped(plain):
    big = {**INIT, "params": {**INIT["params"], "padding": "x" * (MAX_BODY_BYTES + 1)}}
    assert httpx.post(plain, json=big, headers=HEADERS, timeout=60).status_code == 413


def test_the_token_is_required_when_set(guarded):
    r = httpx.post(guarded, json=INIT, headers=HEADERS, timeout=60)
    assert (r.status_code, r.text) == (401, "missing or wrong bearer token (BOOKRAG_MCP_TOKEN)\n")
    assert (
        httpx.post(
            guarded, json=INIT, headers={**HEADERS, "authorization": "Bearer wrong"}, timeout=60
        ).status_code
        == 401
    )

    async def call() -> bool:
        headers = {"authorization": "Bearer s3cret-token"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(guarded, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return not (await session.call_tool("list_books", {})).is_error

    assert anyio.run(call)


def test_binding_beyond_loopback_needs_a_token(corpus_home):
    running = Running()
    server = build_server(settings_for(corpus_home, "postgresql:///none"), running=running)
    with pytest.raises(BookragError) as err:
        http_app(server, settings_for(corpus_home, "postgresql:///none"), "0.0.0.0", running)
    assert str(err.value) == (
        "binding to 0.0.0.0 serves the corpus beyond this machine: set BOOKRAG_MCP_TOKEN to a "
        "secret that clients send as 'Authorization: Bearer <token>'"
    )
    assert (
        is_loopback("127.0.0.1")
        and is_loopback("::1")
        and is_loopback("127.0.0.2")
        and not is_loopback("192.168.1.5")
    )


def test_binding_to_every_address_needs_the_names_clients_use(corpus_home):
    settings = dataclasses.replace(settings_for(corpus_home, "postgresql:///none"), mcp_token="t")
    with pytest.raises(BookragError) as err:
        http_app(build_server(settings, running=Running()), settings, "0.0.0.0", Running())
    assert str(err.value).startswith(
        "binding to 0.0.0.0 answers any address of this machine, but clients' Host "
        "headers are checked: set BOOKRAG_MCP_ALLOWED_HOSTS"
    )


def test_a_remote_client_reaches_the_server_by_an_allowed_name(corpus_url, corpus_home):
    """In process (no traffic leaves the machine): a server bound to 0.0.0.0 with a token and
    BOOKRAG_MCP_ALLOWED_HOSTS answers a client that calls it by one of those names, and refuses
    another name, a missing token, and a wrong Origin."""
    from starlette.testclient import TestClient

    settings = dataclasses.replace(
        settings_for(corpus_home, corpus_url),
        mcp_token="s3cret",
        mcp_allowed_hosts=("192.0.2.2", "books.example.org"),
    )
    running = Running()
    app = http_app(build_server(settings, running=running), settings, "0.0.0.0", running)
    auth = {**HEADERS, "authorization": "Bearer s3cret"}
    with TestClient(app, base_url="http://192.0.2.2:8765") as client:
        assert client.post("/mcp", json=INIT, headers=auth).status_code == 200
        assert (
            client.post("/mcp", json=INIT, headers={**auth, "host": "books.example.org:443"}).status_code
            == 200
        )
        assert client.post("/mcp", json=INIT, headers={**auth, "host": "localhost:8765"}).status_code == 200
        r = client.post("/mcp", json=INIT, headers={**auth, "host": "evil.example:8765"})
        assert (r.status_code, r.text) == (421, "Invalid Host header")
        r = client.post("/mcp", json=INIT, headers={**auth, "origin": "http://evil.example"})
        assert (r.status_code, r.text) == (403, "Invalid Origin header")
        assert (
            client.post(
                "/mcp", json=INIT, headers={**auth, "origin": "https://books.example.org"}
            ).status_code
            == 200
        )
        assert client.post("/mcp", json=INIT, headers=HEADERS).status_code == 401


def test_allowed_hosts_are_names_not_urls(monkeypatch):
    from bookrag.config import load_settings

    monkeypatch.setenv(
        "BOOKRAG_MCP_ALLOWED_HOSTS", " books.example.org , 192.0.2.2,2001:db8::1, [2001:db8::2]"
    )
    assert load_settings().mcp_allowed_hosts == (
        "books.example.org",
        "192.0.2.2",
        "2001:db8::1",
        "2001:db8::2",
    )
    for bad in ("http://books.example.org", "books.example.org:8765", "*.example.org"):
        monkeypatch.setenv("BOOKRAG_MCP_ALLOWED_HOSTS", bad)
        with pytest.raises(
            BookragError, match=r"BOOKRAG_MCP_ALLOWED_HOSTS: .* is not a host name or address"
        ):
            load_settings()
