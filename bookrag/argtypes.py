"""argparse types shared by the CLI and the evaluation commands: each turns one option's text
into its value or raises argparse.ArgumentTypeError with a sentence naming what it got, so a
malformed option is argparse's usage error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive_int(text: str) -> int:
    """A count: 1 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return n


def positive_int_list(text: str) -> list[int]:
    """Comma-separated counts, e.g. recall cut-offs 1,5,10."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers >= 1, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers >= 1, got {text!r}")
    return values


def level_list(text: str) -> list[int]:
    """--levels / --level: comma-separated levels within 0..3."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels are comma-separated numbers 0..3, got {text!r}") from None
    if not levels or any(not 0 <= x <= 3 for x in levels):
        raise argparse.ArgumentTypeError(f"levels are comma-separated numbers 0..3, got {text!r}")
    return levels


def names_from(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Comma-separated names, each one of choices (e.g. --mode bm25,hybrid)."""
    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        unknown = [x for x in names if x not in choices]
        if not names or unknown:
            raise argparse.ArgumentTypeError(f"expected comma-separated names from {', '.join(choices)}; "
                                             f"got {', '.join(unknown) if unknown else repr(text)}")
        return names
    return parse
