"""bench/bench_sql_bombs.py at its tiny setting (--quick) on the fixture corpus: it runs end to end
through the real server, and its verdicts are the guard's (every expression bomb and every
parser-crash input refused, another client's searches without an error). Its timings and memory
figures are printed, never asserted: they belong to the bench's table."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from tests.conftest import settings_for

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_sql_bombs.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_sql_bombs", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bench_runs_quick_and_every_bomb_is_refused(corpus_url, corpus_home, capsys):
    bench = load_bench()
    data = bench.main(["--quick"], settings=settings_for(corpus_home, corpus_url))
    out = capsys.readouterr().out
    assert (
        "| expression bomb |" in out
        and "| parser-crash input |" in out
        and "another client's searches" in out
    )
    assert [b["verdict"] for b in data["expression_bombs"]] == ["refused"] * len(data["expression_bombs"])
    assert data["expression_bombs"] and data["concurrent"]["verdicts"] == ["refused"]
    assert {p["verdict"] for p in data["parser_crashes"]} == {"refused"}
    assert len(data["parser_crashes"]) == len(bench.PARSER_CRASHES)
    for phase in ("searches_quiet", "searches_during_expression_bombs", "searches_during_parser_crashes"):
        assert data[phase]["errors"] == 0 and data[phase]["n"] >= 1, phase
    # memory is read when the server runs on this machine (it does in the suite)
    assert not math.isnan(data["expression_bombs"][0]["busiest_backend_rssanon_mb"])
