"""Parent expansion, token-budget child loading and the context builder."""

from __future__ import annotations

import itertools

import psycopg
import pytest

C = "corpus/traite-des-echanges"
ROOT = f"{C}/summary.md"
P1 = f"{C}/premiere-partie/summary.md"
CH1 = f"{C}/premiere-partie/chapitre-01-le-boulanger/summary.md"
CH2 = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/source.md"


def node_tokens(conn, source_file: str) -> int:
    return conn.execute(
        "SELECT sum(content_token_count) FROM rag.hierarchical_content_nodes WHERE source_file = %s",
        (source_file,),
    ).fetchone()[0]


def test_get_parent_returns_all_rows_of_the_parent_in_chunk_order(corpus):
    rows = corpus.execute(
        "SELECT source_file, chunk_index, level FROM rag.get_parent(%s)", (ROUTES,)
    ).fetchall()
    n = corpus.execute(
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file = %s", (CH2,)
    ).fetchone()[0]
    assert rows == [(CH2, i, 1) for i in range(n)]


def test_get_parent_of_a_summary_climbs_one_level(corpus):
    assert {r[0] for r in corpus.execute("SELECT source_file FROM rag.get_parent(%s)", (CH2,))} == {P1}
    assert {r[0] for r in corpus.execute("SELECT source_file FROM rag.get_parent(%s)", (P1,))} == {ROOT}


def test_root_and_unknown_files_have_no_parent(corpus):
    assert corpus.execute("SELECT * FROM rag.get_parent(%s)", (ROOT,)).fetchall() == []
    assert corpus.execute("SELECT * FROM rag.get_parent('corpus/nope/summary.md')").fetchall() == []


def children(conn, parent: str, budget: int) -> list[tuple]:
    """(source_file, chunk_index, included, the child's size) per row, in the function's order."""
    return conn.execute(
        "SELECT source_file, chunk_index, role = 'child', "
        "(sum(content_token_count) OVER (PARTITION BY source_file))::int "
        "FROM rag.get_children(%s, %s) WITH ORDINALITY ORDER BY ordinality",
        (parent, budget),
    ).fetchall()


def test_children_come_in_document_order_with_their_sizes(corpus):
    rows = children(corpus, P1, 100_000)
    files = list(dict.fromkeys(r[0] for r in rows))
    assert files == [CH1, CH2]
    assert all(r[2] for r in rows)
    assert {r[0]: r[3] for r in rows} == {CH1: node_tokens(corpus, CH1), CH2: node_tokens(corpus, CH2)}


def test_children_rows_count_the_tokens_used_and_omitted_rows_their_size(corpus):
    t1 = node_tokens(corpus, CH1)
    rows = corpus.execute(
        "SELECT source_file, role, content, content_token_count, used_tokens, hit_rank "
        "FROM rag.get_children(%s, %s)",
        (P1, t1),
    ).fetchall()
    kept = [r for r in rows if r[1] == "child"]
    assert kept and {r[0] for r in kept} == {CH1}
    assert [r[4] for r in kept] == list(itertools.accumulate(r[3] for r in kept)) and kept[-1][4] == t1
    assert [r[:5] for r in rows if r[1] != "child"] == [
        (CH2, "omitted", None, node_tokens(corpus, CH2), None)
    ]
    assert all(r[5] is None for r in rows)


def test_budget_zero_includes_nothing_and_lists_every_child(corpus):
    rows = children(corpus, P1, 0)
    assert [(r[0], r[1], r[2]) for r in rows] == [(CH1, None, False), (CH2, None, False)]


def test_budget_exactly_fitting_and_one_token_short(corpus):
    t1, t2 = node_tokens(corpus, CH1), node_tokens(corpus, CH2)
    exact = children(corpus, P1, t1 + t2)
    assert all(r[2] for r in exact) and {r[0] for r in exact} == {CH1, CH2}
    short = children(corpus, P1, t1 + t2 - 1)
    assert {r[0] for r in short if r[2]} == {CH1}
    assert [(r[0], r[2]) for r in short if not r[2]] == [(CH2, False)]
    first_only = children(corpus, P1, t1)
    assert {r[0] for r in first_only if r[2]} == {CH1}
    assert children(corpus, P1, t1 - 1) == [(CH1, None, False, t1), (CH2, None, False, t2)]


def test_a_child_that_does_not_fit_stops_the_stretch(corpus):
    # Root's children: avant-propos summary, part 1, part 2. A budget that fits the first and the
    # third but not the second still stops at the second: the result is a contiguous stretch.
    sizes = dict(
        corpus.execute(
            "SELECT source_file, content_token_count FROM rag.get_children(%s, 0)", (ROOT,)
        ).fetchall()
    )
    avant = f"{C}/avant-propos/summary.md"
    p2 = f"{C}/deuxieme-partie/summary.md"
    budget = sizes[avant] + min(sizes[p2], sizes[P1]) if sizes[p2] < sizes[P1] else sizes[avant]
    rows = children(corpus, ROOT, budget)
    included = {r[0] for r in rows if r[2]}
    assert avant in included and P1 not in included and p2 not in included


def test_children_budget_out_of_range(corpus):
    with pytest.raises(Exception, match="budget must be between 0 and 1000000 tokens, got -1"):
        children(corpus, P1, -1)


def context(conn, e5, query: str, budget: int, **kw):
    return conn.execute(
        "SELECT source_file, chunk_index, role, hit_rank, content_token_count, used_tokens, node_order "
        "FROM rag.build_context(%(q)s, %(v)s, %(budget)s, p_k => %(k)s, p_expand => %(expand)s::text[])",
        {
            "q": query,
            "v": e5.query(query),
            "budget": budget,
            "k": kw.get("k", 6),
            "expand": ["parent"] if kw.get("expand", True) else None,
        },
    ).fetchall()


@pytest.mark.parametrize("budget", [1, 40, 120, 300, 2000])
def test_context_never_exceeds_its_budget(corpus, e5, budget):
    rows = context(corpus, e5, "le péage du pont renchérit le pain", budget)
    assert sum(r[4] for r in rows) <= budget
    if rows:
        assert rows[-1][5] == sum(r[4] for r in rows)


def test_context_adds_parents_deduplicates_and_reads_in_order(corpus, e5):
    rows = context(corpus, e5, "péage sur le pont pour payer le réverbère", 2000)
    keys = [(r[0], r[1]) for r in rows]
    assert len(keys) == len(set(keys))
    assert any(r[2] == "parent" and r[0] == CH2 for r in rows)
    assert any(r[2] == "hit" and r[0] == ROUTES for r in rows)
    order = [(r[6], r[0], r[1]) for r in rows]
    assert order == sorted(order)


def test_context_without_expansion_holds_only_hits(corpus, e5):
    rows = context(corpus, e5, "péage sur le pont", 2000, expand=False)
    assert rows and {r[2] for r in rows} == {"hit"}


# --- expansions inside rag.search (p_expand), and rag.pack_context -------------------------

SEARCH = "SELECT * FROM rag.search(%(q)s, %(v)s, 'hybrid', 8, p_expand => %(x)s::text[])"


def test_search_expands_parents_and_citations_in_sql(corpus, e5):
    q = "la monnaie et l'impôt"
    hits = corpus.execute(SEARCH, {"q": q, "v": e5.query(q), "x": ["parent", "cited"]}).fetchall()
    cols = [d.name for d in corpus.execute(SEARCH, {"q": q, "v": e5.query(q), "x": None}).description]
    assert cols[-4:] == ["cites", "parent", "cited", "kind"]
    h = [dict(zip(cols, r)) for r in hits]
    assert any(x["cited"] for x in h), "the fixture's anchored summaries should cite paragraphs"
    for x in h:
        parent = corpus.execute("SELECT id FROM rag.get_node(%s)", (x["parent_source_file"],)).fetchall()
        assert [p["id"] for p in x["parent"]] == [p[0] for p in parent]
        cited = corpus.execute(
            "SELECT id FROM rag.get_citations(%s, %s)", (x["source_file"], x["chunk_index"])
        ).fetchall()
        assert sorted(c["id"] for c in x["cited"]) == sorted(c[0] for c in cited)
        files = corpus.execute(
            "SELECT cited_source_file, array_agg(cited_paragraph ORDER BY cited_paragraph) "
            "FILTER (WHERE cited_paragraph IS NOT NULL) FROM rag.citations WHERE source_file = %s "
            "AND chunk_index = %s GROUP BY 1 ORDER BY 1",
            (x["source_file"], x["chunk_index"]),
        ).fetchall()
        assert [(c["source_file"], c["paragraphs"]) for c in x["cites"]] == [tuple(f) for f in files]
    plain = corpus.execute(SEARCH, {"q": q, "v": e5.query(q), "x": None}).fetchall()
    assert [r[0] for r in plain] == [x["id"] for x in h]  # same hits, same order
    assert all(
        r[-3] is None and r[-2] is None and r[-1] == "text" for r in plain
    )  # no expansion; the fixture's text


def test_build_context_is_search_then_pack_context(corpus, e5):
    q = "le péage et les routes"
    v = e5.query(q)
    for budget in (60, 400, 3000):
        for expand in (["parent"], None, []):
            built = corpus.execute(
                "SELECT * FROM rag.build_context(%s, %s, %s, 8, p_expand => %s::text[])",
                (q, v, budget, expand),
            ).fetchall()
            packed = corpus.execute(
                "SELECT * FROM rag.pack_context(ARRAY(SELECT id FROM rag.search(%s, %s, 'auto', 8) "
                "ORDER BY rank), %s, %s::text[])",
                (q, v, budget, expand),
            ).fetchall()
            assert built == packed and built, (budget, expand)


def test_python_context_is_the_sql_composition_with_every_search_setting(corpus, e5):
    """bookrag.search.build_context calls rag.build_context with every SearchRequest field: with
    the defaults it is rag.build_context's defaults; a fusion setting reaches the search, and
    rag.build_context with that setting is rag.pack_context over rag.search with it."""
    from bookrag.search import SearchRequest, build_context

    q = "le péage et les routes"
    v = e5.query(q)
    cols = "source_file, chunk_index, role, hit_rank, used_tokens"

    def python(**settings):
        rows = build_context(corpus, SearchRequest(q, k=6, budget=400, expand_parent=True, **settings), v)
        return [tuple(r[c] for c in cols.split(", ")) for r in rows]

    built = corpus.execute(f"SELECT {cols} FROM rag.build_context(%s, %s, 400, 6)", (q, v)).fetchall()
    assert python() == built and built
    composed = corpus.execute(
        f"SELECT {cols} FROM rag.pack_context(ARRAY(SELECT id FROM rag.search(%s, %s, 'hybrid', 6, "
        'p_tuning => \'{"fusion": "rrf", "sentence_every": 0}\') ORDER BY rank), 400)',
        (q, v),
    ).fetchall()
    assert composed != built  # the setting changes the context here, so the comparison below means something
    assert python(mode="hybrid", tuning={"fusion": "rrf", "sentence_every": 0}) == composed
    tuned = corpus.execute(
        f"SELECT {cols} FROM rag.build_context(%s, %s, 400, 6, p_mode => 'hybrid', "
        'p_tuning => \'{"fusion": "rrf", "sentence_every": 0}\')',
        (q, v),
    ).fetchall()
    assert tuned == composed


def test_build_context_takes_rag_search_bounds_for_k(corpus):
    assert corpus.execute("SELECT count(*) FROM rag.build_context('pain', NULL, 3000, 101)").fetchone()[0] > 0
    with pytest.raises(psycopg.Error, match="k must be between 1 and 1000, got 1001"):
        corpus.execute("SELECT * FROM rag.build_context('pain', NULL, 3000, 1001)")


def test_pack_context_skips_unknown_ids_and_checks_its_budget(corpus):
    first = corpus.execute(
        "SELECT id FROM rag.hierarchical_content_nodes WHERE source_file = %s ORDER BY chunk_index LIMIT 1",
        (ROUTES,),
    ).fetchone()[0]
    rows = corpus.execute(
        "SELECT source_file, role, hit_rank FROM rag.pack_context(ARRAY[-5, NULL, %s], 3000, NULL)", (first,)
    ).fetchall()
    assert rows == [(ROUTES, "hit", 3)]
    with pytest.raises(Exception) as info:
        corpus.execute("SELECT * FROM rag.pack_context(ARRAY[1], 0)")
    assert info.value.diag.message_primary == "budget must be between 1 and 1000000 tokens, got 0"


def test_a_context_takes_the_expansion_words_of_rag_search_and_parent_alone(corpus, e5):
    """p_expand is a text array in rag.search, rag.build_context and rag.pack_context; a context
    expands 'parent' only: another word (or a NULL in the list) is refused by name; the boolean
    the two context functions once took is no longer accepted."""
    v = e5.query("le péage et les routes")
    for expand, shown in ((["cited"], "cited"), (["parent", "chapter"], "chapter"), ([None], "NULL")):
        for call, params in (
            ("rag.build_context('péage', %s, 3000, p_expand => %s::text[])", (v, expand)),
            ("rag.pack_context(ARRAY[1], 3000, %s::text[])", (expand,)),
        ):
            corpus.execute("SAVEPOINT s")
            with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
                corpus.execute(f"SELECT * FROM {call}", params)
            corpus.execute("ROLLBACK TO SAVEPOINT s")
            assert info.value.diag.message_primary == f'a context expands parent only, got "{shown}"', call
    parents = corpus.execute(
        "SELECT count(*) FROM rag.build_context('péage', %s, 3000, p_expand => '{parent}') WHERE role = 'parent'",
        (v,),
    ).fetchone()[0]
    assert parents > 0
    assert (
        corpus.execute(
            "SELECT count(*) FROM rag.build_context('péage', %s, 3000) WHERE role = 'parent'", (v,)
        ).fetchone()[0]
        == parents
    )  # '{parent}' is the default
    with pytest.raises(psycopg.errors.UndefinedFunction):
        corpus.execute("SELECT * FROM rag.pack_context(ARRAY[1], 3000, false)")


def test_hits_of_one_section_carry_its_parent_rows_whole(corpus, e5):
    """rag.search builds each parent's JSON once (migration 0020): every hit still carries all
    of its parent's columns, in chunk order; hits sharing a parent carry equal arrays; a hit
    without parent (a book summary) or whose parent is not loaded carries []. Both the default
    (the generated function) and hybrid over every level."""
    calls = (
        (
            "SELECT * FROM rag.search(%(q)s, %(v)s, p_k => 30, p_expand => '{parent}')",
            "le péage et les routes",
        ),
        (
            "SELECT * FROM rag.search(%(q)s, %(v)s, 'hybrid', 60, p_expand => '{parent}')",
            "la monnaie et l'impôt",
        ),
    )
    seen_shared = seen_root = False
    for statement, q in calls:
        cur = corpus.execute(statement, {"q": q, "v": e5.query(q)})
        cols = [d.name for d in cur.description]
        hits = [dict(zip(cols, r)) for r in cur.fetchall()]
        by_parent: dict = {}
        for h in hits:
            node = corpus.execute("SELECT * FROM rag.get_node(%s)", (h["parent_source_file"],))
            node_cols = [d.name for d in node.description]
            assert h["parent"] == [dict(zip(node_cols, r)) for r in node.fetchall()], h["source_file"]
            by_parent.setdefault(h["parent_source_file"], []).append(h["parent"])
        for parent, arrays in by_parent.items():
            assert all(a == arrays[0] for a in arrays)
            seen_shared |= len(arrays) > 1 and parent is not None
            seen_root |= parent is None and arrays[0] == []
    assert seen_shared and seen_root, "the fixture should give hits sharing a parent and a hit without one"
    with corpus.transaction(force_rollback=True):  # a parent not loaded: [] as before
        corpus.execute(
            "UPDATE rag.hierarchical_content_nodes SET parent_source_file = 'corpus/nowhere/summary.md' "
            "WHERE source_file = %s",
            (ROUTES,),
        )
        rows = corpus.execute(
            "SELECT source_file, parent FROM rag.search('péage', NULL, 'bm25', 50, p_expand => '{parent}')"
        ).fetchall()
        assert [p for f, p in rows if f == ROUTES] and all(p == [] for f, p in rows if f == ROUTES)


def test_connections_decode_search_json_as_the_standard_library_does(corpus, e5):
    """bookrag connections decode JSON with orjson (bookrag.db.configure): the same Python values
    as json.loads of the text the server sends, for every JSON column of a search that fills them."""
    import json

    import orjson

    loader = corpus.adapters.get_loader(psycopg.postgres.types["json"].oid, psycopg.pq.Format.TEXT)
    assert loader._loads is orjson.loads
    q = "la monnaie et l'impôt"
    args = {"q": q, "v": e5.query(q), "x": ["parent", "cited"]}
    decoded = corpus.execute(SEARCH.replace("SELECT *", "SELECT cites, parent, cited"), args).fetchall()
    text = corpus.execute(
        SEARCH.replace("SELECT *", "SELECT cites::text, parent::text, cited::text"), args
    ).fetchall()
    assert decoded and any(c for row in decoded for c in row)
    assert decoded == [tuple(json.loads(t) for t in row) for row in text]
