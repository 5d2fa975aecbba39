"""evaluation.replay on the loaded fixture corpus: two recordings of the same search core return the
same rows; a changed row is named, by question and call."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from evaluation.replay import CALLS, Question, differences, replay
from tests.conftest import BOOK

QUESTIONS = [
    Question("fixture/1", BOOK, "le prix du pain chez le boulanger"),
    Question("fixture/2", None, "les routes et les péages"),
]


def test_a_replay_of_the_same_core_returns_the_same_rows(corpus, e5):
    vectors = e5.queries([q.text for q in QUESTIONS])
    first = replay(corpus, QUESTIONS, vectors)
    assert len(first) == len(QUESTIONS) * len(CALLS)
    assert first["fixture/1 auto"] and first["fixture/1 bm25-book"]  # the calls find rows
    again = replay(corpus, QUESTIONS, vectors)
    same = differences(first, again)
    assert (same.calls, same.ids_differ, same.scores_differ) == (len(first), [], [])

    moved = copy.deepcopy(again)
    rows = moved["fixture/1 hybrid"]
    rows[0][0], rows[1][0] = rows[1][0], rows[0][0]  # two hits swap places
    moved["fixture/2 bm25"][0][2] += 0.5  # same rows, another score
    found = differences(first, moved)
    assert found.ids_differ == ["fixture/1 hybrid"] and found.scores_differ == ["fixture/2 bm25"]
    lines = found.lines(first, moved)
    assert lines[0].endswith("1 differ; 1 of the same have another score") and "  hybrid" in lines[1]


def test_compare_from_the_command_line(tmp_path: Path):
    a = {"q/1 auto": [[1, 1, 0.5], [2, 2, 0.4]], "q/1 bm25": [[3, 1, 2.0]]}
    b = {"q/1 auto": [[2, 1, 0.5], [1, 2, 0.4]], "q/1 bm25": [[3, 1, 2.0]]}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation.replay",
            "compare",
            str(tmp_path / "a.json"),
            str(tmp_path / "b.json"),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2 calls: 1 return the same rows in the same order, 1 differ; 0 of the same have another score",
        "  auto                 1 differ",
        "  q/1 auto: [1, 2] -> [2, 1]",
    ]
