"""A small OpenAI-compatible server for tests (stdlib http.server in a thread).

It listens on 127.0.0.1 (ephemeral port), records every request (prompt, model, max_tokens,
headers) and answers POST /v1/chat/completions with a deterministic summary (`summary_for`)
whose sentence ends with a valid anchor on the units the prompt numbers, and POST
/v1/embeddings with a deterministic vector per input (`vector_for`, `dimension` floats; the
rules below match an embedding request on its inputs, joined by newlines). Rules make it
misbehave: answer an HTTP error status N times (429/500 carry `retry-after-ms` so the openai
client's backoff stays short), hang until the client gives up, answer a given text (e.g. with
broken anchors), or run a callback before answering. For each request, the first rule (in the
order they were added) that applies is used: its prompt (the conversation's first message)
contains the rule's `match` (any prompt when match is None) and the rule has not yet been used
`times` times (None: no limit).

    with FakeOpenAI() as server:
        server.fail(429, times=2)
        LLMConfig(model="fake-model", base_url=server.base_url, api_key="test", ...)
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_SUBJECTS = (
    re.compile(r"Résume la section suivante : (.+?)\.\n"),  # section.md.j2
    re.compile(r"Partie à résumer : (.+?)\.\n"),  # part.md.j2
    re.compile(r"résumés partiels consécutifs de : (.+?) \(«"),  # merge.md.j2
    re.compile(r"l'ouvrage entier « (.+?) »"),  # book.md.j2
)
_SLICE = re.compile(r"Tu ne reçois que (?:la partie|le lot) (\d+) sur (\d+)")
_SECTION_TEXT = "Texte de la section :\n"
_PARTIALS = "\n## Résumé partiel "
_NUMBERED_PARAGRAPH = re.compile(r"(?m)^§(\d+) ")  # section.md.j2: "§3 text"
_NUMBERED_HEADING = re.compile(r"(?m)^## §(\d+) ")  # part.md.j2, book.md.j2: "## §2 — heading"
_CITED = re.compile(r"§(\d+)")  # in the partial summaries of a merge


def subject_of(prompt: str) -> str:
    """What the prompt asks to summarise (its heading line), or the first words of the prompt."""
    for pattern in _SUBJECTS:
        m = pattern.search(prompt)
        if m:
            return m.group(1)
    return " ".join(prompt.split()[:6])


def count_inputs(prompt: str) -> int:
    """Paragraphs of a section prompt; '## ' input headings of the other prompts."""
    if _SECTION_TEXT in prompt:
        text = prompt.split(_SECTION_TEXT, 1)[1]
        return len([p for p in re.split(r"\n\s*\n", text) if p.strip()])
    return len(re.findall(r"(?m)^## ", prompt))


def units_seen(prompt: str) -> list[int]:
    """The unit numbers a prompt gives (a merge: those its partial summaries cite), in order."""
    if _PARTIALS in prompt:
        return [int(n) for n in _CITED.findall(prompt.split(_PARTIALS, 1)[1])]
    if _SECTION_TEXT in prompt:
        return [int(n) for n in _NUMBERED_PARAGRAPH.findall(prompt.split(_SECTION_TEXT, 1)[1])]
    return [int(n) for n in _NUMBERED_HEADING.findall(prompt)]


def vector_for(text: str, dimension: int) -> list[float]:
    """The fake embedding of a text: `dimension` numbers in [-1, 1) drawn from its sha256."""
    out: list[float] = []
    block = 0
    while len(out) < dimension:
        digest = hashlib.sha256(f"{block}:{text}".encode()).digest()
        out += [b / 128 - 1 for b in digest]
        block += 1
    return out[:dimension]


def summary_for(prompt: str) -> str:
    """The deterministic answer to a prompt: its subject, the slice it sees, its number of inputs
    and a digest of the whole prompt (so a changed input changes the answer), ending with an
    anchor on the first and last units it sees (1 and the number of inputs when unnumbered)."""
    m = _SLICE.search(prompt)
    part = f" [tranche {m.group(1)}/{m.group(2)}]" if m else ""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:10]
    seen = units_seen(prompt) or [1, max(count_inputs(prompt), 1)]
    first, last = min(seen), max(seen)
    anchor = f"[§{first}]" if first == last else f"[§{first}, §{last}]"
    return f"Résumé de {subject_of(prompt)}{part} : {count_inputs(prompt)} entrées (empreinte {digest}) {anchor}."


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict
    status: int = 0
    answer: str | None = None

    @property
    def prompt(self) -> str:
        """The conversation's first message (a retry repeats it, then the refused reply and the
        correction); an embedding request's inputs, one per line."""
        if "messages" not in self.body:
            given = self.body.get("input", "")
            return "\n".join(given) if isinstance(given, list) else str(given)
        return self.body["messages"][0]["content"]

    @property
    def messages(self) -> list[dict]:
        return self.body["messages"]

    @property
    def model(self) -> str:
        return self.body.get("model")

    @property
    def max_tokens(self) -> int | None:
        return self.body.get("max_tokens", self.body.get("max_completion_tokens"))


@dataclass
class Rule:
    match: str | None
    times: int | None  # None: every matching request
    status: int = 200
    hang: bool = False
    finish_reason: str = "stop"
    callback: Callable[[Recorded], None] | None = None
    answer: str | Callable[[Recorded], str] | None = None  # None: summary_for(prompt)
    used: int = 0

    def applies(self, prompt: str) -> bool:
        return (self.times is None or self.used < self.times) and (self.match is None or self.match in prompt)


_ERRORS = {
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    404: (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    429: ("Rate limit reached, retry shortly.", "rate_limit_error", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
}


@dataclass
class FakeOpenAI:
    models: set[str] | None = None  # known models (None: any); others get 404 model_not_found
    retry_after_ms: int = 10
    hang_seconds: float = 30.0  # a hung request is released at stop() at the latest
    dimension: int = 8  # the length of the vectors /v1/embeddings answers
    requests: list[Recorded] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- control ---------------------------------------------------------------------

    def fail(self, status: int, times: int | None = 1, match: str | None = None) -> Rule:
        return self._add(Rule(match, times, status=status))

    def hang(self, times: int | None = None, match: str | None = None) -> Rule:
        return self._add(Rule(match, times, hang=True))

    def truncate(self, times: int | None = 1, match: str | None = None) -> Rule:
        """Answer with finish_reason "length" (the model hit max_tokens)."""
        return self._add(Rule(match, times, finish_reason="length"))

    def reply(
        self, answer: str | Callable[[Recorded], str], times: int | None = 1, match: str | None = None
    ) -> Rule:
        """Answer with this text (or answer(request)) instead of summary_for."""
        return self._add(Rule(match, times, answer=answer))

    def before_answer(
        self,
        callback: Callable[[Recorded], None],
        times: int | None = None,
        match: str | None = None,
        hang: bool = False,
    ) -> Rule:
        """Run callback(request) in the server thread before answering (then hang, if asked)."""
        return self._add(Rule(match, times, hang=hang, callback=callback))

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.rules.clear()

    @property
    def prompts(self) -> list[str]:
        return [r.prompt for r in self.requests]

    @property
    def answered(self) -> list[Recorded]:
        """The requests that got a summary (status 200)."""
        return [r for r in self.requests if r.status == 200]

    # --- lifecycle -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=lambda: self._server.serve_forever(poll_interval=0.05), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- protocol --------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        rec = Recorded(h.path, {k.lower(): v for k, v in h.headers.items()}, body)
        with self._lock:
            self.requests.append(rec)
            asked = body.get("messages") or body.get("input")
            rule = next((r for r in self.rules if r.applies(rec.prompt if asked else "")), None)
            if rule is not None:
                rule.used += 1
        embeddings = h.path.rstrip("/").endswith("/embeddings")
        if not embeddings and not h.path.rstrip("/").endswith("/chat/completions"):
            return self._error(h, rec, 404, f"unknown path {h.path}")
        if rule is not None and rule.callback is not None:
            rule.callback(rec)
        if rule is not None and rule.hang:
            self._release.wait(self.hang_seconds)
            rec.status = -1  # never answered in time
            return self._send(h, 200, self._completion(rec, summary_for(rec.prompt), "stop"))
        if rule is not None and rule.status != 200:
            return self._error(h, rec, rule.status)
        if self.models is not None and rec.model not in self.models:
            return self._error(
                h, rec, 404, f"The model `{rec.model}` does not exist or you do not have access to it."
            )
        if embeddings:
            rec.status = 200
            return self._send(h, 200, self._embeddings(rec))
        rec.status = 200
        answer = rule.answer if rule is not None else None
        rec.answer = (
            summary_for(rec.prompt) if answer is None else answer if isinstance(answer, str) else answer(rec)
        )
        self._send(h, 200, self._completion(rec, rec.answer, rule.finish_reason if rule else "stop"))

    def _embeddings(self, rec: Recorded) -> dict:
        """Floats, or base64 of little-endian float32 when asked (the openai SDK asks for it)."""
        given = rec.body.get("input", "")
        texts = given if isinstance(given, list) else [given]
        vectors = [vector_for(str(t), self.dimension) for t in texts]
        encoded: list[str] = []
        if rec.body.get("encoding_format") == "base64":
            encoded = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
        return {
            "object": "list",
            "model": rec.model,
            "data": [
                {"object": "embedding", "index": i, "embedding": encoded[i] if encoded else v}
                for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": len(rec.prompt.split()), "total_tokens": len(rec.prompt.split())},
        }

    def _completion(self, rec: Recorded, text: str, finish_reason: str) -> dict:
        return {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": rec.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": len(rec.prompt.split()),
                "completion_tokens": len(text.split()),
                "total_tokens": len(rec.prompt.split()) + len(text.split()),
            },
        }

    def _error(
        self, h: BaseHTTPRequestHandler, rec: Recorded, status: int, message: str | None = None
    ) -> None:
        rec.status = status
        default, kind, code = _ERRORS.get(status, ("error", "server_error", None))
        headers = {"retry-after-ms": str(self.retry_after_ms)} if status == 429 or status >= 500 else {}
        self._send(
            h,
            status,
            {"error": {"message": message or default, "type": kind, "param": None, "code": code}},
            headers,
        )

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler, status: int, payload: dict, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout, Ctrl-C)
            pass
