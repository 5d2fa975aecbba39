"""The one OpenAI-compatible client, for chat (summaries, written answers, phrasings) and
embeddings: built from Settings (OPENAI_BASE_URL, OPENAI_API_KEY, BOOKRAG_LLM_TIMEOUT,
BOOKRAG_LLM_RETRIES), its errors mapped here to one sentence each.

The openai SDK retries 429, 5xx, timeouts and dropped connections itself, with exponential
backoff (`retries` times); what outlives the retries, or is not worth retrying, becomes:
- a BookragError when every later request would fail too (the key refused, access denied, the
  model or endpoint unknown): the run stops;
- a RequestFailed (a BookragError) when this request failed and another may succeed (timeout,
  unreachable, rate limit, server error, a request the server refused): `summarize` records the
  node as failed and goes on, the other callers stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bookrag.config import Settings
from bookrag.errors import BookragError

if TYPE_CHECKING:
    from openai import OpenAI

Kind = Literal["chat", "embeddings"]

#: For each kind of request: the endpoint's name in a message, and the variable naming its model.
_ROLE = {
    "chat": ("the LLM endpoint", "BOOKRAG_LLM_MODEL"),
    "embeddings": ("the embedding endpoint", "BOOKRAG_EMBEDDING_MODEL"),
}


class RequestFailed(BookragError):
    """One request failed after the client's retries; another request may succeed."""


@dataclass(frozen=True)
class ClientConfig:
    base_url: str | None  # None: OpenAI's own
    api_key: str
    timeout: float = 300.0  # seconds per request
    retries: int = 5  # the SDK's retries, with backoff, on 429/5xx/timeouts/connection errors

    @classmethod
    def from_settings(cls, s: Settings) -> ClientConfig:
        return cls(s.openai_base_url, s.api_key, s.llm_timeout, s.llm_retries)


@dataclass(frozen=True)
class Reply:
    text: str  # the message's content, stripped ('' when none)
    finish_reason: str | None  # 'stop', 'length' (cut at max_tokens)…; None without a choice


class Client:
    """An OpenAI-compatible endpoint: chat() and embed(), each raising one-sentence errors."""

    def __init__(self, cfg: ClientConfig) -> None:
        from openai import OpenAI

        self.cfg = cfg
        self.sdk: OpenAI = OpenAI(
            base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout, max_retries=cfg.retries
        )

    @property
    def base_url(self) -> str:
        return str(self.sdk.base_url)

    def chat(self, model: str, messages: list[dict[str, str]], max_tokens: int | None = None) -> Reply:
        """The reply to a conversation at temperature 0 (max_tokens: the output's limit, if any)."""
        args: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
        if max_tokens is not None:
            args["max_tokens"] = max_tokens
        try:
            resp = self.sdk.chat.completions.create(**args)
        except Exception as exc:
            raise self.error(exc, "chat", model) from exc
        choice = resp.choices[0] if resp.choices else None
        if choice is None:
            return Reply("", None)
        return Reply((choice.message.content or "").strip(), choice.finish_reason)

    def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """One vector per text, in the texts' order."""
        try:
            resp = self.sdk.embeddings.create(model=model, input=texts)
        except Exception as exc:
            raise self.error(exc, "embeddings", model) from exc
        return [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]

    def error(self, exc: Exception, kind: Kind, model: str) -> BookragError:
        """The sentence for an exception the SDK raised (after its retries)."""
        import openai

        where, model_var = _ROLE[kind]
        url, cfg = self.base_url, self.cfg
        tries = f"after {cfg.retries} {'retry' if cfg.retries == 1 else 'retries'}"
        if isinstance(exc, openai.AuthenticationError):
            return BookragError(f"{where} {url} refused the API key (401): set OPENAI_API_KEY")
        if isinstance(exc, openai.PermissionDeniedError):
            return BookragError(f"{where} {url} denied access (403): {_said(exc)}")
        if isinstance(exc, openai.NotFoundError):
            return BookragError(
                f"model {model!r} not found at {url} (404): check {model_var} (and OPENAI_BASE_URL)"
            )
        if isinstance(exc, openai.APITimeoutError):  # an APIConnectionError: test it first
            return RequestFailed(
                f"{where} {url} did not answer within {cfg.timeout:g} s, {tries}: "
                "try again, or raise BOOKRAG_LLM_TIMEOUT"
            )
        if isinstance(exc, openai.APIConnectionError):
            return RequestFailed(
                f"cannot reach {where} {url} ({tries}): check OPENAI_BASE_URL and that it runs"
            )
        if isinstance(exc, openai.RateLimitError):
            return RequestFailed(
                f"{where} {url} is rate-limiting requests (429) {tries}: try again later, or raise BOOKRAG_LLM_RETRIES"
            )
        if isinstance(exc, openai.InternalServerError):
            return RequestFailed(f"{where} {url} answered {exc.status_code} {tries}: {_said(exc)}")
        if isinstance(exc, openai.APIStatusError):  # 400, 409, 422…: this request, as sent
            return RequestFailed(f"{where} {url} refused the request ({exc.status_code}): {_said(exc)}")
        return RequestFailed(f"{where} {url} failed: {exc}")


def _said(exc: Exception) -> str:
    """What the server said: its error's message, without the SDK's "Error code: N - " prefix."""
    body = getattr(exc, "body", None)
    said = body.get("message") if isinstance(body, dict) else None
    return str(said) if said else str(getattr(exc, "message", exc))


def client(s: Settings) -> Client:
    """The client the settings describe (OPENAI_BASE_URL, OPENAI_API_KEY, BOOKRAG_LLM_TIMEOUT,
    BOOKRAG_LLM_RETRIES)."""
    return Client(ClientConfig.from_settings(s))
