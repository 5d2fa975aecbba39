"""Answer a question from the books with citations: build the context in SQL, then either let
an LLM answer from it (when BOOKRAG_LLM_MODEL is set) or, offline, quote the passages."""

from __future__ import annotations

from typing import Any

from bookrag.config import load_settings
from bookrag.errors import BookragError


def cite(row: dict[str, Any]) -> str:
    return f"{row['heading_path']} — {row['source_file']} §{row['chunk_index']}"


def numbered_sources(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(rows, start=1))


def answer_with_llm(question: str, rows: list[dict[str, Any]]) -> str:
    from openai import OpenAI

    sources = "\n\n".join(f"[{n}] ({row['heading_path']})\n{row['content']}" for n, row in numbered_sources(rows))
    prompt = (
        "Réponds à la question en français, uniquement à partir des extraits numérotés ci-dessous, "
        "en citant chaque affirmation par son numéro entre crochets, par exemple [2]. "
        "Si les extraits ne suffisent pas, dis-le.\n\n"
        f"Question : {question}\n\nExtraits :\n\n{sources}"
    )
    s = load_settings()
    client = OpenAI(base_url=s.openai_base_url, api_key=s.api_key, timeout=s.llm_timeout, max_retries=s.llm_retries)
    try:
        resp = client.chat.completions.create(model=s.llm_model, temperature=0,
                                              messages=[{"role": "user", "content": prompt}])
    except Exception as exc:
        raise BookragError(f"the LLM call failed ({client.base_url}): {exc}") from exc
    return (resp.choices[0].message.content or "").strip()


def render_answer(question: str, rows: list[dict[str, Any]]) -> str:
    """The answer text: the LLM's when configured, else the passages themselves, numbered,
    hits first, each under its citation."""
    if not rows:
        return f"Question : {question}\nNo passage of the loaded books matches this question."
    lines = [f"Question : {question}", ""]
    llm = load_settings().llm_model
    if llm:
        lines += [answer_with_llm(question, rows), ""]
    else:
        lines += ["(No LLM configured: the answer is the cited passages, in reading order; "
                  "set BOOKRAG_LLM_MODEL and OPENAI_BASE_URL for a written answer.)", ""]
    for n, row in numbered_sources(rows):
        role = "hit" if row["role"] == "hit" else "context"
        lines.append(f"[{n}] {cite(row)}  ({role}, level {row['level']})")
        if not llm:
            lines.append("    " + row["content"])
    return "\n".join(lines)
