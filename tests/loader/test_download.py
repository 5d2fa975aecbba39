"""A fresh machine without BOOKRAG_SOURCES: `prepare` and `demo` fetch the the Gutenberg site files
the manifests name into .bookrag/downloads/, checked against their sha256. A local HTTP server
stands in for the Gutenberg site, serving the files of the raw books folder (../shared/books): a
good copy, a copy with one byte changed, a connection dropped halfway, and no server at all.
Nothing half-written is ever kept."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bookrag.cli import main
from bookrag.config import DEFAULT_HOME

BOOKS = Path(os.environ.get("BOOKRAG_SOURCES") or DEFAULT_HOME.parent / "shared" / "books")
BASTIAT = "bastiat-sophismes-economiques"
RAW = "bastiat-oeuvres-tome-4/pg46625-8.txt"
SHA = "b56307b4c94b532368933edd940ee3844b93d8e9b7aae7e9e21cc1cbb0a9e878"

pytestmark = pytest.mark.skipif(not (BOOKS / RAW).is_file(), reason=f"no raw books at {BOOKS}")


class Gutenberg(BaseHTTPRequestHandler):
    """GET /<mode>/<folder>/<file>: mode ok (the file), bad (one byte changed), drop (half of it,
    then the connection closes although the whole length was announced)."""

    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        Gutenberg.requests.append(self.path)
        mode, rel = self.path.lstrip("/").split("/", 1)
        data = (BOOKS / rel).read_bytes()
        if mode == "bad":
            data = data[:1000] + bytes([data[1000] ^ 1]) + data[1001:]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if mode == "drop" else data)
        if mode == "drop":
            self.wfile.flush()
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def mirror() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gutenberg)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def fresh_clone(tmp_path: Path, base_url: str, books: tuple[str, ...] = (BASTIAT,)) -> Path:
    """The checkout's manifests and committed summaries, no raw books, each manifest's URL
    pointing at base_url/<folder>/<file> instead of the Gutenberg site."""
    home = tmp_path / "clone"
    for book in books:
        shutil.copytree(
            DEFAULT_HOME / "corpus" / book,
            home / "corpus" / book,
            ignore=shutil.ignore_patterns("source.md", "source.md.jsonl"),
        )
        manifest = home / "corpus" / book / "book.toml"
        text = manifest.read_text(encoding="utf-8")
        folder = re.search(r'^folder = "([^"]+)"', text, re.M).group(1)
        text = re.sub(
            r'^url = "https://www\.gutenberg\.org/[^"]*/([^/"]+?)-8\.txt"',
            lambda m, folder=folder: f'url = "{base_url}/{folder}/pg{m.group(1)}-8.txt"',
            text,
            flags=re.M,
        )
        manifest.write_text(text, encoding="utf-8")
    return home


@pytest.fixture
def env(monkeypatch):
    for name in ("BOOKRAG_SOURCES", "DATABASE_URL", "BOOKRAG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def downloads(home: Path) -> list[str]:
    folder = home / ".bookrag" / "downloads"
    return (
        sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        if folder.exists()
        else []
    )


def by_hand(home: Path, url: str) -> str:
    return (
        f"download {url} and put it at {home}/.bookrag/downloads/{BASTIAT}/pg46625-8.txt, or set BOOKRAG_SOURCES "
        f"to a folder holding {RAW}"
    )


def test_prepare_downloads_checks_and_keeps_the_file(tmp_path, mirror, env, capsys):
    home = fresh_clone(tmp_path, f"{mirror}/ok")
    env.setenv("BOOKRAG_HOME", str(home))
    before = len(Gutenberg.requests)
    assert main(["prepare", BASTIAT]) == 0
    out = capsys.readouterr()
    assert out.out == f"{BASTIAT}: 41 source files\n"
    assert out.err == f"downloading {mirror}/ok/{RAW} into {home}/.bookrag/downloads/{BASTIAT}/\n"
    assert downloads(home) == [f"{BASTIAT}/pg46625-8.txt"]
    kept = home / ".bookrag" / "downloads" / BASTIAT / "pg46625-8.txt"
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == SHA
    assert main(["prepare", BASTIAT]) == 0  # kept: not fetched again
    assert capsys.readouterr().err == "" and len(Gutenberg.requests) == before + 1


def test_a_wrong_checksum_keeps_nothing(tmp_path, mirror, env, capsys):
    home = fresh_clone(tmp_path, f"{mirror}/bad")
    env.setenv("BOOKRAG_HOME", str(home))
    assert main(["prepare", BASTIAT]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    got = hashlib.sha256(
        bytearray(b ^ (i == 1000) for i, b in enumerate((BOOKS / RAW).read_bytes()))
    ).hexdigest()
    assert err == (
        f"error: {mirror}/bad/{RAW} sent a file whose sha256 is {got}, not the manifest's {SHA}, so it was not "
        f"kept: {by_hand(home, f'{mirror}/bad/{RAW}')}"
    )
    assert downloads(home) == [] and not list((home / "corpus").rglob("source.md"))


def test_a_dropped_connection_keeps_nothing(tmp_path, mirror, env, capsys):
    home = fresh_clone(tmp_path, f"{mirror}/drop")
    env.setenv("BOOKRAG_HOME", str(home))
    assert main(["prepare", BASTIAT]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (
        f"error: cannot download {mirror}/drop/{RAW} (the connection dropped before the end of the file): "
        f"{by_hand(home, f'{mirror}/drop/{RAW}')}"
    )
    assert downloads(home) == [] and not list((home / "corpus").rglob("source.md"))


def test_offline_one_sentence_says_what_to_download_and_where(tmp_path, env, capsys):
    home = fresh_clone(tmp_path, "http://127.0.0.1:1", (BASTIAT, "tocqueville-democratie-en-amerique"))
    env.setenv("BOOKRAG_HOME", str(home))
    for argv in (["prepare", BASTIAT], ["demo"]):
        assert main(argv) == 1
        err = capsys.readouterr().err.splitlines()[-1]
        assert err == (
            f"error: cannot download http://127.0.0.1:1/{RAW} ([Errno 111] Connection refused): "
            f"{by_hand(home, f'http://127.0.0.1:1/{RAW}')}"
        )
        assert downloads(home) == []
