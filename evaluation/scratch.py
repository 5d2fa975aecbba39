"""Scratch databases for eval and sweep runs: created next to the main one, migrated, dropped
afterwards, so measuring never touches the corpus tables."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from bookrag import db
from bookrag.config import Settings
from bookrag.migrate import apply_migrations


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def scratch_database(settings: Settings, label: str = "eval") -> Iterator[str]:
    """URL of a fresh migrated database; dropped on exit (even after an error)."""
    url = db.database_url(settings)
    name = f"bookrag_{label}_{os.getpid()}"
    admin = psycopg.conninfo.make_conninfo(url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        for (stale,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"bookrag_{label}_%",)
        ).fetchall():
            pid = stale.rsplit("_", 1)[-1]
            if stale == name or (pid.isdigit() and not _alive(int(pid))):  # left by a killed run
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stale)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    scratch = psycopg.conninfo.make_conninfo(url, dbname=name)
    try:
        apply_migrations(scratch)
        yield scratch
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
