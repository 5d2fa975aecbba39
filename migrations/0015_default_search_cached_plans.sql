-- 0015_default_search_cached_plans: the default search without filters runs from a function generated per model, whose static statements keep their plans (decision 24); the merge in one function, rag._interleave
-- depends: 0014_default_mode_auto

-- function: _ensure_vector_index sha256:fcf98a9f042b3cf5a29ab9460cb39195afb868032fc482c593cebc1b39197be9
-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Registers (p_model, p_dimension) in rag.embedding_models and creates, if missing, the HNSW
cosine index on embedding::vector(p_dimension) restricted to rows WHERE embedding_model =
p_model: the exact expression and predicate rag._branch_sql uses, so the kNN branch can use it
whatever the model's dimension; and the same index on rag.sentences (named sent_hnsw_…), the
one rag.search_sentences scans; then (re)generates the model's default search
(rag._install_model_search), whose statements name the same expression. Returns the chunks' index name. A model already registered with
another dimension is an error. Cost: index creation is O(rows of the model) (100k 384-d rows in 140 s with the default
64MB maintenance_work_mem); instant when it exists.
*/
DECLARE
    v_dim   INT;
    v_index TEXT := 'hcn_hnsw_' || substr(md5(p_model), 1, 12);
    v_table TEXT;
    v_name  TEXT;
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL AND v_dim <> p_dimension THEN
        RAISE EXCEPTION 'model "%" is registered with dimension %, not %', p_model, v_dim, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_dim IS NULL THEN
        INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES (p_model, p_dimension, v_index);
    END IF;
    FOR v_table, v_name IN VALUES ('hierarchical_content_nodes', v_index),
                                  ('sentences', 'sent_hnsw_' || substr(md5(p_model), 1, 12)) LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON rag.%I '
            'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
            v_name, v_table, p_dimension, p_model);
    END LOOP;
    PERFORM rag._install_model_search(p_model, p_dimension);
    RETURN v_index;
END
$$;

-- function: _install_model_search sha256:eb662c54e63bf87e393c7bc20cc91f3f754c2de8a148b35fbcc1c86fd3fea87b
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
two static statements: the BM25 and kNN top 100 (rag._branch_sql's statements), their fusion
(rag.search_hybrid's formulas,
with rag._fusion_settings' defaults read at run time), both stages (5 sections, section
weight 0.3: rag.search_two_stage's defaults), then the 2k nearest summary sentences and their
paragraphs (rag.search_sentences' statement). PL/pgSQL caches a static statement's plan for the
session (forced generic, so that the planner never goes back to planning them per call), which
the general functions cannot have: the kNN statement must name the model and its
dimension as literals (the partial HNSW index's predicate and expression), so they build it
anew, planned on every call. Here the model and dimension are formatted in when the function is
generated (%L, a number; a model name with a $ gets no function, since %L does not escape
it), as rag._ensure_vector_index formats them into the index. Measured: evaluation/experiments/
latency/ (the same rows on every question of the two books' evalsets and 200 of PIAF's, at k
1-30) and decision 24: about a third less time on the books.
When the rows read hold fewer than p_k paragraphs of the kept sections it runs
rag.search_two_stage's second search inside them (rag.search_hybrid, as that function does).
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
SET hnsw.ef_search = 100
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
    -- Both branches' top 100 (two-stage's pool, so ef_search 100), the fusion over them, the 100
    -- best (rag.search_hybrid's rows), the 5 best sections, their paragraphs and the k rows kept.
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
            ORDER BY n.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s) LIMIT 100) y
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
        -- second search, inside those sections, and its scoring.
        WITH sec AS (
            SELECT u.f, u.sc FROM unnest(v_files, v_scores) AS u(f, sc)
        ), para AS (
            SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k => greatest(p_k, 100), p_levels => ARRAY[0],
                                   p_parent_files => v_files, p_pool => 100, p_chapter_weight => 0) h
            WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)
        ), scored AS (
            SELECT p.*, (1 - 0.3::float8) * p.norm + 0.3::float8 * sec.sc AS final, sec.sc AS ssc
            FROM para p JOIN sec ON sec.f = p.parent_source_file
        ), best AS (
            SELECT x.*, row_number() OVER (ORDER BY x.final DESC, x.rank, x.id)::int AS r2
            FROM scored x ORDER BY x.final DESC, x.rank, x.id LIMIT p_k
        )
        SELECT array_agg(ROW(x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
                             x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
                             x.final, x.r2, x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int,
                             NULL::float8, NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY x.r2)
        INTO f_rows FROM best x;
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

-- function: _interleave sha256:c83aefed5062855ee2c4e31ee2c06c93179363b873e54ac8c5f4d76826dea2d2
-- rag._interleave: a mode's list and the sentence branch's merged into the places the fusion settings give the branch.
CREATE OR REPLACE FUNCTION rag._interleave(
    p_rows      rag.search_hit[],
    p_sentences rag.search_hit[],
    p_after     INT,
    p_every     INT,
    p_k         INT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns at most p_k rows, ranked again 1..k: place p (1..k) is the sentence branch's
(p_sentences, best first) when p > p_after and (p - p_after - 1) is a multiple of p_every, the
mode's list's (p_rows, best first) otherwise; each place takes its list's next row whose
paragraph (any of its chunks) is not placed yet (a row of p_rows: not placed by the branch, so
two chunks of one long paragraph in that list both stay), so a paragraph both lists hold takes
the better of its two places; when one list runs out, the other fills the remaining places. A
placed sentence-branch row keeps its sentence score and takes the branch columns (bm25_*,
vector_*, section_score) of the same chunk later in p_rows. A row's key: a paragraph's is its
file and number; other rows keep their id. The greedy interleave of
evaluation/experiments/sentence_anchors/slots.py; rag._search_hits (hybrid and two-stage) and
the generated default search (rag._install_model_search) call it, so both merge alike.
Parameters: p_after >= 0 and p_every >= 1 (rag._fusion_settings checks them); p_k >= 1.
Cost: a loop over at most k + 2k rows in memory (the ANY() checks are over at most k keys).
*/
DECLARE
    f_keys  TEXT[] := '{}';
    s_keys  TEXT[] := '{}';
    v_fi    INT := 1;
    v_si    INT := 1;
    v_n     INT := 0;
    v_seen  TEXT[] := '{}';    -- the keys placed so far, and those the sentence branch placed
    v_seen_s TEXT[] := '{}';
    v_take  BOOLEAN;
    f_rows  rag.search_hit[] := coalesce(p_rows, '{}');
    s_rows  rag.search_hit[] := coalesce(p_sentences, '{}');
    r       rag.search_hit;
BEGIN
    FOR i IN 1 .. cardinality(f_rows) LOOP
        f_keys[i] := CASE WHEN (f_rows[i]).level = 0 THEN (f_rows[i]).source_file || '#' || (f_rows[i]).paragraph
                          ELSE (f_rows[i]).id::text END;
    END LOOP;
    FOR i IN 1 .. cardinality(s_rows) LOOP
        s_keys[i] := (s_rows[i]).source_file || '#' || (s_rows[i]).paragraph;
    END LOOP;
    WHILE v_n < p_k AND (v_fi <= cardinality(f_rows) OR v_si <= cardinality(s_rows)) LOOP
        v_take := (v_si <= cardinality(s_rows) AND v_n >= p_after AND (v_n - p_after) % p_every = 0)
                  OR v_fi > cardinality(f_rows);
        IF v_take THEN
            WHILE v_si <= cardinality(s_rows) AND s_keys[v_si] = ANY(v_seen) LOOP
                v_si := v_si + 1;
            END LOOP;
            CONTINUE WHEN v_si > cardinality(s_rows);
            r := s_rows[v_si];
            FOR i IN v_fi .. cardinality(f_rows) LOOP  -- the same chunk later in the mode's list: its branch columns too
                IF (f_rows[i]).id = r.id THEN
                    r.bm25_rank := (f_rows[i]).bm25_rank;
                    r.bm25_score := (f_rows[i]).bm25_score;
                    r.vector_rank := (f_rows[i]).vector_rank;
                    r.vector_score := (f_rows[i]).vector_score;
                    r.section_score := (f_rows[i]).section_score;
                    EXIT;
                END IF;
            END LOOP;
            v_seen := v_seen || s_keys[v_si];
            v_seen_s := v_seen_s || s_keys[v_si];
            v_si := v_si + 1;
        ELSE
            WHILE v_fi <= cardinality(f_rows) AND f_keys[v_fi] = ANY(v_seen_s) LOOP
                v_fi := v_fi + 1;
            END LOOP;
            CONTINUE WHEN v_fi > cardinality(f_rows);
            r := f_rows[v_fi];
            v_seen := v_seen || f_keys[v_fi];
            v_fi := v_fi + 1;
        END IF;
        v_n := v_n + 1;
        r.rank := v_n;
        RETURN NEXT r;
    END LOOP;
END
$$;

-- function: _model_search_name sha256:575e0a53e8c958606278cf3e712630b5c36cc7107857527c10dc5ff804e113cd
-- rag._model_search_name: the name of a model's generated default search (rag._install_model_search).
CREATE OR REPLACE FUNCTION rag._model_search_name(
    p_model TEXT
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns '_default_search_' followed by the first 12 hex digits of md5(p_model) (NULL for a NULL
model): the function rag._install_model_search creates in schema rag, which rag._search_hits
calls and `bookrag migrate` regenerates. The one place this name is made.
Cost: one md5 of the name.
*/
    SELECT '_default_search_' || substr(md5(p_model), 1, 12);
$$;

-- function: _search_hits sha256:2325f471345eeb525c55cef869845a485147e34b2a9a5537f57fa08ab3355627
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
(rag._install_model_search, migration 0015, decision 24): the same rows from statements whose
plans are cached, about a third less time on the books (7.0 against 10.5 ms p50 with parent
expansion, bench/bench_search.py); the general functions when it is missing or returns nothing.
*/
DECLARE
    v_mode  TEXT := p_mode;    -- the mode run ('auto' resolved)
    v_model TEXT;
    v_fast  TEXT;              -- the generated default search of the corpus model (rag._install_model_search)
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
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        -- The default without filters or settings: the corpus model's generated function runs the
        -- same search from statements whose plans are cached (decision 24); no row from it (no
        -- section, or no paragraph of the kept sections, found) means the statements below.
        IF v_mode = 'two-stage' AND p_book IS NULL AND p_within IS NULL AND p_query_embedding IS NOT NULL
           AND p_k BETWEEN 1 AND 100
           AND num_nulls(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                         p_sentence_after, p_sentence_every) = 8 THEN
            PERFORM rag._check_search_args(p_query, p_k, NULL, NULL, NULL);
            SELECT m.model INTO v_model FROM rag._corpus_model(p_query_embedding) m;
            v_fast := rag._model_search_name(v_model);
            IF v_fast IS NOT NULL AND to_regprocedure(format('rag.%I(text,vector,integer)', v_fast)) IS NOT NULL THEN
                RETURN QUERY EXECUTE format('SELECT * FROM rag.%I($1, $2, $3)', v_fast)
                    USING p_query, p_query_embedding, p_k;
                IF FOUND THEN
                    RETURN;
                END IF;
            END IF;
        END IF;
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

-- function: search_two_stage sha256:3743c6c715f081f0fe6b506f08f067522f865be55ed38f80b0b1e8c2491d9bf9
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
    p_vector_weight   FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2), both stages over one hybrid search:
  rag.search_hybrid over every level (k = greatest(p_pool, p_k, 10 x p_sections) rows, each
  branch's pool raised to that k by rag.search_hybrid; no chapter term); rows of levels 2-3
  (parts, the book) are left out.
  1. Sections: each section (a level-1 summary's own file, a paragraph's parent) gets the best
     fused score of its rows among those, so a section is found by its summary's words or by
     its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best).
  2. Paragraphs: the level-0 rows among those whose parent is a kept section, their fused
     scores min-max normalised over them; when they are fewer than p_k, a second hybrid search
     over the kept sections' paragraphs (k and pool greatest(p_pool, p_k)) gives them instead.
     A section kept for its summary's score contributes only those of its paragraphs that are
     among the rows read (unless the second search runs).
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
  p_pool           candidates per branch, at least (default 100); rows read as said above (at most 1000).
  p_within         NULL or a source_file: only rows inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   (NULL = rag._fusion_settings()); its chapter term is not used here (the
                   sections already rank the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), no section is found and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: one rag.search_hybrid reading its greatest(p_pool, p_k, 10 x p_sections) best rows (100
by default, content included), then two small statements over them in memory; a second
hybrid search when the first holds fewer than p_k of the kept sections' paragraphs (k 10: 5 of
the books' 177 evalset questions; 56 of an evenly spread 500 of PIAF's 3,835, whose articles
have about 4 paragraphs each). With parent expansion through rag.search, about 1.3 times
hybrid's time on the books and 2 times at 100k synthetic rows (bench/bench_search.py,
"default+parent" against "hybrid+parent", migration 0014: rag.search's default runs it; since
migration 0015 the plain default call runs the same search from the corpus model's generated
function, rag._install_model_search).
*/
DECLARE
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
                           p_normalisation => p_normalisation, p_chapter_weight => 0, p_within => p_within) h;

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
    IF (SELECT count(*) FROM unnest(v_rows) h WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)) < p_k THEN
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_ensure_vector_index', 'fcf98a9f042b3cf5a29ab9460cb39195afb868032fc482c593cebc1b39197be9', '0015_default_search_cached_plans'),
    ('_install_model_search', 'eb662c54e63bf87e393c7bc20cc91f3f754c2de8a148b35fbcc1c86fd3fea87b', '0015_default_search_cached_plans'),
    ('_interleave', 'c83aefed5062855ee2c4e31ee2c06c93179363b873e54ac8c5f4d76826dea2d2', '0015_default_search_cached_plans'),
    ('_model_search_name', '575e0a53e8c958606278cf3e712630b5c36cc7107857527c10dc5ff804e113cd', '0015_default_search_cached_plans'),
    ('_search_hits', '2325f471345eeb525c55cef869845a485147e34b2a9a5537f57fa08ab3355627', '0015_default_search_cached_plans'),
    ('search_two_stage', '3743c6c715f081f0fe6b506f08f067522f865be55ed38f80b0b1e8c2491d9bf9', '0015_default_search_cached_plans')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
