"""Answer a question from the books with citations: build the context in SQL, then either let
an LLM answer from it (when BOOKRAG_LLM_MODEL is set) or, offline, quote the passages."""

from __future__ import annotations

from typing import Any

from bookrag.config import load_settings
from bookrag.errors import BookragError

Cited = dict[tuple[str, int], list[dict[str, Any]]]


def locator(row: dict[str, Any]) -> str:
    """Where a row sits in its file: '§N, chunk i' (§N: the paragraph number anchors cite)."""
    return (
        f"§{row['paragraph']}, chunk {row['chunk_index']}"
        if row.get("paragraph")
        else f"chunk {row['chunk_index']}"
    )


def cite(row: dict[str, Any]) -> str:
    return f"{row['heading_path']} — {row['source_file']} {locator(row)}"


def book_paragraphs(cited: list[dict[str, Any]]) -> str:
    """'…/source.md §4, §5' for the paragraphs a summary chunk cites."""
    by_file: dict[str, list[int]] = {}
    for c in cited:
        if c["paragraph"] not in by_file.setdefault(c["source_file"], []):
            by_file[c["source_file"]].append(c["paragraph"])
    return "; ".join(f"{f} {', '.join(f'§{p}' for p in ps)}" for f, ps in by_file.items())


def numbered_sources(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(rows, start=1))


def _chat(prompt: str) -> str:
    """One reply of the configured chat model (BOOKRAG_LLM_MODEL through OPENAI_BASE_URL), at temperature 0."""
    from openai import OpenAI

    s = load_settings()
    if not s.llm_model:
        raise BookragError("no chat model is configured: set BOOKRAG_LLM_MODEL")
    client = OpenAI(
        base_url=s.openai_base_url, api_key=s.api_key, timeout=s.llm_timeout, max_retries=s.llm_retries
    )
    try:
        resp = client.chat.completions.create(
            model=s.llm_model, temperature=0, messages=[{"role": "user", "content": prompt}]
        )
    except Exception as exc:
        raise BookragError(f"the LLM call failed ({client.base_url}): {exc}") from exc
    return (resp.choices[0].message.content or "").strip()


def phrasings_prompt(question: str, books: list[dict[str, Any]]) -> str:
    """loader/prompts/phrasings.md.j2 for a question over these books (rag.list_books rows)."""
    from loader.summarize import _env

    return _env().get_template("phrasings.md.j2").render(question=question, books=books)


def _text(value: Any) -> str:
    """A wording from the LLM's JSON: a string, or a list of strings joined by spaces; else none."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = " ".join(value)
    return " ".join(value.split()) if isinstance(value, str) else ""


def ask_phrasings(question: str, books: list[dict[str, Any]]) -> tuple[tuple[str, ...], str | None]:
    """The question in the author's own words, from the LLM: (keywords, passage), and None; or ()
    and one sentence saying why there are none (a reply that is not the JSON asked for, or one
    whose wordings repeat the question), in which case the question is searched alone."""
    import json
    import re

    reply = _chat(phrasings_prompt(question, books))
    found = re.search(r"\{.*\}", reply, re.S)  # the object, even inside a code fence or a sentence
    try:
        data = json.loads(found.group(0)) if found else None
        wordings = [_text(data.get(key)) for key in ("keywords", "passage")] if isinstance(data, dict) else []
    except (json.JSONDecodeError, KeyError):
        wordings = []
    seen = {question.strip().lower()}
    kept = []
    for w in wordings:
        if w and w.lower() not in seen:
            kept.append(w)
            seen.add(w.lower())
    if not kept:
        return (), "the LLM's reply held no usable keywords or passage; the question is searched alone"
    return tuple(kept), None


def answer_with_llm(question: str, rows: list[dict[str, Any]], cited: Cited | None = None) -> str:
    cited = cited or {}
    sources = "\n\n".join(
        f"[{n}] ({row.get('citation') or row['heading_path']})\n{row['content']}"
        + (
            f"\n(passages du livre résumés ici : {book_paragraphs(cited[(row['source_file'], row['chunk_index'])])})"
            if cited.get((row["source_file"], row["chunk_index"]))
            else ""
        )
        for n, row in numbered_sources(rows)
    )
    prompt = (
        "Réponds à la question en français, uniquement à partir des extraits numérotés ci-dessous, "
        "en citant chaque affirmation par son numéro entre crochets, par exemple [2]. "
        "Si les extraits ne suffisent pas, dis-le.\n\n"
        f"Question : {question}\n\nExtraits :\n\n{sources}"
    )
    return _chat(prompt)


def render_answer(question: str, rows: list[dict[str, Any]], cited: Cited | None = None) -> str:
    """The answer text: the LLM's when configured, else the passages themselves, numbered,
    in reading order, each under its citation (and its scholarly form, bookrag.cite, when the
    rows carry it); a summary passage also names the book's
    paragraphs its anchors cite, and quotes the first of them."""
    cited = cited or {}
    if not rows:
        return f"Question : {question}\nNo passage of the loaded books matches this question."
    lines = [f"Question : {question}", ""]
    llm = load_settings().llm_model
    if llm:
        lines += [answer_with_llm(question, rows, cited), ""]
    else:
        lines += [
            "(No LLM configured: the answer is the cited passages, in reading order; "
            "set BOOKRAG_LLM_MODEL and OPENAI_BASE_URL for a written answer.)",
            "",
        ]
    for n, row in numbered_sources(rows):
        role = "hit" if row["role"] == "hit" else "context"
        lines.append(f"[{n}] {cite(row)}  ({role}, level {row['level']})")
        if row.get("citation"):
            lines.append(f"    cite: {row['citation']}")
        if row.get("url"):
            lines.append(f"    {row['url']}")
        if not llm:
            lines.append("    " + row["content"])
        behind = cited.get((row["source_file"], row["chunk_index"]))
        if behind:
            lines.append(f"    cites the book: {book_paragraphs(behind)}")
            if not llm:
                first = behind[0]["content"]
                lines.append(
                    f"      §{behind[0]['paragraph']} « {first if len(first) <= 300 else first[:300] + '…'} »"
                )
    return "\n".join(lines)
