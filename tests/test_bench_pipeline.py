"""bench/bench_pipeline.py --shelf --quick: the shelf bench end to end on the fixture corpus (the
real build --all, a scratch database on the test server), its JSON checked; no figure is judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loader import frontmatter
from tests.conftest import BOOK, FIXTURES

ROOT = Path(__file__).resolve().parent.parent


def test_shelf_quick(tmp_path, pg_url):
    out = tmp_path / "shelf.json"
    env = {**os.environ, "DATABASE_URL": pg_url, "BOOKRAG_HOME": str(ROOT)}
    run = subprocess.run(
        [
            sys.executable,
            "bench/bench_pipeline.py",
            "--skip",
            "a,b,c",
            "--shelf",
            "--quick",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr
    shelf = json.loads(out.read_text(encoding="utf-8"))["shelf"]
    [book] = shelf["books"]
    words = sum(
        len(frontmatter.read(md)[1].split()) for md in (FIXTURES / "corpus" / BOOK).rglob("source.md")
    )
    assert (book["slug"], book["manifest"], book["words"]) == (BOOK, "fixture", words)
    assert book["source_chunks"] > 0 and book["summary_chunks"] > 0
    assert book["embedded"] >= book["source_chunks"] + book["summary_chunks"]
    assert shelf["ratio_wall"] > 0 and shelf["ratio_cpu"] > 0
    assert "## (e) a shelf in one command" in run.stdout and f"| {BOOK} | fixture | {words} |" in run.stdout
