"""A paragraph's text as HTML for the reading room: escaped, the book's words and typography left
as they are (spaces, quotes, dashes); only the source's own marks become markup: `_italics_`
and footnotes (`[^12]` a call, `[^12]: …` the note's paragraph), linked both ways."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markupsafe import Markup, escape

NOTE_DEFINITION = re.compile(r"^\[\^([\w-]{1,20})\]:\s*")
NOTE_CALL = re.compile(r"\[\^([\w-]{1,20})\](?!:)")
ITALICS = re.compile(r"(?<![\w])_(?=\S)(.+?)(?<=\S)_(?![\w])")


@dataclass
class Notes:
    """The footnotes of one page: which labels have a call (the first call gets the anchor a
    note links back to) and which have a note paragraph (a call links to it)."""

    defined: set[str]
    called: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, texts: list[str]) -> Notes:
        defined = {m.group(1) for t in texts if (m := NOTE_DEFINITION.match(t))}
        return cls(
            defined, {m.group(1) for t in texts for m in NOTE_CALL.finditer(NOTE_DEFINITION.sub("", t))}
        )


def note_label(text: str) -> str | None:
    """The label of a note paragraph (`[^12]: …` → '12'), else None."""
    m = NOTE_DEFINITION.match(text)
    return m.group(1) if m else None


def render(text: str, notes: Notes | None = None, seen: set[str] | None = None) -> Markup:
    """`text` as HTML. With `notes` (a chapter page) calls link to their notes and a note links
    back to its first call; `seen` collects labels already given their call anchor. Without
    (a search hit's excerpt) calls stay as superscript labels."""
    label = note_label(text)
    body = NOTE_DEFINITION.sub("", text) if label else text
    html = str(escape(body))
    html = ITALICS.sub(r"<em>\1</em>", html)

    def call(m: re.Match[str]) -> str:
        n = m.group(1)
        if notes is None or n not in notes.defined:
            return f'<sup class="note-call">{n}</sup>'
        anchor = ""
        if seen is not None and n not in seen:
            seen.add(n)
            anchor = f' id="fnref-{n}"'
        return f'<sup class="note-call"><a{anchor} href="#fn-{n}" aria-label="note {n}">{n}</a></sup>'

    html = NOTE_CALL.sub(call, html)
    if label:
        back = (
            f'<a class="note-label" id="fn-{label}" href="#fnref-{label}" aria-label="back to the call of note {label}">'
            f"[{label}]</a>"
            if notes is not None and label in notes.called
            else f'<span class="note-label"{f' id="fn-{label}"' if notes is not None else ""}>[{label}]</span>'
        )
        html = f"{back} {html}"
    return Markup(html)
