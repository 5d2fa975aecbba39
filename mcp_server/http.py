"""The MCP server over streamable HTTP, as a local service should be.

- Host and Origin headers are checked against the address the server is bound to (the SDK's
  DNS-rebinding protection): a web page cannot reach a 127.0.0.1 server through a rebound name.
- Beyond loopback a bearer token (BOOKRAG_MCP_TOKEN) is required; on loopback it is optional.
- Request bodies are capped (MAX_BODY_BYTES): a search call is a few hundred bytes.
- Answers are plain JSON bodies, not SSE streams (json_response).
- Every other path is the reading room (reading_room.py): the books as web pages, through the
  same pool, behind the same Host/Origin checks and token.
The token check is a few lines of ASGI written here because the SDK's own auth is OAuth
(issuer, resource server, token introspection), far more than a shared secret needs.
"""

from __future__ import annotations

import hmac
import ipaddress

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from bookrag.config import Settings
from bookrag.errors import BookragError
from mcp_server.reading_room import reading_room_app
from mcp_server.server import Running

MAX_BODY_BYTES = 64 * 1024
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def security_for(host: str, allowed: tuple[str, ...] = ()) -> TransportSecuritySettings:
    """Allowed Host and Origin values: loopback names always, the bound address, and the names
    remote clients use (BOOKRAG_MCP_ALLOWED_HOSTS: a server bound to 0.0.0.0 has no name of its own)."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    for name in (host, *allowed):
        if not is_loopback(name) and name not in ("0.0.0.0", "::"):
            names.add(f"[{name}]" if ":" in name else name)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        # with any port, or none (a client behind a proxy on 80/443 sends the bare name)
        allowed_hosts=sorted(f"{n}{port}" for n in names for port in (":*", "")),
        allowed_origins=sorted(
            f"{scheme}://{n}{port}" for n in names for scheme in ("http", "https") for port in (":*", "")
        ),
    )


class BearerToken:
    """Refuse any HTTP request without `Authorization: Bearer <token>` (401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"missing or wrong bearer token (BOOKRAG_MCP_TOKEN)\n",
                    }
                )
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, settings: Settings, host: str, running: Running) -> ASGIApp:
    """The MCP endpoint (/mcp) and the reading room (every other path); `running` is the one
    build_server filled for `server`, the state the pages read."""
    if not is_loopback(host) and not settings.mcp_token:
        raise BookragError(
            f"binding to {host} serves the corpus beyond this machine: set BOOKRAG_MCP_TOKEN to a "
            "secret that clients send as 'Authorization: Bearer <token>'"
        )
    if host in ("0.0.0.0", "::") and not settings.mcp_allowed_hosts:
        raise BookragError(
            f"binding to {host} answers any address of this machine, but clients' Host headers are "
            "checked: set BOOKRAG_MCP_ALLOWED_HOSTS to the names or addresses they use "
            "(e.g. books.example.org,192.0.2.2)"
        )
    # json_response: each call is answered with one JSON body rather than an SSE stream (the tools
    # send no progress notifications, and a stream costs a task and an event per call).
    security = security_for(host, settings.mcp_allowed_hosts)
    starlette = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        json_response=True,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=security,
    )
    # the reading room answers every other path, through the same pool, Host checks and token
    starlette.router.routes.append(Mount("", app=reading_room_app(running, security)))
    app: ASGIApp = starlette
    return BearerToken(app, settings.mcp_token) if settings.mcp_token else app


def own_url(settings: Settings, host: str, port: int) -> str:
    """Where clients reach the server bound to host:port: `http://host:port`; for a server bound to
    every address (0.0.0.0, ::), the first name of BOOKRAG_MCP_ALLOWED_HOSTS."""
    if host in ("0.0.0.0", "::"):
        host = settings.mcp_allowed_hosts[0] if settings.mcp_allowed_hosts else "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def serve_http(server: MCPServer, settings: Settings, host: str, port: int, running: Running) -> None:
    import sys

    import uvicorn

    address = own_url(settings, host, port)
    print(f"bookrag: MCP at {address}/mcp, reading room at {address}/", file=sys.stderr, flush=True)
    uvicorn.run(http_app(server, settings, host, running), host=host, port=port, log_level="warning")
