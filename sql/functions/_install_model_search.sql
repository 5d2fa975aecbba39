-- rag._install_model_search: generate the corpus model's default search, whose statements are static so their plans are cached (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_search(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Replaces rag._default_search(p_query TEXT, p_query_embedding vector, p_k INT) RETURNS SETOF
rag.search_hit (its file installs a stand-in that returns nothing) with p_model's generated
search, and returns its name, 'rag._default_search'. It is the default search
(rag.search's 'auto' resolved to two-stage) without filters or settings, for p_k 1..100: the
same rows as rag.search_two_stage merged with rag.search_sentences by rag._interleave, from
two static statements: the BM25 top 100 and the kNN top 40 (rag._branch_sql's statements),
their fusion (rag.search_hybrid's formulas, with rag._fusion_settings' defaults read at run
time), both stages (5 sections, section weight 0.3, pools 100 and 40: rag.search_two_stage's
defaults), then the 2k nearest summary sentences and the k best of their paragraphs
(rag.search_sentences' statements, in one: its halfvec index's order, decision 27; the k that
rag._interleave can read of the 2k that function returns, migration 0020). PL/pgSQL caches a static statement's plan for the
session (forced generic, so that the planner never goes back to planning them per call), which
the general functions cannot have: the kNN statement must name the model and its
dimension as literals (the partial HNSW index's predicate and expression), so they build it
anew, planned on every call. Here the model and dimension are formatted in when the function is
generated (%L, a number; a model name with a $ gets no function, since %L does not escape
it), as rag._ensure_vector_index formats them into the index. Measured: evaluation/experiments/
latency/ (the same rows on every question of the two books' evalsets and 200 of PIAF's, at k
1-30) and decision 24: about a third less time on the books.
When the rows read hold fewer than p_k paragraphs of the kept sections it runs
rag.search_two_stage's second search inside them (rag._search_in_sections, as that function
does since migration 0016), with those of their paragraphs read that have a BM25 score as its
BM25 rows (migration 0019, decision 28).
It returns no row, and rag._search_hits then runs the general functions, when no section is
found (their flat fallback), when no paragraph of the kept sections is found at all ('auto'
then falls back to hybrid), or when a default it assumes is not the default (cite weight other
than 0). tests/sql/test_default_search.py compares it with the general functions on the fixture
corpus (five queries, k 1, 2, 3, 5, 8, 10, 40 and 100, those hand-overs too), so a change of either shows.
The generated function returns no row, before reading anything, when the registered models are
not exactly p_model or the query vector's length is not p_dimension: rag._search_hits then runs
the general functions, which answer another model's corpus or raise the error naming the
mismatch. So one fixed name serves any model, and rag._search_hits calls it statically (until
migration 0020 each model had its own function, rag._default_search_<md5(model)[:12]>, which
rag._search_hits looked up and ran through EXECUTE: 0.25 ms p50 more per search, decision 29).
Called by rag._ensure_vector_index (at each load of embedded rows) and by `bookrag migrate`
(every registered model after it applied migrations, and a registered model the installed
function was not generated for), so the generated text follows the installed template.
CREATE OR REPLACE keeps the function's identity and privileges (EXECUTE for bookrag_reader,
not PUBLIC), and other sessions see the old body or the new one.
Cost: one function's text replaced (milliseconds).
*/
DECLARE
    v_name TEXT := '_default_search';
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF strpos(p_model, '$') > 0 THEN
        -- %L does not escape dollar signs, and the name is written inside the $body$ quotes below
        RAISE NOTICE 'model "%" has a $ in its name: no generated default search, the general functions serve it', p_model;
        RETURN NULL;
    END IF;
    -- (OR REPLACE on its own line: this file defines one function, rag._install_model_search)
    EXECUTE format($f$
CREATE OR REPLACE
FUNCTION rag.%1$I(p_query TEXT, p_query_embedding vector, p_k INT)
RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = relaxed_order
AS $body$
DECLARE
    st      RECORD;
    v_short BOOLEAN;
    f_rows  rag.search_hit[];
    s_rows  rag.search_hit[];
    v_files TEXT[];            -- the kept sections, best first, and their normalised scores
    v_scores FLOAT8[];
    b_ids   INT[];             -- their paragraphs among the rows read that have a BM25 score
    b_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, NULL, NULL, NULL);
    IF vector_dims(p_query_embedding) <> %2$s
       OR NOT (SELECT count(*) = 1 AND bool_and(m.model = %3$L) FROM rag.embedding_models m) THEN
        RETURN;  -- not (only) this function's model, or a vector of another length: the general functions
    END IF;
    SELECT * INTO st FROM rag._fusion_settings(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    IF st.cite_weight <> 0 OR p_k NOT BETWEEN 1 AND 100 THEN
        RETURN;
    END IF;
    -- The BM25 top 100 and the kNN top 40 (two-stage's pools, so ef_search 40), the fusion over
    -- them, the 100 best (rag.search_hybrid's rows), the 5 best sections, their paragraphs and
    -- the k rows kept.
    WITH b AS (
        SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.sf, x.pf FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query
            ORDER BY pdb.score(n.id) DESC LIMIT 100) x
    ), v AS (
        SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.sf, y.pf FROM (
            SELECT n.id, (n.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s))::float8 AS d, n.level AS lvl,
                   n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.embedding_model = %3$L AND n.embedding IS NOT NULL
            ORDER BY n.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s) LIMIT 40) y
    ), bx AS (
        SELECT b.*, CASE WHEN st.fusion = 'rrf' THEN 1.0::float8 / (60 + b.r)
                         WHEN st.normalisation = 'minmax'
                         THEN coalesce((b.s - min(b.s) OVER ()) / nullif(max(b.s) OVER () - min(b.s) OVER (), 0), 1)
                         ELSE coalesce((b.s - avg(b.s) OVER ()) / nullif(stddev_pop(b.s) OVER (), 0), 1) END AS x
        FROM b
    ), vx AS (
        SELECT v.*, CASE WHEN st.fusion = 'rrf' THEN 1.0::float8 / (60 + v.r)
                         WHEN st.normalisation = 'minmax'
                         THEN coalesce((v.s - min(v.s) OVER ()) / nullif(max(v.s) OVER () - min(v.s) OVER (), 0), 1)
                         ELSE coalesce((v.s - avg(v.s) OVER ()) / nullif(stddev_pop(v.s) OVER (), 0), 1) END AS x
        FROM v
    ), fl AS (
        SELECT coalesce((SELECT least(min(bx.x), 0) FROM bx), 0) AS bf, coalesce((SELECT least(min(vx.x), 0) FROM vx), 0) AS vf
    ), f AS (
        SELECT coalesce(bx.id, vx.id) AS id, bx.r AS br, bx.s AS bs, vx.r AS vr, vx.s AS vs,
               coalesce(bx.lvl, vx.lvl) AS lvl, coalesce(bx.sf, vx.sf) AS sf, coalesce(bx.pf, vx.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(bx.x, 0) + st.vector_weight * coalesce(vx.x, 0)
                    ELSE (st.bm25_weight * coalesce(bx.x, fl.bf) + st.vector_weight * coalesce(vx.x, fl.vf))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM bx FULL JOIN vx ON bx.id = vx.id CROSS JOIN fl
    ), top AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id)::int AS rk
        FROM f ORDER BY f.fused DESC, least(f.br, f.vr), f.id LIMIT 100
    ), sec0 AS (
        SELECT h.section, max(h.fused) AS best
        FROM (SELECT CASE WHEN t.lvl = 1 THEN t.sf ELSE t.pf END AS section, t.fused FROM top t WHERE t.lvl <= 1) h
        WHERE h.section IS NOT NULL
        GROUP BY h.section ORDER BY best DESC, h.section LIMIT 5
    ), sec AS (
        SELECT s.section, s.best,
               coalesce((s.best - min(s.best) OVER ()) / nullif(max(s.best) OVER () - min(s.best) OVER (), 0), 1) AS sc
        FROM sec0 s
    ), para AS (
        SELECT t.*, coalesce((t.fused - min(t.fused) OVER ()) / nullif(max(t.fused) OVER () - min(t.fused) OVER (), 0), 1) AS norm
        FROM top t WHERE t.lvl = 0 AND t.pf IN (SELECT sec.section FROM sec)
    ), scored AS (
        SELECT p.*, (1 - 0.3::float8) * p.norm + 0.3::float8 * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.section = p.pf
    ), best AS (
        SELECT x.*, row_number() OVER (ORDER BY x.final DESC, x.rk, x.id)::int AS r2
        FROM scored x ORDER BY x.final DESC, x.rk, x.id LIMIT p_k
    )
    SELECT (SELECT count(*) FROM para) < p_k,
           (SELECT array_agg(sec.section ORDER BY sec.best DESC, sec.section) FROM sec),
           (SELECT array_agg(sec.sc ORDER BY sec.best DESC, sec.section) FROM sec),
           array_agg(ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                         n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                         x.final, x.r2, x.br, x.bs, x.vr, x.vs, x.ssc, NULL::int, NULL::float8,
                         NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY x.r2),
           (SELECT array_agg(p.id ORDER BY p.rk) FROM para p WHERE p.br IS NOT NULL),
           (SELECT array_agg(p.bs ORDER BY p.rk) FROM para p WHERE p.br IS NOT NULL)
    INTO v_short, v_files, v_scores, f_rows, b_ids, b_scores
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id;
    IF v_files IS NULL THEN  -- no section: the general functions' flat fallback
        RETURN;
    END IF;
    IF v_short THEN
        -- Fewer than k paragraphs of the kept sections among the rows read: rag.search_two_stage's
        -- second search inside them (their BM25 rows read here, their exact kNN), and its scoring.
        SELECT array_agg(h ORDER BY h.rank) INTO f_rows
        FROM rag._search_in_sections(p_query, p_query_embedding, %3$L, v_files, v_scores, b_ids, b_scores, p_k, 100, 0.3,
                                     st.fusion, st.normalisation, st.bm25_weight, st.vector_weight) h;
    END IF;
    IF f_rows IS NULL THEN  -- no paragraph of the kept sections at all: the general functions ('auto' falls back to hybrid)
        RETURN;
    END IF;
    IF st.sentence_every = 0 OR st.sentence_after >= p_k THEN
        RETURN QUERY SELECT * FROM unnest(f_rows);
        RETURN;
    END IF;
    -- The sentence branch: the 2k nearest summary sentences (the halfvec index's order, the
    -- full-precision distance), their k best paragraphs (one chunk each), in one statement.
    -- rag.search_sentences(2k) returns 2k paragraphs, but rag._interleave never reads past the
    -- k-th: each of its rows it reads is placed, or skipped for a paragraph the two-stage list
    -- placed, and at most k rows are placed. The k best of the 2k are the k best here (rank()
    -- keeps the ties on sentence score that the paragraph's own score breaks), so the rows are
    -- the same with k chunk lookups instead of 2k (every cited paragraph is loaded: `load`
    -- checks anchors).
    PERFORM rag._set_hnsw(2 * p_k);
    WITH s AS (
        SELECT se.cited_source_file AS f, se.cited_paragraphs AS ps, (se.embedding <=> p_query_embedding)::float8 AS d
        FROM rag.sentences se WHERE se.embedding_model = %3$L
        ORDER BY se.embedding::halfvec(%2$s) <=> p_query_embedding::halfvec(%2$s) LIMIT 2 * p_k
    ), cited AS (
        SELECT s.f, p.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS p(n) GROUP BY s.f, p.n
    ), para AS (
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (
        SELECT c.*, para.sim FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   CASE WHEN n.embedding_model = %3$L THEN 1 - (n.embedding <=> p_query_embedding) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id)::int AS r FROM one
    )
    SELECT array_agg(ROW(t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
                         t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
                         t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
                         NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY t.r)
    INTO s_rows
    FROM top t WHERE t.r <= p_k;
    RETURN QUERY SELECT * FROM rag._interleave(f_rows, s_rows, st.sentence_after, st.sentence_every, p_k);
END
$body$
$f$, v_name, p_dimension, p_model);
    EXECUTE format('COMMENT ON FUNCTION rag.%I(text, vector, integer) IS %L', v_name,
                   format('The default search for model %s, generated by rag._install_model_search; do not edit.', p_model));
    EXECUTE format('REVOKE EXECUTE ON FUNCTION rag.%I(text, vector, integer) FROM PUBLIC', v_name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION rag.%I(text, vector, integer) TO bookrag_reader', v_name);
    RETURN 'rag.' || v_name;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_search(TEXT, INT) FROM bookrag_reader;
