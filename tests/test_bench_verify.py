"""bench/bench_verify.py --quick on the fixture corpus: the benchmark runs, and its verdicts (never
its timings) hold: every true quote is exact, no altered quote or summary sentence is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_verify.py"


def test_bench_verify_quick(corpus_url, corpus_home, tmp_path):
    out = tmp_path / "verify.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKRAG_")}
    env.update(DATABASE_URL=corpus_url, BOOKRAG_HOME=str(corpus_home))
    run = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    assert "| kind | quotes | exact | elsewhere | close | summary | not found |" in run.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    confusion = data["confusion"]
    assert confusion["true"] == {"exact": 70}
    for kind in ("changed", "dropped", "swapped", "off-by-one", "chapter", "summary"):
        assert sum(confusion[kind].values()) > 0 and confusion[kind].get("exact", 0) == 0, (
            kind,
            confusion[kind],
        )
    assert confusion["summary"].get("summary", 0) == sum(confusion["summary"].values())
    assert data["right_place"]["off-by-one"] == sum(confusion["off-by-one"].values())
