"""Apply yoyo migrations (migrations/*.sql) to a database."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict
from yoyo import get_backend, read_migrations
from yoyo.exceptions import LockTimeout

from bookrag.errors import BookragError
from bookrag.functions import MIGRATIONS_DIR


def yoyo_url(url: str) -> str:
    """yoyo wants a URL with the psycopg 3 scheme (plain postgresql:// would ask for psycopg2);
    accept any libpq connection string (URL or key=value) and rebuild it."""
    params = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    host = params.pop("host", "")
    port = params.pop("port", "")
    dbname = quote(params.pop("dbname", ""), safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    if host.startswith("/"):  # a unix-socket folder cannot sit in the netloc
        params["host"] = host
        host = ""
    netloc = f"{auth}{host}{':' + port if port and host else ''}"
    if port and not host:
        params["port"] = port
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql+psycopg://{netloc}/{dbname}{query}"


def install_model_scans(connection, only_missing: bool = False) -> None:
    """Write the registered model's kNN scans (rag._install_model_scans) over the stand-ins that
    the migrations install (rag._knn, rag._knn_sentences: correct, but planned per call); with
    only_missing, only when the installed rag._knn is not this model's (a stand-in, or another
    model's), and only when one model is registered (with several every search refuses anyway).
    The written scan names its model (`$1 = 'model'`, rag._scan_sql's text)."""
    cursor = connection.cursor()
    cursor.execute("SELECT to_regprocedure('rag._install_model_scans(text,integer)') IS NOT NULL")
    if not cursor.fetchone()[0]:  # migrations older than 0023 (or another folder's)
        return
    cursor.execute(
        "SELECT rag._install_model_scans(m.model, m.dimension) FROM rag.embedding_models m "
        "WHERE NOT %s OR ((SELECT count(*) FROM rag.embedding_models) = 1 AND NOT EXISTS (SELECT 1 FROM pg_proc p "
        "WHERE p.oid = to_regprocedure('rag._knn(text,vector,integer,text,integer[],integer[])') "
        "AND strpos(p.prosrc, format('$1 = %%L', m.model)) > 0)) ORDER BY m.model",
        (only_missing,),
    )
    connection.commit()


#: Why migrations cannot run in a read-only session (PGOPTIONS, or the role's or database's setting).
READ_ONLY = (
    "the database session is read-only (default_transaction_read_only is on: PGOPTIONS, or the "
    "role's or the database's setting) and the schema needs migrating; connect as a role that may write"
)


def _read_only(connection) -> bool:
    cursor = connection.cursor()
    cursor.execute("SHOW transaction_read_only")
    (value,) = cursor.fetchone()
    connection.rollback()
    return value == "on"


def apply_migrations(url: str, folder: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations under yoyo's lock; return the ids applied (empty when up to date)."""
    backend = get_backend(yoyo_url(url))
    try:
        migrations = read_migrations(str(folder))
        if _read_only(backend.connection):  # yoyo's lock is a row it writes: it would time out
            if backend.to_apply(migrations):
                raise BookragError(READ_ONLY)
            return []  # up to date: nothing to write
        try:
            with backend.lock():
                pending = backend.to_apply(migrations)
                backend.apply_migrations(pending)
                # after migrations (their text may have changed); otherwise only when missing, so the
                # commands that migrate on start do not re-create them each time
                install_model_scans(backend.connection, only_missing=not pending)
        except LockTimeout:  # yoyo's lock row, held by another process (or left by a crash)
            raise BookragError(
                "another bookrag has been migrating this database for over 10 s (yoyo's lock is taken); "
                "let it finish, then run the command again"
            ) from None
    finally:  # closed now, not whenever it is garbage-collected: an open session blocks CREATE DATABASE … TEMPLATE
        backend.connection.close()
    return [m.id for m in pending]
