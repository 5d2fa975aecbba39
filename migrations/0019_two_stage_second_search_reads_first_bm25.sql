-- 0019_two_stage_second_search_reads_first_bm25: issue 10: two-stage's second search takes its BM25 rows from the first search instead of a second pg_search query
-- depends: 0018_sentences_halfvec_index

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag._search_in_sections(text, vector, text, text[], float8[], int, int, float8, text, text, float8, float8);  -- arguments or result changed

-- function: _install_model_search sha256:04d9979f43dd71190ee7c85f5a273cba37120615107822ef37a9026f94c764db
-- rag._install_model_search: generate the corpus model's default search, whose statements are static so their plans are cached (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_search(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
(Re)creates rag._default_search_<md5(model), 12 hex digits>(p_query TEXT, p_query_embedding
vector, p_k INT) RETURNS SETOF rag.search_hit and returns its name. It is the default search
(rag.search's 'auto' resolved to two-stage) without filters or settings, for p_k 1..100: the
same rows as rag.search_two_stage merged with rag.search_sentences by rag._interleave, from
two static statements: the BM25 top 100 and the kNN top 40 (rag._branch_sql's statements),
their fusion (rag.search_hybrid's formulas, with rag._fusion_settings' defaults read at run
time), both stages (5 sections, section weight 0.3, pools 100 and 40: rag.search_two_stage's
defaults), then the 2k nearest summary sentences and their paragraphs (rag.search_sentences'
statements, in one: its halfvec index's order, decision 27). PL/pgSQL caches a static statement's plan for the
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
corpus (five queries, k 1-100, those hand-overs too), so a change of either shows.
Called by rag._ensure_vector_index (at each load of embedded rows) and by `bookrag migrate`
(every registered model after it applied migrations, and any registered model whose function
is missing), so the generated text follows the installed template. The old function is dropped
and the new one created in one transaction: other sessions see one or the other. Privileges: EXECUTE for bookrag_reader, not PUBLIC.
Cost: a DROP and a CREATE FUNCTION (milliseconds).
*/
DECLARE
    v_name TEXT := rag._model_search_name(p_model);
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
    IF to_regprocedure(format('rag.%I(text,vector,integer)', v_name)) IS NOT NULL THEN
        EXECUTE format('DROP FUNCTION rag.%I(text, vector, integer)', v_name);  -- and CREATE below, in one transaction
    END IF;
    EXECUTE format($f$
CREATE FUNCTION rag.%1$I(p_query TEXT, p_query_embedding vector, p_k INT)
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
    -- full-precision distance), their paragraphs (one chunk each), in one statement.
    PERFORM rag._set_hnsw(2 * p_k);
    WITH s AS (
        SELECT se.cited_source_file AS f, se.cited_paragraphs AS ps, (se.embedding <=> p_query_embedding)::float8 AS d
        FROM rag.sentences se WHERE se.embedding_model = %3$L
        ORDER BY se.embedding::halfvec(%2$s) <=> p_query_embedding::halfvec(%2$s) LIMIT 2 * p_k
    ), cited AS (
        SELECT s.f, p.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS p(n) GROUP BY s.f, p.n
    ), para AS (
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= 2 * p_k
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
    FROM top t WHERE t.r <= 2 * p_k;
    RETURN QUERY SELECT * FROM rag._interleave(f_rows, s_rows, st.sentence_after, st.sentence_every, p_k);
END
$body$
$f$, v_name, p_dimension, p_model);
    EXECUTE format('COMMENT ON FUNCTION rag.%I(text, vector, integer) IS %L', v_name,
                   format('The default search for model %s, generated by rag._install_model_search; do not edit.', p_model));
    EXECUTE format('REVOKE EXECUTE ON FUNCTION rag.%I(text, vector, integer) FROM PUBLIC', v_name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION rag.%I(text, vector, integer) TO bookrag_reader', v_name);
    RETURN v_name;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_search(TEXT, INT) FROM bookrag_reader;

-- function: _search_in_sections sha256:9ac2901458c679b0d984b6afff81756541b23cf5b11f31b9bd083f986d4e536d
-- rag._search_in_sections: two-stage's second search, the kept sections' paragraphs ranked from the first search's BM25 rows and their exact kNN.
CREATE OR REPLACE FUNCTION rag._search_in_sections(
    p_query           TEXT,
    p_query_embedding vector,
    p_model           TEXT,
    p_sections        TEXT[],
    p_section_scores  FLOAT8[],
    p_bm25_ids        INT[],
    p_bm25_scores     FLOAT8[],
    p_k               INT,
    p_pool            INT,
    p_section_weight  FLOAT8,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8,
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
/*
Returns the p_k best paragraphs (level 0) whose parent is one of p_sections (rag.search_hit,
best first): rag.search_two_stage's stage 2 when the first search's rows hold fewer than p_k
of them. Two branches over the sections' paragraphs, each its greatest(p_k, p_pool) best:
  bm25    with a query vector and a model: the rows given (p_bm25_ids, p_bm25_scores: the first
          search's rows, its fused top 100, that have a BM25 score, with their pg_search score)
          that are paragraphs of the sections, ranked by that score. The first search read them
          already, so there is no second pg_search query, which costs 4-5 ms at 100k rows whatever
          its filter (decision 28). A paragraph of a section outside those rows gets the BM25
          floor, as any row a branch did not read, and can come in through the kNN branch.
          Without a vector or a model the kNN branch is empty and the rows given are the
          ones the first search already ranked, so the branch is then pg_search's top rows
          for p_query inside the sections, as it always was until migration 0019 (the scan's
          limit is the constant 1000, cut to the pool after: with a parameter as its LIMIT a
          generic plan loses pg_search's top-N scan);
  vector  the exact nearest among the sections' paragraphs embedded with p_model, read
          through the parent index (OFFSET 0 keeps the planner off the HNSW scan: sections are
          small, and a filtered HNSW scan can miss rows);
then rag.search_hybrid's fusion over them (its formulas, the RRF constant 60) and its ranking
(fused score, then the better branch rank, then id), the greatest(p_k, p_pool) best kept, and
two-stage's score over those: (1 - p_section_weight) * the fused score min-max normalised over
them + p_section_weight * the section's score (p_section_scores, in p_sections' order).
Parameters (rag.search_two_stage and the generated default search pass them checked; a value
out of bounds is an error naming it, the same as in those functions: bookrag_reader can call it):
  p_query        as rag._check_search_args takes it (read only without a vector or a model)
  p_model        the corpus model (rag._corpus_model), NULL when no vector is loaded: BM25 alone
  p_sections     source_files of the kept level-1 sections, p_section_scores their scores
  p_bm25_ids, p_bm25_scores  the BM25 rows, same length (NULL or empty: none; an id given twice
                 counts with its best score; rows that are not paragraphs of the sections, or
                 are outside p_within's subtree, are ignored)
  p_k            1..1000 (rag._check_search_args)
  p_pool         1..1000
  p_section_weight 0..1
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: checked by rag._fusion_settings
                 (NULL = its defaults)
  p_within       NULL or a source_file: only paragraphs inside its subtree (rag._subtree_ids)
Until migration 0019 the BM25 branch was always a pg_search query filtered to the sections,
whose top rows a paragraph outside the first search's rows could enter: the same quality on
both halves of the three evalsets (evaluation/experiments/two_stage/second_bm25.py: mean of
recall@5 and MRR@10, tuning 0.759 both, held-out 0.689 -> 0.690; the second search ran for 3
and 98 of the tuning halves' 84 book and 600 PIAF questions). When it ran,
the rows were rag.search_hybrid(p_levels => '{0}', p_parent_files => p_sections, p_pool)'s,
which still holds with the BM25 rows that search reads given here
(tests/sql/test_search_functions.py).
Cost: a parent-index read of the sections' paragraphs and one distance each, an index lookup
per BM25 row given (a pg_search scan filtered to the sections instead, without a vector), a
fusion in memory; the plans are cached (forced generic). At 100k synthetic rows, where it runs
on almost every query, inside the generated default search (evaluation/experiments/latency/
inside.py --synthetic 100000): 8.1 ms as rag.search_hybrid (until migration 0016), 4.0-4.3 ms
with a pg_search query from a static statement (until 0019), 1.5 ms since.
*/
DECLARE
    v_pool INT := greatest(p_k, p_pool);
    v_ids  INT[];              -- p_within's subtree, NULL for none
    b_ids  INT[] := p_bm25_ids;  -- the BM25 branch's rows
    b_s    FLOAT8[] := p_bm25_scores;
    st     RECORD;
BEGIN
    PERFORM rag._check_search_args(p_query, p_k);
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_sections) IS DISTINCT FROM cardinality(p_section_scores) THEN
        RAISE EXCEPTION 'sections and section_scores must have the same length, got % and %',
            coalesce(cardinality(p_sections)::text, 'NULL'), coalesce(cardinality(p_section_scores)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(p_bm25_ids), 0) <> coalesce(cardinality(p_bm25_scores), 0) THEN
        RAISE EXCEPTION 'bm25_ids and bm25_scores must have the same length, got % and %',
            coalesce(cardinality(p_bm25_ids)::text, 'NULL'), coalesce(cardinality(p_bm25_scores)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_ids := rag._subtree_ids(p_within);
    SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, 0);
    IF p_query_embedding IS NULL OR p_model IS NULL THEN
        -- no kNN branch to add paragraphs: pg_search inside the sections (the index filters by them)
        SELECT array_agg(x.id), array_agg(x.s) INTO b_ids, b_s FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query AND n.level = ANY(ARRAY[0]) AND n.parent_source_file = ANY(p_sections)
            ORDER BY pdb.score(n.id) DESC LIMIT 1000) x;  -- a constant: pg_search's top-N scan needs one
    END IF;
    RETURN QUERY
    WITH b AS (
        SELECT y.* FROM (
            SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.sf, x.pf FROM (
                SELECT n.id, u.s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
                FROM (SELECT g.id, max(g.s) AS s FROM unnest(b_ids, b_s) AS g(id, s)
                      WHERE g.s IS NOT NULL GROUP BY g.id) u
                JOIN rag.hierarchical_content_nodes n ON n.id = u.id
                WHERE n.level = 0 AND n.parent_source_file = ANY(p_sections)
                  AND (v_ids IS NULL OR n.id = ANY(v_ids))) x
            ) y
        WHERE y.r <= v_pool
    ), v AS (
        SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.sf, y.pf FROM (
            SELECT z.* FROM (
                SELECT n.id, (n.embedding <=> p_query_embedding)::float8 AS d, n.level AS lvl,
                       n.source_file AS sf, n.parent_source_file AS pf
                FROM rag.hierarchical_content_nodes n
                WHERE n.level = 0 AND n.parent_source_file = ANY(p_sections) AND n.embedding_model = p_model
                  AND n.embedding IS NOT NULL AND p_query_embedding IS NOT NULL
                  AND (v_ids IS NULL OR n.id = ANY(v_ids))
                OFFSET 0) z
            ORDER BY z.d LIMIT v_pool) y
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
               coalesce(bx.pf, vx.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(bx.x, 0) + st.vector_weight * coalesce(vx.x, 0)
                    ELSE (st.bm25_weight * coalesce(bx.x, fl.bf) + st.vector_weight * coalesce(vx.x, fl.vf))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM bx FULL JOIN vx ON bx.id = vx.id CROSS JOIN fl
    ), top AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id)::int AS rk
        FROM f ORDER BY f.fused DESC, least(f.br, f.vr), f.id LIMIT v_pool
    ), sec AS (
        SELECT u.f, u.sc FROM unnest(p_sections, p_section_scores) AS u(f, sc)
    ), scored AS (
        SELECT t.*, sec.sc AS ssc,
               (1 - p_section_weight) * coalesce((t.fused - min(t.fused) OVER ())
                                                 / nullif(max(t.fused) OVER () - min(t.fused) OVER (), 0), 1)
               + p_section_weight * sec.sc AS final
        FROM top t JOIN sec ON sec.f = t.pf
    ), best AS (
        SELECT x.*, row_number() OVER (ORDER BY x.final DESC, x.rk, x.id)::int AS r2
        FROM scored x ORDER BY x.final DESC, x.rk, x.id LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           x.final, x.r2, x.br, x.bs, x.vr, x.vs, x.ssc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
    ORDER BY x.r2;
END
$$;

-- function: search_two_stage sha256:40dcfb4e88a37a9fbdc07bda1e9da64f689aef82c6f02454b47f5d933fb9838e
-- rag.search_two_stage: the best sections by their summaries and paragraphs, then their best paragraphs, from one hybrid search.
CREATE OR REPLACE FUNCTION rag.search_two_stage(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_sections        INT DEFAULT 5,
    p_section_weight  FLOAT8 DEFAULT 0.3,
    p_pool            INT DEFAULT 100,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_vector_pool     INT DEFAULT 40
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2), both stages over one hybrid search:
  rag.search_hybrid over every level (k = greatest(p_pool, p_k, 10 x p_sections) rows, the
  BM25 branch's pool raised to that k by rag.search_hybrid, the kNN branch's p_vector_pool; no
  chapter term); rows of levels 2-3 (parts, the book) are left out.
  1. Sections: each section (a level-1 summary's own file, a paragraph's parent) gets the best
     fused score of its rows among those, so a section is found by its summary's words or by
     its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best).
  2. Paragraphs: the level-0 rows among those whose parent is a kept section, their fused
     scores min-max normalised over them; when they are fewer than p_k, a second search over
     the kept sections' paragraphs (k and pool greatest(p_pool, p_k)) gives them instead:
     rag._search_in_sections, whose BM25 branch is the BM25 rows among those read (no second
     pg_search query since migration 0019, decision 28; without a query vector, pg_search's
     top rows inside the sections, as before) and whose kNN branch reads the sections'
     paragraphs exactly, within p_within's subtree when given. A section kept for
     its summary's score contributes only those of its paragraphs that are among the rows read
     (and, when the second search runs, its nearest paragraphs).
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best (fewer only when fewer
  of the kept sections' paragraphs match), with their branch ranks and section_score.
  Until migration 0013 stage 2 always ran that second search (and until 0012 stage 1 read the
  summaries alone); reading the first search's rows gives the same quality within one question
  of the smallest tuning half at about half the cost (decision 22; recall@5 / MRR@10 with the
  sentence branch merged by rag.search, tuning halves: Bastiat 0.619 / 0.881 both, Tocqueville
  0.667 / 0.741 -> 0.651 / 0.742, PIAF 0.908 / 0.804 -> 0.912 / 0.808; mean of the held-out
  halves 0.688 -> 0.690).
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           BM25 candidates of the first search, at least (default 100), and both
                   branches' in the second search and in the flat fallback (below); rows read
                   as said above (at most 1000).
  p_vector_pool    kNN candidates of the first search, and its ef_search (at least 40),
                   1..1000 (default 40; NULL: as BM25's).
                   Until migration 0017 it read 100, like BM25: 40 gives the same quality
                   within one question (tuning halves, mean of recall@5 and MRR@10 over the
                   three sets 0.768 -> 0.764, held-out 0.683 -> 0.683) in less time, since
                   the HNSW scan's cost follows its ef_search (decision 26).
  p_within         NULL or a source_file: only rows inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   and rag._search_in_sections (NULL = rag._fusion_settings()); the chapter
                   term is not used here (the sections already rank the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), no section is found and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: one rag.search_hybrid reading its greatest(p_pool, p_k, 10 x p_sections) best rows (100
by default, content included), then two small statements over them in memory; a second
search when the first holds fewer than p_k of the kept sections' paragraphs (k 10, each
question within its book: 6 of the books' 177 evalset questions and 83 of an evenly spread 500
of PIAF's 3,835, whose articles have about 4 paragraphs each, with the kNN top 40; 5 and 56 with
the top 100 until migration 0017; almost every query at 100k synthetic rows). With parent expansion
through rag.search, 1.3 times hybrid's time on the books in migration 0014's run of
bench/bench_search.py ("default+parent, general" against "hybrid+parent" since 0015, whose
generated function runs the plain default call: rag._install_model_search); with its second
search from static statements (0016), 2.01-2.04 times bm25 + vector at 100k rows where it was
2.22-2.25 (alternate runs, decision 25). The second search reads no text index since migration
0019 (decision 28).
*/
DECLARE
    v_short  BOOLEAN;          -- fewer than p_k of the kept sections' paragraphs among the rows read
    v_rows   rag.search_hit[];
    v_files  TEXT[];
    v_scores FLOAT8[];
    b_ids    INT[];            -- the second search's BM25 rows
    b_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, NULL, NULL);
    IF p_sections IS NULL OR p_sections < 1 OR p_sections > 100 THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', coalesce(p_sections::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The one search both stages read (every level: a levels filter costs the BM25 scan more
    -- than the few part and book rows it would keep out).
    SELECT array_agg(h ORDER BY h.rank) INTO v_rows
    FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_pool, p_k, p_sections * 10)),
                           p_book => p_book, p_pool => p_pool, p_bm25_weight => p_bm25_weight,
                           p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                           p_normalisation => p_normalisation, p_chapter_weight => 0, p_within => p_within,
                           p_vector_pool => p_vector_pool) h;

    -- Stage 1: the sections, best first, and their normalised scores.
    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score
                  FROM unnest(v_rows) h WHERE h.level <= 1) h
            WHERE h.section IS NOT NULL
            GROUP BY h.section
            ORDER BY best DESC, h.section
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool,
                                                      p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                                      p_fusion => p_fusion, p_normalisation => p_normalisation,
                                                      p_chapter_weight => 0, p_within => p_within);
        RETURN;
    END IF;

    -- Stage 2: the kept sections' paragraphs among the same rows; when those rows hold fewer
    -- than p_k of them, a search inside the kept sections (stage 2 until migration 0013), so a
    -- list is never shorter than the sections allow.
    v_short := (SELECT count(*) FROM unnest(v_rows) h WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)) < p_k;
    IF v_short THEN
        -- its BM25 rows: the kept sections' paragraphs among the first search's rows (migration
        -- 0019, decision 28); without a vector it reads pg_search inside the sections instead
        SELECT array_agg(h.id ORDER BY h.rank), array_agg(h.bm25_score ORDER BY h.rank) INTO b_ids, b_scores
        FROM unnest(v_rows) h
        WHERE h.bm25_score IS NOT NULL AND h.level = 0 AND h.parent_source_file = ANY(v_files);
        RETURN QUERY SELECT * FROM rag._search_in_sections(
            p_query, p_query_embedding, (SELECT m.model FROM rag._corpus_model(p_query_embedding) m), v_files, v_scores,
            b_ids, b_scores, p_k, p_pool, p_section_weight, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
            p_within);
        RETURN;
    END IF;
    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM unnest(v_rows) h
        WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)
    ), scored AS (
        SELECT p.*, (1 - p_section_weight) * p.norm + p_section_weight * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.f = p.parent_source_file
    )
    SELECT x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8,
           NULL::json, NULL::json, NULL::json
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_install_model_search', '04d9979f43dd71190ee7c85f5a273cba37120615107822ef37a9026f94c764db', '0019_two_stage_second_search_reads_first_bm25'),
    ('_search_in_sections', '9ac2901458c679b0d984b6afff81756541b23cf5b11f31b9bd083f986d4e536d', '0019_two_stage_second_search_reads_first_bm25'),
    ('search_two_stage', '40dcfb4e88a37a9fbdc07bda1e9da64f689aef82c6f02454b47f5d933fb9838e', '0019_two_stage_second_search_reads_first_bm25')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();

-- The generated default search of every registered model calls the new signature: generate it
-- again from the new template (bookrag migrate does too; this keeps the migration whole).
DO $$ BEGIN PERFORM rag._install_model_search(m.model, m.dimension) FROM rag.embedding_models m; END $$;
