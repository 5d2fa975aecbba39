"""evaluation.tune_fusion's choice: the best passing setting, except that the installed default is
kept when the best leads it by less than one question of the smallest set."""

from __future__ import annotations

import csv
import re
from typing import Any

import psycopg

from bookrag.functions import FUNCTIONS_DIR
from evaluation.tune_fusion import Setting, choose, installed_defaults, is_installed, one_question

INSTALLED = {
    "fusion": "convex",
    "normalisation": "zscore",
    "bm25_weight": 0.5,
    "vector_weight": 0.5,
    "chapter_weight": 0.4,
    "sentence_after": 1,
    "sentence_every": 3,
}
A = Setting("after=1 every=3", sentence_after=1, sentence_every=3)  # the installed one
B = Setting("after=2 every=2", sentence_after=2, sentence_every=2)


def results(a: tuple[float, float], b: tuple[float, float], questions: tuple[int, int] = (20, 60)) -> dict:
    """Two sets; the branches score 0.1 everywhere; A and B score (recall@5, MRR@10) on both."""

    def agg(r5: float, mrr: float, n: int) -> dict[str, float]:
        return {"recall@5": r5, "mrr@10": mrr, "questions": n}

    sets = ("small", "large")
    out = {name: {s: agg(0.1, 0.1, n) for s, n in zip(sets, questions)} for name in ("bm25", "vector")}
    out[A.name] = {s: agg(*a, n) for s, n in zip(sets, questions)}
    out[B.name] = {s: agg(*b, n) for s, n in zip(sets, questions)}
    return out


def test_one_question_is_the_smallest_sets_step():
    assert one_question(results((0.5, 0.5), (0.5, 0.5), (20, 60))) == 1 / 20 / 2


def test_a_lead_under_one_question_keeps_the_installed_default():
    res = results((0.50, 0.60), (0.50, 0.62))  # B leads by 0.01 < 0.025
    assert choose(res, [A, B]) == (B, True)  # without the defaults: the best mean
    assert choose(res, [A, B], INSTALLED) == (A, True)


def test_a_lead_of_one_question_or_more_changes_the_default():
    res = results((0.50, 0.60), (0.56, 0.60))  # B leads by 0.03
    assert choose(res, [A, B], INSTALLED) == (B, True)


def test_a_lead_of_exactly_one_question_changes_the_default():
    res = results((0.50, 0.60), (0.55, 0.60))  # B leads by 0.025, computed as 0.02499…
    assert choose(res, [A, B], INSTALLED) == (B, True)


def test_an_installed_default_below_a_branch_is_not_kept():
    res = results(
        (0.09, 0.90), (0.50, 0.51)
    )  # A leads B by 0.01 of mean but its recall@5 is under the branches' 0.1
    assert choose(res, [A, B], INSTALLED) == (B, True)


def settings_file_defaults(conn: psycopg.Connection) -> dict[str, Any]:
    """The defaults sql/functions/_settings.sql writes (its `ROW(...)`), named by the columns of
    rag.search_settings: the file, not a query of the function under test."""
    text = (FUNCTIONS_DIR / "_settings.sql").read_text()
    row = re.search(r"rag\.search_settings := ROW\((.*)\);", text).group(1)
    values = next(csv.reader([row], quotechar="'", skipinitialspace=True))
    names = [
        r[0]
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'rag.search_settings'::regclass "
            "AND attnum > 0 ORDER BY attnum"
        ).fetchall()
    ]
    assert len(names) == len(values) > 10
    return {n: _value(v) for n, v in zip(names, values)}


def _value(text: str) -> str | int | float:
    if re.fullmatch(r"\d+", text):
        return int(text)
    return float(text) if re.fullmatch(r"\d*\.\d+", text) else text


def test_installed_defaults_are_the_databases(corpus: psycopg.Connection):
    defaults = installed_defaults(corpus)
    assert defaults == settings_file_defaults(corpus)  # every setting, as sql/functions/_settings.sql has it
    assert is_installed(Setting("default"), defaults)
    assert is_installed(Setting("same", sentence_every=defaults["sentence_every"]), defaults)
    assert not is_installed(Setting("other", sentence_every=defaults["sentence_every"] + 1), defaults)
    assert not is_installed(Setting("bm25", "bm25"), defaults)
    v = defaults["vector_weight"]
    assert is_installed(Setting("weights", vector_weight=v), defaults) == (
        abs(1 - v - defaults["bm25_weight"]) < 1e-9
    )
