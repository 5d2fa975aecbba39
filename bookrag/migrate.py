"""Apply yoyo migrations (migrations/*.sql) to a database."""

from __future__ import annotations

from yoyo import get_backend, read_migrations

from bookrag.functions import MIGRATIONS_DIR


def yoyo_url(url: str) -> str:
    """yoyo needs the psycopg 3 scheme; plain postgresql:// would ask for psycopg2."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def apply_migrations(url: str) -> list[str]:
    """Apply pending migrations under yoyo's lock; return the ids applied (empty when up to date)."""
    backend = get_backend(yoyo_url(url))
    migrations = read_migrations(str(MIGRATIONS_DIR))
    with backend.lock():
        pending = backend.to_apply(migrations)
        backend.apply_migrations(pending)
    return [m.id for m in pending]
