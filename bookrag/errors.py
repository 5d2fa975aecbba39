"""The one domain exception: a sentence the user can act on (the CLI prints it, exits 1)."""


class BookragError(Exception):
    """Bad input or a missing prerequisite, explained in one sentence naming the object."""
