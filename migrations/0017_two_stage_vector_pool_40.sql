-- 0017_two_stage_vector_pool_40: two-stage's first search reads the kNN top 40 instead of 100 (p_vector_pool): the same quality within one question, the HNSW scan's cost follows ef_search (issue 10's latency bound, decision 26)
-- depends: 0016_default_search_second_search_cached

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8);  -- arguments or result changed

-- function: _install_model_search sha256:daf59eeccd3eeb0674f26520b24407421c07c62d062a0f023d8f45ba61cbdbac
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
statement). PL/pgSQL caches a static statement's plan for the
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
does since migration 0016).
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
    c_file  TEXT[];
    c_par   INT[];
    c_dist  FLOAT8[];
    v_files TEXT[];            -- the kept sections, best first, and their normalised scores
    v_scores FLOAT8[];
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
                         NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY x.r2)
    INTO v_short, v_files, v_scores, f_rows
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id;
    IF v_files IS NULL THEN  -- no section: the general functions' flat fallback
        RETURN;
    END IF;
    IF v_short THEN
        -- Fewer than k paragraphs of the kept sections among the rows read: rag.search_two_stage's
        -- second search inside them, and its scoring.
        SELECT array_agg(h ORDER BY h.rank) INTO f_rows
        FROM rag._search_in_sections(p_query, p_query_embedding, %3$L, v_files, v_scores, p_k, 100, 0.3,
                                     st.fusion, st.normalisation, st.bm25_weight, st.vector_weight) h;
    END IF;
    IF f_rows IS NULL THEN  -- no paragraph of the kept sections at all: the general functions ('auto' falls back to hybrid)
        RETURN;
    END IF;
    IF st.sentence_every = 0 OR st.sentence_after >= p_k THEN
        RETURN QUERY SELECT * FROM unnest(f_rows);
        RETURN;
    END IF;
    -- The sentence branch: the 2k nearest summary sentences, their paragraphs (one chunk each).
    PERFORM rag._set_hnsw(2 * p_k);
    SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) INTO c_file, c_par, c_dist FROM (
        SELECT se.cited_source_file AS f, se.cited_paragraphs AS ps,
               (se.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s))::float8 AS d
        FROM rag.sentences se WHERE se.embedding_model = %3$L
        ORDER BY se.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s) LIMIT 2 * p_k) s, unnest(s.ps) AS p(n);
    WITH cited AS (
        SELECT c.f, c.n, 1 - min(c.d) AS sim FROM unnest(c_file, c_par, c_dist) AS c(f, n, d) GROUP BY c.f, c.n
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

-- function: search_hybrid sha256:65c101cd78a8d4141b30f8e559154ff39bf71b9463528a5b412460e3d4d7cc24
-- rag.search_hybrid: BM25 + kNN fused in one statement (normalised score combination or RRF), optionally chapter-aware.
CREATE OR REPLACE FUNCTION rag.search_hybrid(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_parent_files    TEXT[] DEFAULT NULL,
    p_pool            INT DEFAULT 40,
    p_rrf_k           INT DEFAULT 60,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_chapter_weight  FLOAT8 DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_vector_pool     INT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks of both branches fused, best first. Each branch (BM25 top p_pool,
kNN top p_pool, or p_vector_pool when given) gives every candidate a value x:
  fusion 'convex' (default): the branch score normalised over that branch's candidates,
      'zscore' (default): (s - mean) / standard deviation;
      'minmax': (s - min) / (max - min);
      (1 when all the branch's candidates score the same, a lone candidate included);
    a candidate missing from a branch gets that branch's floor: its lowest x, or 0 if that is
    higher (minmax: 0; a branch of one candidate: 0, so its lone hit keeps its lead), and
    fused = (bm25_weight * x_bm25 + vector_weight * x_vector) / (bm25_weight + vector_weight).
  fusion 'rrf': x = 1 / (rrf_k + branch rank), a missing branch adding 0, and
    fused = bm25_weight * x_bm25 + vector_weight * x_vector (Reciprocal Rank Fusion).
Chapter-aware ranking: a paragraph (level 0) takes a share p_chapter_weight of its score from
its chapter, the node it hangs from (its parent summary.md): score = (1 - chapter_weight) *
fused + chapter_weight * chapter, where chapter is the best fused score of that summary's
chunks among the candidates (both branches count), or the fused floor when the summary is not
a candidate; section_score carries that chapter value. Other levels keep score = fused
(section_score NULL). To let chapter summaries compete when p_levels or p_node_type would
exclude them, the branches then also take level-1 rows, and the filters are applied to the
fused result (so fewer than p_k rows may come back in rare cases).
Citation-aware ranking (p_cite_weight > 0): the paragraphs a candidate chapter-summary chunk
cites with its anchors ([§12–14], rag.citations) join the candidates even when no branch found
them (their BM25 value is the branch floor, their vector value their own similarity normalised
like the branch's); a paragraph then takes a share cite_weight of its score from the best fused
score of the candidate chunks citing it (the floor when none does):
score = (1 - chapter_weight - cite_weight) * fused + chapter_weight * chapter + cite_weight * cite.
Ties are broken by the best branch rank, then id. Each row carries its branch ranks and raw
scores (NULL where the chunk was not in that branch's pool).
Parameters:
  p_query            words for the BM25 branch (required, as in rag.search_branch).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 counts.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files, p_within: filters, applied identically to
                     both branches (p_within: a source_file, only its subtree; see rag.search_branch).
  p_pool             candidates taken from each branch, 1..1000 (default 40; at least p_k): the
                     HNSW scan's ef_search is raised to it, so 40 costs what a top-10 kNN costs.
  p_vector_pool      candidates taken from the kNN branch when it should read fewer (or more)
                     than the BM25 branch, 1..1000, not raised to p_k (default NULL: the
                     same as BM25's). The HNSW scan's ef_search follows it instead of p_pool,
                     never below 40 (rag._set_hnsw), so a pool under 40 reads fewer rows for
                     the same cost. rag.search_two_stage reads 100 BM25 candidates and 40 kNN
                     ones in its first search (decision 26).
  p_rrf_k            the RRF constant (default 60), >= 1; used by 'rrf' only.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight:
                     NULL = the default; defaults and bounds are rag._fusion_settings's (convex,
                     zscore, 0.5, 0.5, 0.4, cite 0; names 'rrf'|'convex' and 'minmax'|'zscore',
                     weights finite, >= 0 and not both 0, chapter and cite weights 0..1, sum <= 1).
Rows without an embedding compete on BM25 alone.
Cost: a pg_search top-N scan of p_pool rows and an HNSW scan of p_pool (or p_vector_pool)
rows (two small dynamic statements), then one static statement (cached plan) fusing the two
pools' candidates in memory and reading the p_k rows returned (bench/bench_search.py).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    st           RECORD;
    v_model      TEXT;
    v_dim        INT;
    v_pool       INT;
    v_vpool      INT;          -- the kNN branch's candidates
    v_within     INT[];
    v_levels     INT[] := p_levels;
    v_node_type  TEXT := p_node_type;
    v_refilter   BOOLEAN := false;
    v_floor      FLOAT8;
    v_mean       FLOAT8;  -- the vector branch's raw scores: what a cited paragraph's similarity is normalised by
    v_sd         FLOAT8;
    v_min        FLOAT8;
    v_max        FLOAT8;
    -- each branch's candidates, best first: id, normalised x, raw score, level, node_type,
    -- source_file, parent; and the branch's floor
    b_id INT[]; b_x FLOAT8[]; b_s FLOAT8[]; b_lvl INT[]; b_nt TEXT[]; b_sf TEXT[]; b_pf TEXT[]; b_floor FLOAT8;
    v_id INT[]; v_x FLOAT8[]; v_s FLOAT8[]; v_lvl INT[]; v_nt TEXT[]; v_sf TEXT[]; v_pf TEXT[]; v_floor_v FLOAT8;
    -- a branch's candidates as arrays, x computed over the pool: $9 fusion, $10 rrf_k, $11 normalisation
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                               p_chapter_weight, p_cite_weight);
    IF p_rrf_k IS NULL OR p_rrf_k < 1 THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', coalesce(p_rrf_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_vector_pool < 1 OR p_vector_pool > 1000 THEN  -- NULL: the BM25 pool
        RAISE EXCEPTION 'vector_pool must be between 1 and 1000, got %', p_vector_pool
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_within IS NOT NULL THEN
        v_within := rag._subtree_ids(p_within, p_book);
    END IF;
    IF st.chapter_weight > 0 AND ((p_levels IS NOT NULL AND NOT 1 = ANY(p_levels)) OR p_node_type = 'source') THEN
        v_levels := CASE WHEN p_levels IS NULL THEN NULL ELSE p_levels || 1 END;
        v_node_type := NULL;
        v_refilter := true;
    END IF;
    v_pool := greatest(p_pool, p_k);
    v_vpool := coalesce(p_vector_pool, v_pool);

    -- The two index scans, each a small statement of its own ($1..$8 as in rag._branch_sql).
    EXECUTE rag._collect_sql(rag._branch_sql('bm25', NULL, NULL, p_book, v_levels, v_node_type, p_parent_files, v_within))
    INTO b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf, b_floor
    USING p_query, NULL::vector, p_book, v_levels, v_node_type, p_parent_files, v_pool, v_within,
          st.fusion, p_rrf_k, st.normalisation;
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        IF v_model IS NOT NULL THEN
            PERFORM rag._set_hnsw(v_vpool);
            EXECUTE rag._collect_sql(rag._branch_sql('vector', v_model, v_dim, p_book, v_levels, v_node_type,
                                                      p_parent_files, v_within))
            INTO v_id, v_x, v_s, v_lvl, v_nt, v_sf, v_pf, v_floor_v
            USING NULL::text, p_query_embedding, p_book, v_levels, v_node_type, p_parent_files, v_vpool, v_within,
                  st.fusion, p_rrf_k, st.normalisation;
        END IF;
    END IF;
    b_floor := coalesce(b_floor, 0);
    v_floor_v := coalesce(v_floor_v, 0);
    SELECT avg(x), stddev_pop(x), min(x), max(x) INTO v_mean, v_sd, v_min, v_max FROM unnest(v_s) AS x;
    -- what a row absent from both branches would score: a chapter summary that is no candidate
    v_floor := CASE WHEN st.fusion = 'rrf' THEN 0
                    ELSE (st.bm25_weight * b_floor + st.vector_weight * v_floor_v) / (st.bm25_weight + st.vector_weight) END;

    -- The fusion: a static statement over the two candidate lists (its plan is cached).
    RETURN QUERY
    WITH f AS (
        SELECT coalesce(b.id, v.id) AS id, b.r::int AS br, b.s AS bs, v.r::int AS vr, v.s AS vs,
               coalesce(b.lvl, v.lvl) AS lvl, coalesce(b.nt, v.nt) AS nt, coalesce(b.sf, v.sf) AS sf,
               coalesce(b.pf, v.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(b.x, 0) + st.vector_weight * coalesce(v.x, 0)
                    ELSE (st.bm25_weight * coalesce(b.x, b_floor) + st.vector_weight * coalesce(v.x, v_floor_v))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM unnest(b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf) WITH ORDINALITY AS b(id, x, s, lvl, nt, sf, pf, r)
        FULL JOIN unnest(v_id, v_x, v_s, v_lvl, v_nt, v_sf, v_pf) WITH ORDINALITY AS v(id, x, s, lvl, nt, sf, pf, r)
          ON b.id = v.id
    ), cited AS (  -- paragraphs cited by candidate chapter-summary chunks: the best citing chunk's score
        SELECT n.id, max(f.fused) AS cite
        FROM f
        JOIN rag.hierarchical_content_nodes s ON s.id = f.id
        JOIN rag.citations ci ON ci.source_file = s.source_file AND ci.chunk_index = s.chunk_index
        JOIN rag.hierarchical_content_nodes n ON n.source_file = ci.cited_source_file AND n.paragraph = ci.cited_paragraph
        WHERE st.cite_weight > 0 AND f.lvl = 1 AND ci.cited_paragraph IS NOT NULL
          AND (p_levels IS NULL OR 0 = ANY(p_levels)) AND (p_node_type IS NULL OR p_node_type = 'source')
          AND (p_parent_files IS NULL OR n.parent_source_file = ANY(p_parent_files))
          AND (v_within IS NULL OR n.id = ANY(v_within))
        GROUP BY n.id
    ), f2 AS (  -- the candidates, and cited paragraphs no branch found (BM25 floor, own similarity)
        SELECT f.*, ct.cite FROM f LEFT JOIN cited ct ON ct.id = f.id
        UNION ALL
        SELECT n.id, NULL, NULL, NULL, NULL, n.level, n.node_type, n.source_file, n.parent_source_file,
               CASE WHEN st.fusion = 'rrf' THEN 0
                    ELSE (st.bm25_weight * b_floor + st.vector_weight * coalesce(
                             CASE WHEN n.embedding IS NULL OR n.embedding_model IS DISTINCT FROM v_model THEN NULL
                                  WHEN st.normalisation = 'minmax'
                                  THEN ((1 - (n.embedding <=> p_query_embedding)) - v_min) / nullif(v_max - v_min, 0)
                                  ELSE ((1 - (n.embedding <=> p_query_embedding)) - v_mean) / nullif(v_sd, 0) END,
                             v_floor_v)) / (st.bm25_weight + st.vector_weight) END,
               ct.cite
        FROM cited ct JOIN rag.hierarchical_content_nodes n ON n.id = ct.id
        WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.id = ct.id)
    ), ch AS (  -- each chapter summary among the candidates: its best chunk
        SELECT f.sf, max(f.fused) AS cs FROM f WHERE f.lvl = 1 AND st.chapter_weight > 0 GROUP BY f.sf
    ), c AS (
        SELECT f.*, CASE WHEN f.lvl = 0 AND st.chapter_weight > 0 THEN coalesce(ch.cs, v_floor) END AS cs
        FROM f2 AS f LEFT JOIN ch ON ch.sf = f.pf
    ), top AS (
        SELECT f.id, f.br, f.bs, f.vr, f.vs, f.cs,
               CASE WHEN f.lvl <> 0 THEN f.fused
                    ELSE (1 - st.chapter_weight - st.cite_weight) * f.fused
                         + st.chapter_weight * coalesce(f.cs, 0) + st.cite_weight * coalesce(f.cite, v_floor) END AS score
        FROM c AS f
        WHERE NOT v_refilter OR ((p_levels IS NULL OR f.lvl = ANY(p_levels)) AND (p_node_type IS NULL OR f.nt = p_node_type))
        ORDER BY score DESC, least(f.br, f.vr), f.id
        LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, least(top.br, top.vr), top.id))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, least(top.br, top.vr), top.id;
END
$$;

-- function: search_two_stage sha256:afb1ce9d13afbda545919695336b32789c79b973d059aba298d758959f1fb30f
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
     rag._search_in_sections (static statements, migration 0016, decision 25), or with
     p_within rag.search_hybrid restricted to the sections and the subtree (as every second
     search until 0016). A section kept for its summary's score contributes only those of its
     paragraphs that are among the rows read (unless the second search runs).
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
2.22-2.25 (alternate runs, decision 25).
*/
DECLARE
    v_short  BOOLEAN;          -- fewer than p_k of the kept sections' paragraphs among the rows read
    v_rows   rag.search_hit[];
    v_files  TEXT[];
    v_scores FLOAT8[];
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
    IF v_short AND p_within IS NULL THEN
        -- its static statements (migration 0016; the kept sections are in p_book already)
        RETURN QUERY SELECT * FROM rag._search_in_sections(
            p_query, p_query_embedding, (SELECT m.model FROM rag._corpus_model(p_query_embedding) m), v_files, v_scores,
            p_k, p_pool, p_section_weight, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight);
        RETURN;
    ELSIF v_short THEN
        -- within a subtree: the hybrid search with its filters
        SELECT array_agg(h ORDER BY h.rank) INTO v_rows
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool, p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                               p_fusion => p_fusion, p_normalisation => p_normalisation,
                               p_chapter_weight => 0, p_within => p_within) h;
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

GRANT EXECUTE ON FUNCTION rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8, int) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8, int) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_install_model_search', 'daf59eeccd3eeb0674f26520b24407421c07c62d062a0f023d8f45ba61cbdbac', '0017_two_stage_vector_pool_40'),
    ('search_hybrid', '65c101cd78a8d4141b30f8e559154ff39bf71b9463528a5b412460e3d4d7cc24', '0017_two_stage_vector_pool_40'),
    ('search_two_stage', 'afb1ce9d13afbda545919695336b32789c79b973d059aba298d758959f1fb30f', '0017_two_stage_vector_pool_40')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
