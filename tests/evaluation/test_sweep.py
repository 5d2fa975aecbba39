"""`bookrag sweep` on the fixture: every threshold x strategy measured in scratch databases,
embeddings cached across runs, the main tables untouched."""

from __future__ import annotations

from pathlib import Path

import psycopg

from evaluation import sweep as sweep_module
from evaluation.sweep import PARAGRAPH, CachedEmbedder, render, sweep
from tests.conftest import settings_for

EVALSET = Path(__file__).parents[1] / "fixtures" / "evals" / "traite-des-echanges.jsonl"


def test_sweep_grid_cache_and_cleanup(home, pg_url, monkeypatch):
    s = settings_for(home, pg_url)
    made: list[CachedEmbedder] = []
    original = sweep_module.CachedEmbedder

    def spy(*a, **kw):
        made.append(original(*a, **kw))
        return made[-1]

    monkeypatch.setattr(sweep_module, "CachedEmbedder", spy)
    rows = sweep(
        s,
        "traite-des-echanges",
        EVALSET,
        [20, PARAGRAPH],
        ["hybrid", "two-stage", "economic"],
        progress=False,
    )
    assert [(r["threshold"], r["strategy"]) for r in rows] == [
        (20, "hybrid"),
        (20, "two-stage"),
        (20, "hybrid (economic)"),
        (20, "two-stage (economic)"),
        ("paragraph", "hybrid"),
        ("paragraph", "two-stage"),
        ("paragraph", "hybrid (economic)"),
        ("paragraph", "two-stage (economic)"),
    ]
    chunks = {r["threshold"]: r["level0_chunks"] for r in rows}
    assert chunks[20] > chunks["paragraph"] == 12
    assert all(0.0 <= r["recall@5"] <= 1.0 and r["questions"] == 3 for r in rows)
    assert made[0].misses > 0
    again = sweep(s, "traite-des-echanges", EVALSET, [20], ["hybrid"], progress=False)
    assert made[-1].misses == 0 and made[-1].hits > 0  # the second run embeds nothing
    assert again[0]["recall@5"] == rows[0]["recall@5"]
    assert render(rows).splitlines()[0].startswith("| threshold | strategy | level0_chunks |")
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone() == (0,)
        assert c.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'bookrag_sweep_%'"
        ).fetchone() == (0,)
