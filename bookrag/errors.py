"""The one domain exception: a sentence the user can act on (the CLI prints it, exits 1); and the
one mapping of a database error to the words that go into such a sentence."""

from __future__ import annotations

import psycopg


class BookragError(Exception):
    """Bad input or a missing prerequisite, explained in one sentence naming the object."""


def database_reason(exc: psycopg.Error) -> str:
    """What the database said, for a sentence: the server's primary message (the RAISE text of
    our SQL functions, word for word), else the exception's own text (a client-side error)."""
    return (exc.diag.message_primary if exc.diag else None) or str(exc).strip()
