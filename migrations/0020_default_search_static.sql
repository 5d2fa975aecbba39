-- 0020_default_search_static: rag.search builds each parent's JSON once; the generated default search looks up the k sentence-branch paragraphs rag._interleave can read, not 2k, and has one fixed name, rag._default_search, which rag._search_hits calls statically (same rows, less time: issue 10)
-- depends: 0019_two_stage_second_search_reads_first_bm25

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
-- dropped: _model_search_name
DROP FUNCTION IF EXISTS rag._model_search_name(text);  -- its file was deleted

-- function: _default_search sha256:f3e7cfe2d1a2922fd03a402fb8f139cd28b955ffc41a0019f01b1ab40f4eb5cc
-- rag._default_search: the corpus model's generated default search; as installed by this file, a stand-in that returns nothing.
CREATE OR REPLACE FUNCTION rag._default_search(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
The name rag._search_hits calls, statically, for the plain default search (mode 'auto' or
'two-stage' without book, within or settings, k 1..100, a query vector). rag._install_model_search
replaces this body (CREATE OR REPLACE: same signature, same privileges) with the corpus model's
generated search at each load of embedded rows and after migrations; this file's version, which
a migration installs, is the stand-in until then (a corpus without vectors): it returns no row,
so rag._search_hits runs the general functions. The generated version also returns no row for
a corpus whose registered model is not the one it was generated for (or not the only one), or
a query vector of another dimension: the general functions then answer, or raise the error
that names the mismatch. A fixed name lets rag._search_hits call it without EXECUTE and without
looking the name up (0.25 ms p50 less per default search on the books: decision 29).
Parameters: p_query, p_query_embedding, p_k as rag.search's.
Cost: none here; the generated version's is rag.search's default (README, Latency).
*/
BEGIN
    RETURN;
END
$$;

-- function: _install_model_search sha256:bbdd53766e88626e54fb3db707bdd793c607e444cf1266803c2572bf5d998594
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

-- function: _search_hits sha256:918ea9a620de0535104c8670dcdaf229c15b15e698490fdcfa2a61aae299050a
-- rag._search_hits: the mode dispatcher behind rag.search (the mode list is defined and checked here).
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT,
    p_k               INT,
    p_book            TEXT,
    p_levels          INT[],
    p_node_type       TEXT,
    p_within          TEXT,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8,
    p_chapter_weight  FLOAT8,
    p_cite_weight     FLOAT8,
    p_sentence_after  INT,
    p_sentence_every  INT,
    p_expand          TEXT[],
    p_query_model     TEXT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Checks rag.search's arguments and runs the search named by p_mode, returning its rows
(rag.search_hit, best first), unchanged except in 'hybrid' and 'two-stage':
  'auto'       the default (since migration 0014, decision 23): 'two-stage' when the filters
               allow paragraphs (no levels filter or levels {0}, no node_type or 'source'),
               'hybrid' otherwise (levels naming a summary level, node_type 'summary'), so the
               default ranks paragraphs inside the best sections and still finds summaries
               when asked for them; and 'hybrid' too when two-stage finds no paragraph (the
               words are only in summaries and there is no query vector: a corpus without
               vectors), so the default never answers nothing where hybrid answers. Two-stage
               is never below hybrid on any set, tuning or held-out half, and ahead on the mean
               (recall@5 / MRR@10 held-out: Bastiat 0.500 / 0.582 against 0.500 / 0.572,
               Tocqueville 0.615 / 0.712 against 0.600 / 0.659, PIAF paragraphs 0.917 / 0.812
               against 0.890 / 0.738), at about hybrid's time for the plain call (the generated
               function below; 1.3 times through the general functions). Chapter and cite
               weights only act when it runs hybrid.
  'hybrid'     rag.search_hybrid (both branches fused over every level), with the sentence
               branch's paragraphs (rag.search_sentences) in the places p_sentence_after
               and p_sentence_every give them (rag._fusion_settings), interleaved: place
               p (1..k) is the sentence branch's when p > sentence_after and
               (p - sentence_after - 1) is a multiple of sentence_every, the fused list's
               otherwise; each place takes its list's next row whose paragraph (any of its
               chunks) is not placed yet (a fused row: not placed by the branch, so two chunks
               of one long paragraph in the fused list both stay), so a paragraph both lists
               hold takes the better of its two places; when one list runs out, the other
               fills the remaining places.
               The merged list is ranked again 1..k (a placed row's score is its sentence
               score, and it keeps the fused row's branch columns when the fused list holds
               the same chunk; rank, not score, orders the list). Not applied when the filters
               exclude paragraphs (levels without 0, node_type 'summary') or without a
               query vector.
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only, so levels {0} and node_type
               'source' are the only filters it takes, and change nothing), merged
               with the sentence branch as 'hybrid' is (its list in place of the fused one).
               Measured on the tuning halves (recall@5 / MRR@10, Bastiat 0.571 / 0.864 ->
               0.571 / 0.881, Tocqueville 0.556 / 0.718 -> 0.667 / 0.741; PIAF, without
               sentences, unchanged): decision 21. p_sentence_every 0 gives the sections-only list.
Any other mode is an error naming it (the list: auto, hybrid, two-stage, bm25, vector); so is
a word of p_expand other than 'parent' and 'cited', and a p_query_model that is not the corpus
model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid and two-stage add rag.search_sentences and
the merge (rag._interleave; about 1.1 ms per search on the two books, 3.1 ms at 100k rows:
bench/bench_search.py, migration 0011). Two-stage without book, within or settings, k 1..100 and
a query vector (the default's usual call) runs instead from the corpus model's generated function
(rag._default_search, written by rag._install_model_search, migration 0015, decision 24): the
same rows from statements whose plans are cached, about a third less time on the books (7.0
against 10.5 ms p50 with parent expansion, bench/bench_search.py, migration 0015; 5.56 against
9.03 ms with migration 0020), called statically since migration 0020 (decision 29); the
general functions when it returns nothing.
*/
DECLARE
    v_mode  TEXT := p_mode;    -- the mode run ('auto' resolved)
    v_model TEXT;
    st      RECORD;
    f_rows  rag.search_hit[];  -- the mode's list (hybrid's or two-stage's), best first
    s_rows  rag.search_hit[];  -- the sentence branch's paragraphs, best first
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) AND coalesce(p_node_type, 'source') = 'source'
                       THEN 'two-stage' ELSE 'hybrid' END;
    END IF;
    IF v_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        -- it returns paragraphs only: the filters that say so are accepted (and change nothing)
        PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
        IF NOT coalesce(p_levels <@ ARRAY[0], true) OR coalesce(p_node_type, 'source') <> 'source' THEN
            RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0} and no node_type but source, got levels %, node_type %',
                coalesce(p_levels::text, 'NULL'), coalesce(p_node_type, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query_model IS NOT NULL AND p_query_embedding IS NOT NULL THEN
        SELECT m.model INTO v_model FROM rag._corpus_model(NULL) m;
        IF v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF v_mode IN ('hybrid', 'two-stage') THEN
        -- The default without filters or settings: rag._default_search, the corpus model's
        -- generated function, runs the same search from statements whose plans are cached
        -- (decision 24), called statically (decision 29); no row from it (no section, or no
        -- paragraph of the kept sections, found; or not generated for this corpus) means the
        -- statements below.
        IF v_mode = 'two-stage' AND p_book IS NULL AND p_within IS NULL AND p_query_embedding IS NOT NULL
           AND p_k BETWEEN 1 AND 100
           AND num_nulls(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                         p_sentence_after, p_sentence_every) = 8 THEN
            RETURN QUERY SELECT * FROM rag._default_search(p_query, p_query_embedding, p_k);
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        -- The mode's own list, best first (the fusion settings above are checked in both modes,
        -- though two-stage does not use chapter_weight and cite_weight).
        IF v_mode = 'hybrid' THEN
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                     p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                     p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                     p_cite_weight => p_cite_weight) b;
        ELSE
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
                     p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
                     p_vector_weight => p_vector_weight) b;
            IF f_rows IS NULL AND p_mode = 'auto' THEN
                -- no paragraph of the best sections matches (words found only in summaries, and no
                -- query vector): 'auto' gives the hybrid list, summaries included, rather than nothing
                SELECT array_agg(b ORDER BY b.rank) INTO f_rows
                FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                         p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                         p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                         p_cite_weight => p_cite_weight) b;
            END IF;
        END IF;
        IF st.sentence_every = 0 OR st.sentence_after >= p_k OR p_query_embedding IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) OR p_node_type = 'summary' THEN
            RETURN QUERY SELECT * FROM unnest(f_rows);
            RETURN;
        END IF;
        -- Merge: the sentence branch's paragraphs into their places (rag._interleave).
        SELECT array_agg(s ORDER BY s.rank) INTO s_rows
        FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s;
        RETURN QUERY SELECT * FROM rag._interleave(f_rows, s_rows, st.sentence_after, st.sentence_every, p_k);
    ELSE
        RETURN QUERY SELECT * FROM rag.search_branch(p_query, p_query_embedding, v_mode, p_k, p_book, p_levels, p_node_type,
                                                     p_within);
    END IF;
END
$$;

-- function: search sha256:26b477e57df4ed6562c8f20edc2d05854dc4b185befcfb2d4b961b3772a07076
-- rag.search: one entry point for every search mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT DEFAULT 'auto',
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_chapter_weight  FLOAT8 DEFAULT NULL,
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_sentence_after  INT DEFAULT NULL,
    p_sentence_every  INT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Runs the search named by p_mode (rag._search_hits checks every argument and dispatches) and
returns its rows (rag.search_hit, best first) with cites, parent and cited filled:
  'auto'       the default: 'two-stage' when the filters allow paragraphs (none, levels {0},
               node_type 'source'), 'hybrid' when they ask for summaries or when two-stage
               finds no paragraph (decision 23)
  'hybrid'     rag.search_hybrid (both branches fused, every level), with places for the
               sentence branch (rag.search_sentences; see rag._search_hits)
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only: levels {0} and node_type
               'source' are the only filters it takes), with
               the same places for the sentence branch
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_sentence_after and p_sentence_every by both,
p_chapter_weight and p_cite_weight by 'hybrid' (checked in both: rag._fusion_settings).
  p_expand       what to attach to each hit, any of:
                   'parent'  the hit's parent node rows (rag.get_node of parent_source_file), as JSON;
                   'cited'   the rows a summary hit's anchors cite (rag.get_citations), as JSON.
                 NULL or '{}' = nothing; any other word is an error naming it. cites (what a
                 summary hit's anchors cite, compactly) is always filled.
  p_query_model  the model p_query_embedding was made with; when given and not the corpus model
                 the call is refused (a vector of another model with the same length would
                 otherwise be compared silently). NULL = not checked.
Cost: the called function's, plus one indexed lookup per summary hit for cites, per distinct
parent for 'parent' (hits of one section share one built JSON: two-stage's k hits come from at
most 5 sections, 4.3 distinct parents for 10 hits on the books' bench queries) and per hit for
'cited'. A SQL function without settings, so the caller's statement inlines it (one plan,
cached with a prepared statement) and an expansion not asked for is never run.
*/
    WITH h AS MATERIALIZED (
        SELECT * FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type,
                                       p_within, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                       p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every,
                                       p_expand, p_query_model)
    ), parents AS (  -- each parent node's rows as JSON, built once however many hits share it
        SELECT f.file, (SELECT json_agg(row_to_json(p) ORDER BY p.chunk_index) FROM rag.get_node(f.file) p) AS rows
        FROM (SELECT DISTINCT h.parent_source_file AS file FROM h
              WHERE 'parent' = ANY(p_expand) AND h.parent_source_file IS NOT NULL) f
    )
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           CASE WHEN h.level = 0 THEN '[]'::json ELSE rag.cites(h.source_file, h.chunk_index) END,
           CASE WHEN 'parent' = ANY(p_expand) THEN coalesce(parents.rows, '[]'::json) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

DELETE FROM rag.function_versions WHERE name IN ('_model_search_name');

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_default_search', 'f3e7cfe2d1a2922fd03a402fb8f139cd28b955ffc41a0019f01b1ab40f4eb5cc', '0020_default_search_static'),
    ('_install_model_search', 'bbdd53766e88626e54fb3db707bdd793c607e444cf1266803c2572bf5d998594', '0020_default_search_static'),
    ('_search_hits', '918ea9a620de0535104c8670dcdaf229c15b15e698490fdcfa2a61aae299050a', '0020_default_search_static'),
    ('search', '26b477e57df4ed6562c8f20edc2d05854dc4b185befcfb2d4b961b3772a07076', '0020_default_search_static')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();

-- The per-model generated functions of migrations 0015-0019, rag._default_search_<md5(model)[:12]>:
-- rag._default_search replaces them. Then the registered model's, generated again from the new
-- template into that name (bookrag migrate does too; this keeps the migration whole).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = 'rag'::regnamespace AND p.proname ~ '^_default_search_[0-9a-f]{12}$' LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
    PERFORM rag._install_model_search(m.model, m.dimension) FROM rag.embedding_models m;
END $$;
