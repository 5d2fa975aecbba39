"""bookrag.openai_client, the one client for chat and embeddings, against the local stand-in
server (tests/fakes/openai_server.py): built from the settings (base URL, key, timeout, retries),
retrying what is worth retrying, and turning every failure into one sentence, the same way for
chat and for embeddings."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from bookrag.config import load_settings
from bookrag.errors import BookragError
from bookrag.openai_client import Client, ClientConfig, RequestFailed, client
from tests.fakes.openai_server import FakeOpenAI, vector_for

KINDS = ("chat", "embeddings")
ENDPOINT = {"chat": "the LLM endpoint", "embeddings": "the embedding endpoint"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def call(c: Client, kind: str) -> object:
    if kind == "chat":
        return c.chat("fake-model", [{"role": "user", "content": "Bonjour."}])
    return c.embed("fake-embedder", ["Bonjour.", "Le péage du pont."])


def test_the_client_is_built_from_the_settings(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "s3cret")
    monkeypatch.setenv("BOOKRAG_LLM_TIMEOUT", "7.5")
    monkeypatch.setenv("BOOKRAG_LLM_RETRIES", "2")
    c = client(load_settings())
    assert c.cfg == ClientConfig(fake.base_url, "s3cret", 7.5, 2)
    assert c.sdk.timeout == 7.5 and c.sdk.max_retries == 2
    reply = call(c, "chat")
    vectors = call(c, "embeddings")
    assert reply.text.startswith("Résumé de Bonjour.") and reply.finish_reason == "stop"
    assert vectors == [vector_for("Bonjour.", 8), vector_for("Le péage du pont.", 8)]  # exact in float32
    assert [r.path for r in fake.requests] == ["/v1/chat/completions", "/v1/embeddings"]
    assert {r.headers["authorization"] for r in fake.requests} == {"Bearer s3cret"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [429, 500])
def test_transient_errors_are_retried_then_succeed(fake, kind, status):
    fake.fail(status, times=2)
    call(Client(ClientConfig(fake.base_url, "k", timeout=10, retries=2)), kind)
    assert [r.status for r in fake.requests] == [status, status, 200]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "status,said",
    [
        (429, "is rate-limiting requests (429) after 1 retry: try again later, or raise BOOKRAG_LLM_RETRIES"),
        (500, "answered 500 after 1 retry: The server had an error while processing your request."),
    ],
)
def test_a_transient_error_outliving_the_retries_is_one_sentence(fake, kind, status, said):
    fake.fail(status, times=None)
    with pytest.raises(RequestFailed) as err:
        call(Client(ClientConfig(fake.base_url, "k", timeout=10, retries=1)), kind)
    assert str(err.value) == f"{ENDPOINT[kind]} {fake.base_url}/ {said}"
    assert len(fake.requests) == 2  # the request and one retry


@pytest.mark.parametrize("kind", KINDS)
def test_a_timeout_is_retried_then_one_sentence(fake, kind):
    fake.hang(times=None)
    with pytest.raises(RequestFailed) as err:
        call(Client(ClientConfig(fake.base_url, "k", timeout=0.5, retries=1)), kind)
    assert str(err.value) == (
        f"{ENDPOINT[kind]} {fake.base_url}/ did not answer within 0.5 s, after 1 retry: "
        "try again, or raise BOOKRAG_LLM_TIMEOUT"
    )
    assert len(fake.requests) == 2  # the request and one retry, neither answered


@pytest.mark.parametrize("kind", KINDS)
def test_an_unreachable_endpoint_is_one_sentence(fake, kind):
    url = fake.base_url
    fake.stop()  # nothing listens there any more
    with pytest.raises(RequestFailed) as err:
        call(Client(ClientConfig(url, "k", timeout=5, retries=0)), kind)
    assert str(err.value) == (
        f"cannot reach {ENDPOINT[kind]} {url}/ (after 0 retries): check OPENAI_BASE_URL and that it runs"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_what_every_request_would_meet_is_a_plain_error_and_not_retried(fake, kind):
    c = Client(ClientConfig(fake.base_url, "k", timeout=10, retries=3))
    model, variable = (
        ("fake-model", "BOOKRAG_LLM_MODEL")
        if kind == "chat"
        else ("fake-embedder", "BOOKRAG_EMBEDDING_MODEL")
    )
    expected = {
        401: f"{ENDPOINT[kind]} {fake.base_url}/ refused the API key (401): set OPENAI_API_KEY",
        403: f"{ENDPOINT[kind]} {fake.base_url}/ denied access (403): error",
        404: f"model {model!r} not found at {fake.base_url}/ (404): check {variable} (and OPENAI_BASE_URL)",
    }
    for status, sentence in expected.items():
        fake.reset()
        fake.fail(status, times=None)
        with pytest.raises(BookragError) as err:
            call(c, kind)
        assert type(err.value) is BookragError, status  # not a RequestFailed: the run stops
        assert str(err.value) == sentence
        assert len(fake.requests) == 1  # not retried


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_request_fails_that_request_only(fake, kind):
    fake.fail(400, times=1)
    c = Client(ClientConfig(fake.base_url, "k", timeout=10, retries=3))
    with pytest.raises(RequestFailed) as err:
        call(c, kind)
    assert str(err.value) == f"{ENDPOINT[kind]} {fake.base_url}/ refused the request (400): error"
    assert len(fake.requests) == 1
    call(c, kind)  # the next request goes through


def test_the_openai_embedder_uses_the_one_client(fake, monkeypatch):
    """BOOKRAG_EMBEDDER=openai embeds through the same client: its settings and its sentences."""
    from loader.embedding import get_embedder

    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOOKRAG_LLM_RETRIES", "1")
    embedder = dataclasses.replace(get_embedder("openai", "fake-embedder", 8), batch=2)
    texts = ["un", "deux", "trois"]
    assert embedder.passages(texts).tolist() == [vector_for(t, 8) for t in texts]
    assert [r.body["input"] for r in fake.requests] == [["un", "deux"], ["trois"]]  # in batches
    fake.reset()
    fake.fail(500, times=None)
    with pytest.raises(RequestFailed, match=r"^the embedding endpoint .* answered 500 after 1 retry: "):
        embedder.query("un")
    assert len(fake.requests) == 2
