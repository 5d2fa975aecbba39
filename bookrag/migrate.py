"""Apply yoyo migrations (migrations/*.sql) to a database."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict
from yoyo import get_backend, read_migrations

from bookrag.functions import MIGRATIONS_DIR, recorded_texts


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


def regenerate_model_searches(connection, only_missing: bool = False, folder: Path = MIGRATIONS_DIR) -> None:
    """Rebuild the registered model's generated default search (rag._install_model_search), so
    its text follows the template the migrations installed; with only_missing, only when the
    installed rag._default_search was not generated for that model (the stand-in its file
    installs, or another model's: a database migrated before whose regeneration failed, or that
    another tool migrated), and only when one model is registered (with several, every search
    refuses anyway). The generated body is recognised by its model check, which names the model
    (`bool_and(m.model = 'name')`, rag._install_model_search's template). rag._search_hits calls
    rag._default_search by name, so when it was dropped since a migration installed it, its
    stand-in is installed again first, as the last migration wrote it."""
    cursor = connection.cursor()
    cursor.execute("SELECT to_regprocedure('rag._install_model_search(text,integer)') IS NOT NULL, "
                   "to_regprocedure('rag._default_search(text,vector,integer)') IS NULL")
    installer, dropped = cursor.fetchone()
    if not installer:  # migrations older than 0015 (or another folder's)
        return
    stand_in = recorded_texts(folder).get("_default_search") if dropped else None  # the files read only then
    if stand_in:  # migrations from 0020 on installed it
        cursor.execute(stand_in)
        cursor.execute("REVOKE EXECUTE ON FUNCTION rag._default_search(text, vector, integer) FROM PUBLIC")
    cursor.execute("SELECT rag._install_model_search(m.model, m.dimension) FROM rag.embedding_models m "
                   "WHERE NOT %s OR ((SELECT count(*) FROM rag.embedding_models) = 1 AND NOT EXISTS (SELECT 1 FROM pg_proc p "
                   "WHERE p.oid = to_regprocedure('rag._default_search(text,vector,integer)') "
                   "AND strpos(p.prosrc, format('bool_and(m.model = %%L)', m.model)) > 0)) ORDER BY m.model",
                   (only_missing,))
    connection.commit()


def apply_migrations(url: str, folder: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations under yoyo's lock; return the ids applied (empty when up to date)."""
    backend = get_backend(yoyo_url(url))
    try:
        migrations = read_migrations(str(folder))
        with backend.lock():
            pending = backend.to_apply(migrations)
            backend.apply_migrations(pending)
            # after migrations every model's (their template may have changed); otherwise only
            # missing ones, so the commands that migrate on start do not re-create it each time
            regenerate_model_searches(backend.connection, only_missing=not pending, folder=folder)
    finally:  # closed now, not whenever it is garbage-collected: an open session blocks CREATE DATABASE … TEMPLATE
        backend.connection.close()
    return [m.id for m in pending]
