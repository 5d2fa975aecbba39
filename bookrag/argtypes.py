"""argparse types shared by the CLI and the evaluation commands: each turns one option's text
into its value or raises argparse.ArgumentTypeError with a sentence naming what it got, so a
malformed option is argparse's usage error (exit 2), never a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable


def _ints(text: str, ok: Callable[[int], bool], expected: str) -> list[int]:
    """Comma-separated whole numbers, each passing ok, at least one; else one sentence."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or not all(ok(v) for v in values):
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
    return values


def positive_int(text: str) -> int:
    """A count: 1 or more."""
    values = _ints(text, lambda v: v >= 1, "expected a whole number >= 1")
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return values[0]


def positive_int_list(text: str) -> list[int]:
    """Comma-separated counts, e.g. recall cut-offs 1,5,10."""
    return _ints(text, lambda v: v >= 1, "expected comma-separated whole numbers >= 1")


def level_list(text: str) -> list[int]:
    """--levels / --level: comma-separated levels within 0..3."""
    return _ints(text, lambda v: 0 <= v <= 3, "levels are comma-separated numbers 0..3")


def names_from(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Comma-separated names, each one of choices (e.g. --mode bm25,hybrid)."""

    def parse(text: str) -> list[str]:
        names = [x.strip() for x in text.split(",") if x.strip()]
        unknown = [x for x in names if x not in choices]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated names from {', '.join(choices)}; "
                f"got {', '.join(unknown) if unknown else repr(text)}"
            )
        return names

    return parse


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option, hidden from help: it still works, with a warning naming the new one."""

    def __init__(self, option_strings: list[str], dest: str, replacement: str = "", **kwargs) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.replacement}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def setting(text: str) -> tuple[str, object]:
    """NAME=VALUE of a ranking setting (`--tune`): the value as JSON when it parses (numbers),
    else as text (fusion=rrf); the SQL (rag._settings) checks the name and the value."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, e.g. sections=7, got {text!r}")
    try:
        parsed: object = json.loads(value)
    except json.JSONDecodeError:
        parsed = value.strip()
    return name.strip(), parsed
