"""The reading room: the loaded books as web pages, served by `bookrag mcp --http` at `/` beside
`/mcp`, through the MCP server's own pool (its read-only role, its limits).

    /                                   the library (rag.list_books)
    /books/<book>                       the book's tree: parts, chapters, each summary folded
    /books/<book>/<part>                a part's tree
    /books/<book>/<part>/<chapter>      a chapter: its summary, each sentence's anchor a link that
                                        highlights the paragraphs it cites (?hl=4-7#p4), then its
                                        paragraphs numbered § as citations number them (#p12)
    /search?q=…[&book=…]                the default search, hits linked to their paragraph
    /verify                             a form (GET) where a reader pastes an agent's answer; posted, each
                                        quote marked with its verdict (bookrag.quotes, rag.check_quotes),
                                        linked to the paragraph that holds its words

Server-rendered HTML (Jinja2 templates in templates/), no JavaScript, a print stylesheet; the
book's text is escaped and otherwise left as it is. Bad input (an unknown book, chapter or
paragraph, a path with '..', an over-long query) is a 4xx page of one sentence; the Host and
Origin checks of the MCP transport apply (http.py adds the bearer token around both).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import jinja2
import psycopg
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bookrag.cite import add_citations
from bookrag.errors import BookragError
from bookrag.quotes import check_answer, check_text
from bookrag.search import MODEL_REFUSED, SearchRequest, check_wordings, query_vectors, search
from mcp_server import room_pages
from mcp_server.room_pages import PageError
from mcp_server.server import AppState, Running, with_connection

TEMPLATES = Path(__file__).parent / "templates"
MAX_QUERY_CHARS = 2000  # as the MCP search tool
SEARCH_K = 10
HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(
        _templates.get_template(template).render(**context), status_code=status, headers=HEADERS
    )


async def _rendered(template: str, **context: Any) -> HTMLResponse:
    """_page in a worker thread: a chapter's page is CPU work the event loop must not wait for."""
    return await anyio.to_thread.run_sync(lambda: _page(template, **context))


def _error(status: int, message: str) -> HTMLResponse:
    return _page(
        "error.html.j2",
        status,
        title="Not found" if status == 404 else "Cannot show this page",
        message=message,
    )


def _in_thread[T](state: AppState, fn: Callable[[psycopg.Connection], T]) -> T:
    """fn on a pooled connection of the MCP server; its failures become PageErrors."""
    try:
        return with_connection(state, fn)
    except ToolError as exc:
        cause = exc.__cause__
        if isinstance(cause, (PoolTimeout, psycopg.OperationalError)) and not isinstance(
            cause, psycopg.errors.QueryCanceled
        ):
            raise PageError(503, str(exc)) from exc
        if isinstance(cause, (BookragError, psycopg.errors.InvalidParameterValue)):
            raise PageError(400, str(exc)) from exc
        raise PageError(500, str(exc)) from exc


def _state(request: Request) -> AppState:
    state = request.app.state.running.state
    if state is None:
        raise PageError(503, "the server is starting; reload the page in a moment")
    return state


async def _read[T](request: Request, fn: Callable[[psycopg.Connection], T]) -> T:
    state = _state(request)
    return await anyio.to_thread.run_sync(lambda: _in_thread(state, fn))


# --- pages -------------------------------------------------------------------------------


async def library(request: Request) -> Response:
    catalogue: room_pages.Catalogue = request.app.state.catalogue
    return await _rendered("library.html.j2", books=await _read(request, catalogue.books))


async def node(request: Request) -> Response:
    book, folder = request.path_params["book"], request.path_params.get("folder", "").rstrip("/")
    room_pages.check_folder(book, folder)
    highlight = room_pages.parse_highlight(request.query_params.get("hl"))
    catalogue: room_pages.Catalogue = request.app.state.catalogue
    page = await _read(request, lambda conn: room_pages.node_page(conn, catalogue, book, folder, highlight))
    if isinstance(page, room_pages.ChapterPage):
        return await _rendered("chapter.html.j2", page=page)
    return await _rendered("tree.html.j2", page=page)


def _search(
    state: AppState, query: str, book: str | None, also: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The default search (rag.search through bookrag.search; with other wordings of the question,
    rag.search_phrasings), embedding them before taking a connection, as the MCP search tool does;
    the corpus model is read again once if it changed."""
    req = SearchRequest(query, k=SEARCH_K, book=book, phrasings=also)
    for attempt in (1, 2):
        model = state.corpus_model()
        try:
            vectors = query_vectors(model, [query, *also]) if model else None
        except BookragError as exc:
            state.model = None
            raise PageError(503, str(exc)) from exc
        embedding, more = (vectors[0], list(vectors[1:]) or None) if vectors is not None else (None, None)
        try:
            # called at once, within this iteration: the loop variables cannot change under it
            return _in_thread(
                state,
                lambda conn: add_citations(conn, search(conn, req, embedding, model, more)),  # noqa: B023
            )
        except PageError as exc:
            if attempt == 2 or not str(exc).startswith(MODEL_REFUSED):
                raise
            state.model = None
    raise AssertionError("unreachable")


async def search_page(request: Request) -> Response:
    raw, book = request.query_params.get("q"), request.query_params.get("book") or None
    raw_also = [a for a in request.query_params.getlist("also") if a.strip()]
    query: str | None = None
    also: tuple[str, ...] = ()
    if raw is not None:  # checked before anything is embedded (a GET may carry any number of them)
        try:
            query, also = check_wordings(raw, raw_also, MAX_QUERY_CHARS)
        except BookragError as exc:
            raise PageError(400, str(exc)) from exc
    state, catalogue = _state(request), request.app.state.catalogue

    def work() -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, float]:
        books = _in_thread(state, catalogue.books)
        if book is not None and book not in {b["book"] for b in books}:
            raise PageError(
                404, f"no book {book[:200]!r} in the library; choose one from the list or search them all"
            )
        started = time.perf_counter()
        rows = _search(state, query, book, also) if query is not None else None
        return books, rows, (time.perf_counter() - started) * 1000

    books, rows, elapsed_ms = await anyio.to_thread.run_sync(work)
    return await _rendered(
        "search.html.j2",
        query=raw or "",
        also=raw_also,
        book=book,
        books=books,
        elapsed_ms=elapsed_ms,
        hits=None if rows is None else room_pages.search_hits(rows),
    )


async def verify_page(request: Request) -> Response:
    """GET: the form; POST (field `answer`): the answer's quotes, each with its verdict and a link to
    the paragraph holding its words."""
    answer, results = "", None
    if request.method == "POST":
        form = await request.form(max_files=0, max_fields=5)
        value = form.get("answer")
        answer = value if isinstance(value, str) else ""
        try:
            check_text(answer)
        except BookragError as exc:
            raise PageError(400, str(exc)) from exc
        if not answer.strip():
            raise PageError(400, "paste an answer to check: the text with its quotes and their citations")
        state = _state(request)
        results = await anyio.to_thread.run_sync(
            lambda: _in_thread(state, lambda conn: check_answer(conn, answer.replace("\r\n", "\n"), "")),
        )
    page = _page("verify.html.j2", answer=answer, results=results)
    # the form posts back here: with "no-referrer" a browser would send `Origin: null`, which the
    # Host/Origin check refuses; same-origin sends this server's origin, and nothing elsewhere
    page.headers["referrer-policy"] = "same-origin"
    return page


async def stylesheet(_request: Request) -> Response:
    return Response(
        (TEMPLATES / "room.css").read_text(encoding="utf-8"),
        media_type="text/css",
        headers={**HEADERS, "cache-control": "max-age=3600"},
    )


async def _page_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PageError)
    return _error(exc.status, str(exc))


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {
        404: "no such page in the reading room; start from the library at /",
        405: "the reading room only answers GET requests (and POST on /verify)",
    }.get(exc.status_code, str(exc.detail))
    return _error(exc.status_code, message)


async def _server_error(_request: Request, _exc: Exception) -> Response:
    return _error(500, "the reading room failed to build this page; the server's log says why")


class CheckHost:
    """The MCP transport's Host and Origin checks (DNS-rebinding protection), for the pages."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self.app, self.check = app, TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.check.validate_request(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def reading_room_app(running: Running, security: TransportSecuritySettings) -> ASGIApp:
    """The reading room as an ASGI app; `running` holds the MCP server's state while it runs."""
    app = Starlette(
        routes=[
            Route("/", library),
            Route("/search", search_page),
            Route("/verify", verify_page, methods=["GET", "POST"]),
            Route("/static/room.css", stylesheet),
            Route("/books/{book}", node),
            Route("/books/{book}/{folder:path}", node),
        ],
        exception_handlers={PageError: _page_error, HTTPException: _http_error, Exception: _server_error},
    )
    app.state.running = running
    app.state.catalogue = room_pages.Catalogue()
    return CheckHost(app, security)
