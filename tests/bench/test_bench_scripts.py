"""Every bench/ script runs, at its smallest settings, against the loaded fixture corpus (their
figures are not checked: timings belong to bench/README.md, never to a test verdict).
bench_sql_bombs.py and bench_verify.py are run by tests of their own (OWN_TEST), which check verdicts too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BOOK

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_CHAPTER = f"corpus/{BOOK}/deuxieme-partie/chapitre-01-la-monnaie/source.md"

#: script -> its smallest settings
SMALLEST: dict[str, list[str]] = {
    # three queries: each is searched with the next two as its phrasings
    "bench_search.py": ["--sizes", "", "--runs", "1", "--warmup", "0", "--queries", "3"],
    "bench_mcp.py": [
        "--seq-calls",
        "1",
        "--warmup",
        "0",
        "--clients",
        "1",
        "--calls",
        "1",
        "--ceiling-s",
        "0",
    ],
    "bench_pipeline.py": ["--book", BOOK, "--files", "1"],
    "bench_embed.py": ["--calls", "1"],
    "bench_reading_room.py": ["--rounds", "1", "--search-runs", "1"],
    "bench_convoy.py": ["--hold", "0.2"],
    "bench_wordings.py": ["--rounds", "1"],
    "bench_result_size.py": ["--source-file", FIXTURE_CHAPTER],
}
#: scripts with a test of their own, which checks their verdicts too
OWN_TEST = {
    "bench_sql_bombs.py": "tests/bench/test_bench_sql_bombs.py",
    "bench_verify.py": "tests/test_bench_verify.py",
}


def test_every_script_is_run_here():
    scripts = {p.name for p in (ROOT / "bench").glob("bench_*.py")}
    assert scripts - set(OWN_TEST) == set(SMALLEST)
    assert all((ROOT / test).is_file() for test in OWN_TEST.values())


@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_the_script_runs_at_its_smallest_settings(script, corpus_url, corpus_home, tmp_path):
    out = tmp_path / "out.json"
    env = {**os.environ, "DATABASE_URL": corpus_url, "BOOKRAG_HOME": str(corpus_home)}
    if script == "bench_embed.py":  # the evalsets' committed phrasings, no database
        env["BOOKRAG_HOME"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *SMALLEST[script], "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "|---" in done.stdout  # it printed its table
    assert out.read_text().startswith("{")  # and wrote its JSON
