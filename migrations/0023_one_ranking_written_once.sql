-- 0023_one_ranking_written_once: issue 34: one implementation of each ranking rule (rag._fuse, rag._two_stage, rag._hybrid, rag._sentences), the kNN scans written as inlinable SQL functions (rag._install_model_scans), every setting in one jsonb checked by name (rag._settings); rag.search's surface reduced, the strategy functions made private
-- depends: 0022_search_phrasings

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
-- dropped: _branch_sql
DROP FUNCTION IF EXISTS rag._branch_sql(text, text, int, text, int[], text, text[], int[]);  -- its file was deleted
-- dropped: _collect_sql
DROP FUNCTION IF EXISTS rag._collect_sql(text);  -- its file was deleted
-- dropped: _default_search
DROP FUNCTION IF EXISTS rag._default_search(text, vector, int);  -- its file was deleted
-- dropped: _fusion_settings
DROP FUNCTION IF EXISTS rag._fusion_settings(text, text, float8, float8, float8, float8, int, int);  -- its file was deleted
-- dropped: _install_model_search
DROP FUNCTION IF EXISTS rag._install_model_search(text, int);  -- its file was deleted
-- dropped: _knn_args
DROP FUNCTION IF EXISTS rag._knn_args(text, vector, int, text, int[], text, text);  -- its file was deleted
-- dropped: _search_in_sections
DROP FUNCTION IF EXISTS rag._search_in_sections(text, vector, text, text[], float8[], int[], float8[], int, int, float8, text, text, float8, float8, text);  -- its file was deleted
-- dropped: search_branch
DROP FUNCTION IF EXISTS rag.search_branch(text, vector, text, int, text, int[], text, text);  -- its file was deleted
-- dropped: search_hybrid
DROP FUNCTION IF EXISTS rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8, int);  -- its file was deleted
-- dropped: search_sentences
DROP FUNCTION IF EXISTS rag.search_sentences(vector, int, text, text);  -- its file was deleted
-- dropped: search_two_stage
DROP FUNCTION IF EXISTS rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8, int);  -- its file was deleted
DROP FUNCTION IF EXISTS rag._check_search_args(text, int, text, int[], text, boolean);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag._search_hits(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, int, int, text[], text);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, int, int, text[], text);  -- arguments or result changed

-- function: _types sha256:e4399f95c1f5010bd946d3521f257c8a41292800eb0d71b0def78df6ab05695a
-- Row types shared by the retrieval functions (named once, reused by every function).
--
-- rag.search_hit: one ranked chunk. Every search function (rag.search included) returns SETOF rag.search_hit:
--   the node columns (id, source_file, chunk_index, level, node_type, heading_path,
--   parent_source_file, content, content_token_count, book, node_order, paragraph: the
--   chunk's 1-based paragraph number in its file, shared by the chunks of a long paragraph and
--   stable when the chunking threshold changes; for a source.md row, the §n that chapter
--   summaries' anchors cite), then
--   score       the function's final score, higher is better (BM25 score, cosine
--               similarity, RRF sum or two-stage boosted score);
--   rank        1-based final rank;
--   bm25_rank / bm25_score      rank and score in the BM25 branch (NULL if absent);
--   vector_rank / vector_score  rank and cosine similarity in the kNN branch (NULL if absent);
--   section_score               two-stage: the score of the section the chunk sits in; hybrid: the
--                               chapter value of a paragraph's score;
--   sentence_rank / sentence_score  rank and cosine similarity in the sentence branch
--               (rag.search_sentences: the best chapter-summary sentence citing the paragraph),
--               set on the rows that branch placed in a hybrid search (NULL otherwise).
--   cites   JSON [{source_file, paragraphs}]: what a summary hit's anchors cite ([] on a
--           paragraph); filled by rag.search, NULL from the functions it calls;
--   parent  JSON array of the hit's parent node rows in chunk order (rag.search with p_expand
--           'parent'), else NULL;
--   cited   JSON array of the rows its anchors cite, reading order (rag.search with p_expand
--           'cited'), else NULL.
-- rag.node_chunk: one row of a node, in reading order (get_node, get_parent): the node columns
--   above, paragraph included.
-- rag.context_row: one row of a read within a token budget, in reading order: a built context
--   (build_context, pack_context: role 'hit' or 'parent', hit_rank the rank of the hit that
--   brought it) or a node's children (get_children: role 'child', or 'omitted' for a child left
--   out, whose content is NULL and content_token_count its size; hit_rank NULL); used_tokens is
--   the running total of the rows returned.
-- rag.candidate: one row a retrieval branch read (rag._bm25, rag._knn): id, the branch's raw
--   score s (BM25 score, cosine similarity), its 1-based rank r in the branch, and the row's
--   level, source_file and parent_source_file (read with the row, for the stages above).
-- rag.fused: one candidate after rag._fuse: its branch ranks and raw scores (br, bs, vr, vs;
--   NULL where a branch did not read it), lvl, sf, pf, the fused score, floor (what a row no
--   branch read would score) and its rank in the fused list.
-- rag.search_settings: the tuning of one search (rag._settings: names, defaults, bounds).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'search_hit') THEN
        CREATE TYPE rag.search_hit AS (
            id                  INT,
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            parent_source_file  TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT,
            score               FLOAT8,
            rank                INT,
            bm25_rank           INT,
            bm25_score          FLOAT8,
            vector_rank         INT,
            vector_score        FLOAT8,
            section_score       FLOAT8,
            sentence_rank       INT,
            sentence_score      FLOAT8,
            cites               JSON,
            parent              JSON,
            cited               JSON
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'node_chunk') THEN
        CREATE TYPE rag.node_chunk AS (
            id                  INT,
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            parent_source_file  TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'context_row') THEN
        CREATE TYPE rag.context_row AS (
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT,     -- the chunk's paragraph number in its file (§N)
            role                TEXT,    -- 'hit', 'parent' (build_context); 'child', 'omitted' (get_children)
            hit_rank            INT,     -- rank of the hit that brought this row in (NULL for children)
            used_tokens         INT      -- running total of tokens in reading order
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'candidate') THEN
        CREATE TYPE rag.candidate AS (id INT, s FLOAT8, r INT, lvl INT, sf TEXT, pf TEXT);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'fused') THEN
        CREATE TYPE rag.fused AS (id INT, br INT, bs FLOAT8, vr INT, vs FLOAT8, lvl INT, sf TEXT, pf TEXT,
                                  fused FLOAT8, floor FLOAT8, rank INT);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'search_settings') THEN
        CREATE TYPE rag.search_settings AS (
            fusion TEXT, normalisation TEXT, bm25_weight FLOAT8, vector_weight FLOAT8, rrf_k INT,
            chapter_weight FLOAT8, hybrid_pool INT, sections INT, section_weight FLOAT8, pool INT,
            vector_pool INT, sentence_after INT, sentence_every INT);
    END IF;
END
$$;

-- function: _bm25 sha256:59d90fc27392527554815364c257e3a0c722590c2727f83d47499c29d8a989ae
-- rag._bm25: the BM25 branch's candidates (pg_search), best first.
CREATE OR REPLACE FUNCTION rag._bm25(
    p_query   TEXT,
    p_n       INT,
    p_book    TEXT DEFAULT NULL,
    p_levels  INT[] DEFAULT NULL,
    p_ids     INT[] DEFAULT NULL,
    p_parents TEXT[] DEFAULT NULL
) RETURNS SETOF rag.candidate
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
/*
Returns the p_n rows whose content best matches p_query (pg_search BM25 over the French-stemmed
content, any term matching: |||; the query is tokenized, never parsed), as rag.candidate: s the
BM25 score, r 1..p_n (ties by id, the cut included). Filters, each NULL for none: p_book, p_levels, p_ids (the
rows of a `within` subtree: rag._subtree_ids), p_parents (rows whose parent is one of these
source_files). Arguments are the caller's, already checked.
Cost: one pg_search top-N scan. Without filters a static statement (plan cached for the
session); with filters a dynamic one, so that pg_search pushes each filter into its scan
(planned per call, about 0.5 ms).
*/
BEGIN
    IF num_nulls(p_book, p_levels, p_ids, p_parents) = 4 THEN
        RETURN QUERY
        SELECT x.id, x.s, (row_number() OVER (ORDER BY x.s DESC, x.id))::int, x.lvl, x.sf, x.pf FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query
            ORDER BY pdb.score(n.id) DESC, n.id LIMIT p_n) x;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT x.id, x.s, (row_number() OVER (ORDER BY x.s DESC, x.id))::int, x.lvl, x.sf, x.pf FROM ('
        'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf '
        'FROM rag.hierarchical_content_nodes n WHERE n.content ||| $1%s ORDER BY pdb.score(n.id) DESC, n.id LIMIT %s) x',
        concat(CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $2' END,
               CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($3)' END,
               CASE WHEN p_ids IS NOT NULL THEN ' AND n.id = ANY($4)' END,
               CASE WHEN p_parents IS NOT NULL THEN ' AND n.parent_source_file = ANY($5)' END),
        p_n)
    USING p_query, p_book, p_levels, p_ids, p_parents;
END
$$;

-- function: _check_search_args sha256:3581c748f88e63387c98ef4b26426ac7b2d5e5f04af081d9d413294324659ca6
-- Validate the arguments shared by every search function; raise a clear error on bad input.
CREATE OR REPLACE FUNCTION rag._check_search_args(
    p_query     TEXT,
    p_k         INT,
    p_book      TEXT DEFAULT NULL,
    p_levels    INT[] DEFAULT NULL,
    p_query_required BOOLEAN DEFAULT true
) RETURNS VOID
LANGUAGE plpgsql STABLE
AS $$
/*
Contract: returns nothing when the arguments are usable, raises invalid_parameter_value (22023)
otherwise, with a message naming the value and the limit:
  - p_query: required unless p_query_required is false; empty or whitespace-only is an error;
    longer than 10,000 characters is an error. Operators, quotes and punctuation are not
    errors: BM25 tokenizes the string, it never parses a query language.
  - p_k: between 1 and 1000.
  - p_book: NULL (all books) or a book present in rag.books.
  - p_levels: NULL or a non-empty array of values within 0..3.
*/
DECLARE
    v_known TEXT;
BEGIN
    IF p_query_required AND (p_query IS NULL OR btrim(p_query, E' \t\r\n') = '') THEN
        RAISE EXCEPTION 'query is empty: give at least one word to search for'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query IS NOT NULL AND length(p_query) > 10000 THEN
        RAISE EXCEPTION 'query is % characters long; the limit is 10000', length(p_query)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_k IS NULL OR p_k < 1 OR p_k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, got %', coalesce(p_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_book IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rag.books b WHERE b.book = p_book) THEN
        SELECT string_agg(b.book, ', ' ORDER BY b.book) INTO v_known FROM rag.books b;
        RAISE EXCEPTION 'unknown book "%"; known books: %', p_book, coalesce(v_known, '(none loaded)')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_levels IS NOT NULL AND cardinality(p_levels) = 0 THEN
        RAISE EXCEPTION 'levels is empty: omit it to search every level, or give some of 0..3'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_levels IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_levels) l WHERE l IS NULL OR l NOT BETWEEN 0 AND 3) THEN
        RAISE EXCEPTION 'levels must be within 0..3, got %', p_levels
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _ensure_vector_index sha256:2241e4633bce058ad29d6ef1a1bd3545813bea18433e551d39aefd1f4c36be3b
-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Registers (p_model, p_dimension) in rag.embedding_models and creates, if missing, two partial
HNSW cosine indexes for rows WHERE embedding_model = p_model: on the chunks'
embedding::vector(p_dimension) (hcn_hnsw_…) and on the sentences' embedding::halfvec(p_dimension)
(sent_halfvec_…; halfvec holds components up to 65504 in magnitude: a model whose sentence
vectors go beyond fails the build, naming the value). Drops the sentences' former
full-precision index (sent_hnsw_…) once the new one is built. Then writes the model's kNN scans
(rag._install_model_scans), whose expressions are these indexes'. Returns the chunks' index name.
A model already registered with another dimension is an error.
Cost: index creation is O(rows of the model) (100k 384-d rows in 140 s with the default 64MB
maintenance_work_mem); instant when they exist.
*/
DECLARE
    v_dim   INT;
    v_tag   TEXT := substr(md5(p_model), 1, 12);  -- the model's suffix in its index names
    v_index TEXT := 'hcn_hnsw_' || v_tag;
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
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.hierarchical_content_nodes '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
        v_index, p_dimension, p_model);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.sentences '
        'USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) WHERE embedding_model = %L',
        'sent_halfvec_' || v_tag, p_dimension, p_model);
    -- the old index dropped after the build, so that searches (which the build's SHARE lock lets
    -- run) wait for the DROP's exclusive lock only from here to the commit
    IF to_regclass(format('rag.%I', 'sent_hnsw_' || v_tag)) IS NOT NULL THEN  -- (no notice when absent)
        EXECUTE format('DROP INDEX rag.%I', 'sent_hnsw_' || v_tag);
    END IF;
    PERFORM rag._install_model_scans(p_model, p_dimension);
    RETURN v_index;
END
$$;

-- function: _fuse sha256:2e02ec96a0de71f87d99e4c153778e94ef4c837e03a7b96ebbee16583982f4bc
-- rag._fuse: two branches' candidates fused into one ranked list (the fusion formulas, written here only).
CREATE OR REPLACE FUNCTION rag._fuse(
    p_bm25   rag.candidate[],
    p_vector rag.candidate[],
    p        rag.search_settings
) RETURNS SETOF rag.fused
LANGUAGE sql STABLE
AS $$
/*
Returns every candidate of either branch once, with its fused score and its rank in the fused
list (1 = best; ties broken by the better branch rank, then id). Each branch gives each of its
candidates a value x:
  fusion 'rrf'     x = 1 / (rrf_k + branch rank); a missing branch adds 0;
                   fused = bm25_weight * x_bm25 + vector_weight * x_vector
  fusion 'convex'  x = the branch score normalised over that branch's candidates: 'zscore'
                   (s - mean) / standard deviation, 'minmax' (s - min) / (max - min); 1 when all
                   the branch's candidates score the same (a lone candidate included); a row
                   missing from a branch gets that branch's floor, least(its lowest x, 0);
                   fused = (bm25_weight * x_bm25 + vector_weight * x_vector) / (bm25_weight + vector_weight)
floor is the fused score of a row no branch read (0 under 'rrf').
Parameters: each branch's candidates (rag._bm25, rag._knn, or any rows of that shape: ids
unique within a branch, r its 1-based ranks); p from rag._settings.
Cost: a sort of the candidates in memory; inlined into the caller's statement.
*/
    WITH c AS (
        SELECT 'b' AS branch, u.* FROM unnest(p_bm25) u
        UNION ALL
        SELECT 'v', u.* FROM unnest(p_vector) u
    ), x AS (
        SELECT c.*,
               CASE WHEN (p).fusion = 'rrf' THEN 1.0::float8 / ((p).rrf_k + c.r)
                    WHEN (p).normalisation = 'minmax'
                    THEN coalesce((c.s - min(c.s) OVER w) / nullif(max(c.s) OVER w - min(c.s) OVER w, 0), 1)
                    ELSE coalesce((c.s - avg(c.s) OVER w) / nullif(stddev_pop(c.s) OVER w, 0), 1) END AS x
        FROM c WINDOW w AS (PARTITION BY c.branch)
    ), fl AS (
        SELECT coalesce(least(min(x.x) FILTER (WHERE x.branch = 'b'), 0), 0) AS b,
               coalesce(least(min(x.x) FILTER (WHERE x.branch = 'v'), 0), 0) AS v
        FROM x
    ), g AS (
        SELECT x.id, max(x.r) FILTER (WHERE x.branch = 'b') AS br, max(x.s) FILTER (WHERE x.branch = 'b') AS bs,
               max(x.r) FILTER (WHERE x.branch = 'v') AS vr, max(x.s) FILTER (WHERE x.branch = 'v') AS vs,
               max(x.x) FILTER (WHERE x.branch = 'b') AS xb, max(x.x) FILTER (WHERE x.branch = 'v') AS xv,
               max(x.lvl) AS lvl, max(x.sf) AS sf, max(x.pf) AS pf
        FROM x GROUP BY x.id
    ), f AS (
        SELECT g.id, g.br, g.bs, g.vr, g.vs, g.lvl, g.sf, g.pf,
               CASE WHEN (p).fusion = 'rrf' THEN (p).bm25_weight * coalesce(g.xb, 0) + (p).vector_weight * coalesce(g.xv, 0)
                    ELSE ((p).bm25_weight * coalesce(g.xb, fl.b) + (p).vector_weight * coalesce(g.xv, fl.v))
                         / ((p).bm25_weight + (p).vector_weight) END AS fused,
               CASE WHEN (p).fusion = 'rrf' THEN 0
                    ELSE ((p).bm25_weight * fl.b + (p).vector_weight * fl.v) / ((p).bm25_weight + (p).vector_weight) END AS floor
        FROM g CROSS JOIN fl
    )
    SELECT f.*, (row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id))::int FROM f;
$$;

-- function: _hybrid sha256:c986bb5f695509c9aa00b1aa1b5f091c88a24d5718137be1d0f9f144d8af22e6
-- rag._hybrid: 'hybrid' mode: both branches fused over every level, a paragraph lifted by its chapter.
CREATE OR REPLACE FUNCTION rag._hybrid(
    p_query  TEXT,
    p_vector vector,
    p_model  TEXT,
    p_k      INT,
    p_book   TEXT,
    p_levels INT[],
    p_ids    INT[],
    p        rag.search_settings
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the p_k best rows of rag._fuse over the BM25 and kNN branches' greatest(hybrid_pool,
p_k) candidates each (no kNN branch when p_model or p_vector is NULL), best first, with
score = fused for a summary row and, for a paragraph (level 0),
  score = (1 - chapter_weight) * fused + chapter_weight * chapter,
chapter being the best fused score of its parent summary's chunks among the candidates (the
fused floor when none is one; section_score carries it). When p_levels leaves level 1 out
and chapter_weight > 0, the branches read level 1 too and the filter applies to the fused
list. Ties: the fused list's order. Filters as rag._bm25's; p from rag._settings.
Cost: the two index scans, a fusion in memory, p_k lookups of the rows returned.
*/
DECLARE
    v_n      INT := greatest(p.hybrid_pool, p_k);
    v_levels INT[] := CASE WHEN p.chapter_weight > 0 AND NOT 1 = ANY(p_levels) THEN p_levels || 1 ELSE p_levels END;
    b        rag.candidate[];
    v        rag.candidate[];
BEGIN
    b := ARRAY(SELECT c FROM rag._bm25(p_query, v_n, p_book, v_levels, p_ids) c);
    IF p_model IS NOT NULL AND p_vector IS NOT NULL THEN
        PERFORM rag._set_hnsw(v_n);
        v := ARRAY(SELECT c FROM rag._knn(p_model, p_vector, v_n, p_book, v_levels, p_ids) c);
    END IF;
    RETURN QUERY
    WITH f AS (
        SELECT * FROM rag._fuse(b, v, p)
    ), ch AS (
        SELECT f.sf, max(f.fused) AS cs FROM f WHERE f.lvl = 1 AND p.chapter_weight > 0 GROUP BY f.sf
    ), c AS (
        SELECT f.*, CASE WHEN f.lvl = 0 AND p.chapter_weight > 0 THEN coalesce(ch.cs, f.floor) END AS cs
        FROM f LEFT JOIN ch ON ch.sf = f.pf
    ), top AS (
        SELECT c.*, CASE WHEN c.lvl <> 0 THEN c.fused
                         ELSE (1 - p.chapter_weight) * c.fused + p.chapter_weight * coalesce(c.cs, 0) END AS score
        FROM c
        WHERE p_levels IS NULL OR c.lvl = ANY(p_levels)
        ORDER BY score DESC, c.rank
        LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, top.rank))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, top.rank;
END
$$;

-- function: _install_model_scans sha256:24827acf50056298f8208c0415be23c8913f93e796ffc9211c603e579bbb54a1
-- rag._install_model_scans: write the corpus model's kNN scans as inlinable SQL functions (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_scans(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Replaces the bodies of rag._knn and rag._knn_sentences (their files install stand-ins that
EXECUTE the scan) with p_model's scans, rag._scan_sql's text with the model and dimension as
literals, as SQL functions: the planner inlines them into the caller's static statement, whose
plan, index scan included, is then cached for the session. They hold no ranking: only the scan.
CREATE OR REPLACE keeps each function's identity and privileges. Returns p_model.
Called by rag._ensure_vector_index (each load of embedded rows) and by `bookrag migrate`
(after migrations, and when the installed scans are not this model's).
A model name with a $ (rag._scan_sql refuses it) keeps the stand-ins (NOTICE).
Cost: two function texts replaced (milliseconds).
*/
BEGIN
    IF strpos(p_model, '$') > 0 THEN
        RAISE NOTICE 'model "%" has a $ in its name: its kNN scans stay planned per call', p_model;
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn(p_model TEXT, p_vector vector, p_n INT, p_book TEXT DEFAULT NULL, '
                   'p_levels INT[] DEFAULT NULL, p_ids INT[] DEFAULT NULL) RETURNS SETOF rag.candidate '
                   'LANGUAGE sql STABLE AS %L', rag._scan_sql('nodes', p_model, p_dimension));
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn_sentences(p_model TEXT, p_vector vector, p_n INT, '
                   'p_book TEXT DEFAULT NULL) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], '
                   'distance FLOAT8) LANGUAGE sql STABLE AS %L', rag._scan_sql('sentences', p_model, p_dimension));
    RETURN p_model;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_scans(TEXT, INT) FROM bookrag_reader;

-- function: _interleave sha256:43ae9034b9177abf46b9cb33815a3422c583c8aedf2ad7b4adac594cb6457be9
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
file and number; other rows keep their id. rag._search_hits calls it for hybrid and two-stage.
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

-- function: _knn sha256:46a34074e1db58a580a68a22a34abea630e8e7744b11c8c8058a7107f902555b
-- rag._knn: the kNN branch's candidates (pgvector HNSW); as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL,
    p_levels INT[] DEFAULT NULL,
    p_ids    INT[] DEFAULT NULL
) RETURNS SETOF rag.candidate
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the p_n rows of model p_model nearest to p_vector (cosine), as rag.candidate: s the
similarity, r 1..p_n; filters p_book, p_levels, p_ids as rag._bm25's. The scan is
rag._scan_sql('nodes', …). rag._install_model_scans replaces this body, at each load of
embedded rows and after migrations, with that scan as an inlinable SQL function for the corpus
model (its model and dimension as literals), so a caller's static statement caches its plan;
this version, which a migration installs, runs it through EXECUTE. No row for another model
than the corpus's. The caller sets ef_search (rag._set_hnsw).
Cost: one HNSW scan of the model's partial index.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('nodes', p_model, v_dim) USING p_model, p_vector, p_n, p_book, p_levels, p_ids;
    END IF;
END
$$;

-- function: _knn_sentences sha256:a1ed06c8b85ec7e548c3c6aff5a0c9fb170036ad1cf99d9f7630b84f4bda7bb6
-- rag._knn_sentences: the summary sentences nearest to a vector; as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn_sentences(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL
) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], distance FLOAT8)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the p_n sentences of rag.sentences (model p_model, book p_book or all) nearest to
p_vector by the half-precision HNSW index, each as the file and paragraphs its anchors cite and
its full-precision cosine distance. The scan is rag._scan_sql('sentences', …); replaced, as
rag._knn is, by an inlinable SQL function for the corpus model (rag._install_model_scans).
Cost: one HNSW scan of the sentences' partial halfvec index.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('sentences', p_model, v_dim) USING p_model, p_vector, p_n, p_book;
    END IF;
END
$$;

-- function: _scan_sql sha256:f9f157596097fcbc10313da0fd4b7cc607c446a938ac13f0593f1b40e46e7698
-- rag._scan_sql: the text of a kNN scan over one model's HNSW index (rag._knn, rag._knn_sentences).
CREATE OR REPLACE FUNCTION rag._scan_sql(
    p_scan      TEXT,
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns the SELECT of one kNN scan for model p_model of dimension p_dimension, with the
model and the dimension written in as literals: the expression and predicate of the model's
partial HNSW index (rag._ensure_vector_index), which a parameter cannot match.
  'nodes'      rag._knn's: rows as rag.candidate (s = cosine similarity, r its rank), the $3
               nearest to $2 among the rows of the model; $1 the model the caller expects
               (no row when it is not p_model), $4 book, $5 levels, $6 ids, each NULL for none
  'sentences'  rag._knn_sentences's: (cited source_file, cited paragraphs, cosine distance) of
               the $3 summary sentences nearest to $2 by the half-precision index; $4 book
rag._install_model_scans makes each the body of an inlinable SQL function, so a caller's
static statement plans the index scan once; the stand-ins (the functions' files) EXECUTE it.
Raises invalid_parameter_value for another scan name or a model name with a $ in it.
*/
BEGIN
    IF strpos(p_model, '$') > 0 OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model "%" (dimension %) cannot be written into a scan: no $ in its name, dimension 1..2000',
            p_model, p_dimension USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scan = 'nodes' THEN
        RETURN format(
            'SELECT y.id, 1 - y.d, (row_number() OVER (ORDER BY y.d, y.id))::int, y.lvl, y.sf, y.pf FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d, n.level AS lvl, '
            'n.source_file AS sf, n.parent_source_file AS pf FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL AND $1 = %2$L '
            'AND ($4::text IS NULL OR n.book = $4) AND ($5::int[] IS NULL OR n.level = ANY($5)) '
            'AND ($6::int[] IS NULL OR n.id = ANY($6)) '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $3) y', p_dimension, p_model);
    ELSIF p_scan = 'sentences' THEN
        RETURN format(
            'SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> $2)::float8 '
            'FROM rag.sentences st WHERE st.embedding_model = %2$L AND $1 = %2$L AND ($4::text IS NULL OR st.book = $4) '
            'ORDER BY st.embedding::halfvec(%1$s) <=> $2::halfvec(%1$s) LIMIT $3', p_dimension, p_model);
    END IF;
    RAISE EXCEPTION 'unknown scan "%"', p_scan USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- function: _search_hits sha256:b1f45747ae4a1aa0d805d9d0197299e878bbd8b902429897c66f7af1bcfc6fc1
-- rag._search_hits: rag.search's checks and its modes (the mode list is defined here).
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_query       TEXT,
    p_vector      vector,
    p_mode        TEXT,
    p_k           INT,
    p_book        TEXT,
    p_levels      INT[],
    p_within      TEXT,
    p_expand      TEXT[],
    p_query_model TEXT,
    p_tuning      JSONB
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Checks rag.search's arguments and returns the rows of the mode p_mode (rag.search_hit, best
first, without cites and expansions):
  'auto'       'two-stage' when p_levels allows paragraphs (NULL or {0}), 'hybrid' otherwise,
               and 'hybrid' too when two-stage finds no paragraph
  'two-stage'  rag._two_stage (paragraphs only: p_levels NULL or {0})
  'hybrid'     rag._hybrid
  'bm25'       rag._bm25 alone (p_vector unused)
  'vector'     rag._knn alone (p_query unused, may be NULL; p_vector required)
In 'two-stage' and 'hybrid' (and so 'auto'), when paragraphs are allowed and there is a query
vector, the sentence branch's paragraphs (rag._sentences) take the places sentence_after and
sentence_every give them (rag._interleave).
Raises invalid_parameter_value naming the value: another mode; a bad query, k, book or levels
(rag._check_search_args); an expand word other than parent and cited; a p_query_model other
than the corpus model, or a vector of another length; a tuning setting (rag._settings); a
within that names no node or another book (rag._subtree_ids).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off (on small tables the planner prices the HNSW scan above a slower sequential scan); the
HNSW settings that rag._set_hnsw raises are restored on return.
*/
DECLARE
    v_mode  TEXT := p_mode;
    v_model TEXT;
    v_ids   INT[];
    p       rag.search_settings;
    f_rows  rag.search_hit[];
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_mode <> 'vector');
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p := rag._settings(p_tuning);
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) THEN 'two-stage' ELSE 'hybrid' END;
    ELSIF p_mode = 'two-stage' AND NOT coalesce(p_levels <@ ARRAY[0], true) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0}, got levels %',
            p_levels USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_mode = 'vector' AND p_vector IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; vector search needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_vector IS NOT NULL AND p_mode <> 'bm25' THEN  -- (bm25 reads no vector: nothing of it is checked)
        SELECT m.model INTO v_model FROM rag._corpus_model(p_vector) m;  -- raises on another length, or several models
        IF p_query_model IS NOT NULL AND v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    v_ids := rag._subtree_ids(p_within, p_book);

    IF v_mode IN ('bm25', 'vector') THEN
        IF v_mode = 'vector' AND v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
        RETURN QUERY
        SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               c.s, c.r, CASE WHEN v_mode = 'bm25' THEN c.r END, CASE WHEN v_mode = 'bm25' THEN c.s END,
               CASE WHEN v_mode = 'vector' THEN c.r END, CASE WHEN v_mode = 'vector' THEN c.s END,
               NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
        FROM (SELECT * FROM rag._bm25(p_query, p_k, p_book, p_levels, v_ids) WHERE v_mode = 'bm25'
              UNION ALL
              SELECT * FROM rag._knn(v_model, p_vector, p_k, p_book, p_levels, v_ids) WHERE v_mode = 'vector') c
        JOIN rag.hierarchical_content_nodes n ON n.id = c.id
        ORDER BY c.r;
        RETURN;
    END IF;
    IF v_mode = 'two-stage' THEN
        f_rows := ARRAY(SELECT h FROM rag._two_stage(p_query, p_vector, v_model, p_k, p_book, v_ids, p) h ORDER BY h.rank);
    END IF;
    IF v_mode = 'hybrid' OR (p_mode = 'auto' AND cardinality(f_rows) = 0) THEN
        -- 'auto' when two-stage found no paragraph (words only in summaries, no query vector):
        -- the hybrid list, summaries included, rather than nothing
        f_rows := ARRAY(SELECT h FROM rag._hybrid(p_query, p_vector, v_model, p_k, p_book, p_levels, v_ids, p) h ORDER BY h.rank);
    END IF;
    IF p.sentence_every = 0 OR p.sentence_after >= p_k OR v_model IS NULL OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) THEN
        RETURN QUERY SELECT * FROM unnest(f_rows);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM rag._interleave(f_rows, ARRAY(SELECT s FROM rag._sentences(v_model, p_vector, p_k, p_book, v_ids) s),
                                               p.sentence_after, p.sentence_every, p_k);
END
$$;

-- function: _sentences sha256:b4fb67fcab8e051d3c83fa55f24dd8c835b5508f5fdde94a441484d493d6c289
-- rag._sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag._sentences(
    p_model  TEXT,
    p_vector vector,
    p_k      INT,
    p_book   TEXT,
    p_ids    INT[]
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
Returns at most p_k paragraphs (level-0 chunks), best first: those cited by the 2 x p_k
summary sentences (rag.sentences: each anchored sentence of a chapter summary, embedded alone)
nearest to p_vector. A paragraph scores the best similarity among the sentences whose anchors
cite it (score = sentence_score, rank = sentence_rank), ties broken by its own similarity; a
paragraph split into chunks is represented by its chunk nearest to the query. Reworded
questions meet the summaries' wording, and the anchors lead back to the book's paragraph.
The nearest sentences come from the half-precision HNSW index (rag._knn_sentences), or, within
a subtree (p_ids), exactly from the sentences citing its files. Filters p_book, p_ids.
Cost: one HNSW scan of 2 x p_k sentences, then a lookup per paragraph kept.
*/
BEGIN
    IF p_ids IS NULL THEN
        PERFORM rag._set_hnsw(2 * p_k);
    END IF;
    RETURN QUERY
    WITH s AS (
        SELECT k.cited_source_file AS f, k.cited_paragraphs AS ps, k.distance AS d
        FROM rag._knn_sentences(p_model, p_vector, 2 * p_k, p_book) k WHERE p_ids IS NULL
        UNION ALL
        SELECT * FROM (
            SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> p_vector)::float8
            FROM rag.sentences st
            WHERE p_ids IS NOT NULL AND st.embedding_model = p_model AND (p_book IS NULL OR st.book = p_book)
              AND st.cited_source_file IN (SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY(p_ids))
            ORDER BY st.embedding <=> p_vector LIMIT 2 * p_k) exact
    ), cited AS (
        SELECT s.f, c.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS c(n) GROUP BY s.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (
        SELECT c.*, para.sim FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   CASE WHEN n.embedding_model = p_model THEN 1 - (n.embedding <=> p_vector) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (p_ids IS NULL OR n.id = ANY(p_ids))
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, (row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id))::int AS r FROM one
    )
    SELECT t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
           t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
           t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
           NULL::json, NULL::json, NULL::json
    FROM top t WHERE t.r <= p_k ORDER BY t.r;
END
$$;

-- function: _settings sha256:bf2ca9b651936367239e34afbed3002a2d4e5ddf718f9d93bcc14beaff02f008
-- rag._settings: the tuning of a search (names, defaults and bounds, defined here only).
CREATE OR REPLACE FUNCTION rag._settings(
    p_tuning JSONB DEFAULT NULL
) RETURNS rag.search_settings
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the settings a search runs with: the defaults, overridden by the named values of
p_tuning (rag.search's p_tuning, for the evaluation scripts; NULL or '{}' = the defaults).
`SELECT * FROM rag._settings()` shows them.
  fusion          'convex' (default: a weighted sum of each branch's normalised scores) or 'rrf'
  normalisation   'zscore' (default) or 'minmax': how 'convex' normalises a branch's scores
  bm25_weight, vector_weight   0.5 and 0.5; finite, >= 0, not both 0
  rrf_k           60; >= 1 ('rrf' only)
  chapter_weight  0.4; 0..1: share of a paragraph's score taken from its chapter (hybrid)
  hybrid_pool     40; 1..1000: candidates of each branch in hybrid (at least k)
  sections        5; 1..100: sections two-stage keeps
  section_weight  0.3; 0..1: share of a paragraph's score taken from its section (two-stage)
  pool            100; 1..1000: BM25 candidates of two-stage's first search (at least k and
                  10 x sections), and both branches' in its search inside the sections
  vector_pool     40; 1..1000: kNN candidates of two-stage's first search (its ef_search)
  sentence_after, sentence_every   1 and 3; 0..1000: the sentence branch's places in a hybrid
                  or two-stage list (rag._interleave); sentence_every 0 = no sentence branch
Raises invalid_parameter_value (22023) naming the setting: an unknown name, a value of the
wrong type, a value out of bounds.
Cost: microseconds.
*/
DECLARE
    s      rag.search_settings := ROW('convex', 'zscore', 0.5, 0.5, 60, 0.4, 40, 5, 0.3, 100, 40, 1, 3);
    v_bad  TEXT;
BEGIN
    IF p_tuning IS NULL OR p_tuning = '{}' THEN
        RETURN s;
    END IF;
    IF jsonb_typeof(p_tuning) <> 'object' THEN
        RAISE EXCEPTION 'tuning must be a JSON object of named settings, got %', p_tuning
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT string_agg(format('"%s"', k), ', ' ORDER BY k) INTO v_bad
    FROM jsonb_object_keys(p_tuning) k
    WHERE k NOT IN (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'unknown tuning setting %; the settings are %', v_bad,
            (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a
             WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        s := jsonb_populate_record(s, p_tuning);
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION 'tuning %: %', p_tuning, SQLERRM USING ERRCODE = 'invalid_parameter_value';
    END;
    IF s.fusion IS NULL OR s.fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got "%"', s.fusion USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.normalisation IS NULL OR s.normalisation NOT IN ('minmax', 'zscore') THEN
        RAISE EXCEPTION 'normalisation must be ''minmax'' or ''zscore'', got "%"', s.normalisation
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.bm25_weight >= 0 AND s.bm25_weight < 'Infinity' AND s.vector_weight >= 0
                    AND s.vector_weight < 'Infinity', false) THEN
        RAISE EXCEPTION 'branch weights must be finite and >= 0, got bm25 % and vector %', s.bm25_weight, s.vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.bm25_weight = 0 AND s.vector_weight = 0 THEN
        RAISE EXCEPTION 'branch weights are both 0: give at least one branch a positive weight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.rrf_k >= 1, false) THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', s.rrf_k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.chapter_weight BETWEEN 0 AND 1 AND s.section_weight BETWEEN 0 AND 1, false) THEN
        RAISE EXCEPTION 'chapter_weight and section_weight must be within 0..1, got % and %', s.chapter_weight,
            s.section_weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sections BETWEEN 1 AND 100, false) THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', s.sections USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.hybrid_pool BETWEEN 1 AND 1000 AND s.pool BETWEEN 1 AND 1000 AND s.vector_pool BETWEEN 1 AND 1000, false) THEN
        RAISE EXCEPTION 'hybrid_pool, pool and vector_pool must be between 1 and 1000, got %, % and %', s.hybrid_pool,
            s.pool, s.vector_pool USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sentence_after BETWEEN 0 AND 1000 AND s.sentence_every BETWEEN 0 AND 1000, false) THEN
        RAISE EXCEPTION 'sentence_after and sentence_every must be within 0..1000, got % and %',
            s.sentence_after, s.sentence_every USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN s;
END
$$;

-- function: _two_stage sha256:b889d7d339578785ce20eaf7e0c10f3d4bfcce09f5c64e02313ecdd2c7ff2086
-- rag._two_stage: 'two-stage' mode: the best sections first, then their best paragraphs.
CREATE OR REPLACE FUNCTION rag._two_stage(
    p_query  TEXT,
    p_vector vector,
    p_model  TEXT,
    p_k      INT,
    p_book   TEXT,
    p_ids    INT[],
    p        rag.search_settings
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
Returns at most p_k paragraphs (level 0), best first, from one first search: rag._fuse over
the BM25 branch's n = least(1000, greatest(pool, p_k, 10 x sections)) candidates and the kNN
branch's vector_pool, every level, of which the n best rows are read.
  1. Sections: a section (a level-1 summary's own file, a paragraph's parent) scores the best
     fused score of its rows among those; the `sections` best are kept, their scores min-max
     normalised over them (section_score, 1 for the best).
  2. Paragraphs: the kept sections' paragraphs among those rows; when fewer than p_k, a search
     inside the kept sections instead: rag._fuse over their paragraphs that the first search
     read with a BM25 score (without a query vector: pg_search inside the sections) and their
     exact kNN, greatest(p_k, pool) of each, the greatest(p_k, pool) best kept.
  score = (1 - section_weight) * the paragraph's fused score min-max normalised over them
          + section_weight * its section's score; ties by the fused rank, then id.
No section found (no summary, no paragraph with a parent): a NOTICE, and rag._hybrid over
paragraphs (its pool = pool, no chapter term). No paragraph found: no row. Filters p_book
and p_ids (a `within` subtree) apply to both searches; p from rag._settings.
Cost: the two index scans, statements in memory over their n rows; the search inside the
sections, when it runs, reads their paragraphs through the parent index with one distance each.
*/
DECLARE
    v_n      INT := least(1000, greatest(p.pool, p_k, 10 * p.sections));
    v_pool   INT := greatest(p_k, p.pool);
    v_knn    BOOLEAN := p_model IS NOT NULL AND p_vector IS NOT NULL;
    b        rag.candidate[];
    v        rag.candidate[];
    top      rag.fused[];
    para     rag.fused[];
    v_files  TEXT[];
    v_scores FLOAT8[];
    flat     rag.search_settings := p;
BEGIN
    b := ARRAY(SELECT c FROM rag._bm25(p_query, v_n, p_book, NULL, p_ids) c);
    IF v_knn THEN
        PERFORM rag._set_hnsw(p.vector_pool);
        v := ARRAY(SELECT c FROM rag._knn(p_model, p_vector, p.vector_pool, p_book, NULL, p_ids) c);
    END IF;
    top := ARRAY(SELECT f FROM rag._fuse(b, v, p) f WHERE f.rank <= v_n ORDER BY f.rank);

    -- 1. the sections, best first, and their normalised scores
    SELECT array_agg(s.section ORDER BY s.best DESC, s.section),
           array_agg(coalesce((s.best - s.lo) / nullif(s.hi - s.lo, 0), 1) ORDER BY s.best DESC, s.section)
    INTO v_files, v_scores
    FROM (SELECT t.*, min(t.best) OVER () AS lo, max(t.best) OVER () AS hi FROM (
              SELECT CASE WHEN h.lvl = 1 THEN h.sf ELSE h.pf END AS section, max(h.fused) AS best
              FROM unnest(top) h WHERE h.lvl <= 1 AND (h.lvl = 1 OR h.pf IS NOT NULL)
              GROUP BY 1 ORDER BY best DESC, section LIMIT p.sections) t) s;
    IF v_files IS NULL THEN
        RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
        flat.chapter_weight := 0;
        flat.hybrid_pool := p.pool;
        RETURN QUERY SELECT * FROM rag._hybrid(p_query, p_vector, p_model, p_k, p_book, ARRAY[0], p_ids, flat);
        RETURN;
    END IF;

    -- 2. their paragraphs among the rows read, or a search inside them
    para := ARRAY(SELECT h FROM unnest(top) h WHERE h.lvl = 0 AND h.pf = ANY(v_files) ORDER BY h.rank);
    IF cardinality(para) < p_k THEN
        IF v_knn THEN
            b := ARRAY(SELECT ROW(h.id, h.bs, row_number() OVER (ORDER BY h.bs DESC, h.id), h.lvl, h.sf, h.pf)::rag.candidate
                       FROM unnest(para) h WHERE h.bs IS NOT NULL ORDER BY h.bs DESC, h.id LIMIT v_pool);
            v := ARRAY(SELECT ROW(z.id, 1 - z.d, row_number() OVER (ORDER BY z.d, z.id), z.lvl, z.sf, z.pf)::rag.candidate
                       FROM (SELECT y.* FROM (
                                 SELECT n.id, (n.embedding <=> p_vector)::float8 AS d, n.level AS lvl,
                                        n.source_file AS sf, n.parent_source_file AS pf
                                 FROM rag.hierarchical_content_nodes n
                                 WHERE n.level = 0 AND n.parent_source_file = ANY(v_files) AND n.embedding_model = p_model
                                   AND n.embedding IS NOT NULL AND (p_ids IS NULL OR n.id = ANY(p_ids))
                                 OFFSET 0) y  -- OFFSET 0: read through the parent index, exactly, never the HNSW scan
                             ORDER BY y.d LIMIT v_pool) z
                       ORDER BY z.d, z.id);
        ELSE
            b := ARRAY(SELECT c FROM rag._bm25(p_query, v_pool, NULL, ARRAY[0], p_ids, v_files) c);
        END IF;
        para := ARRAY(SELECT f FROM rag._fuse(b, v, p) f WHERE f.rank <= v_pool ORDER BY f.rank);
    END IF;

    RETURN QUERY
    WITH scored AS (
        SELECT h.*, sec.sc,
               (1 - p.section_weight) * coalesce((h.fused - min(h.fused) OVER ()) / nullif(max(h.fused) OVER () - min(h.fused) OVER (), 0), 1)
               + p.section_weight * sec.sc AS final
        FROM unnest(para) h JOIN unnest(v_files, v_scores) AS sec(f, sc) ON sec.f = h.pf
    ), best AS (
        SELECT s.*, (row_number() OVER (ORDER BY s.final DESC, s.rank, s.id))::int AS r
        FROM scored s ORDER BY s.final DESC, s.rank, s.id LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           x.final, x.r, x.br, x.bs, x.vr, x.vs, x.sc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
    ORDER BY x.r;
END
$$;

-- function: build_context sha256:3414e8f1c27e5f50b939e5b929021a2ff1effa02fcd1333e10a3a841b84b7546
-- rag.build_context: search + parent expansion + deduplication within a token budget, ordered for reading.
CREATE OR REPLACE FUNCTION rag.build_context(
    p_query           TEXT,
    p_query_embedding vector,
    p_budget          INT DEFAULT 3000,
    p_k               INT DEFAULT 8,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_expand          BOOLEAN DEFAULT true,
    p_mode            TEXT DEFAULT 'auto',
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the context an LLM reads to answer p_query: the p_k hits of rag.search packed by
rag.pack_context (each hit with its parent node's rows when p_expand, whole units while they
fit, never more than p_budget tokens), in reading order, each row with its citation, its role
('hit' or 'parent'), the rank of the hit that brought it and the running token total. It is
  rag.pack_context(ARRAY(SELECT id FROM rag.search(p_query, p_query_embedding, p_mode, p_k,
                   p_book, p_levels, p_within) ORDER BY rank), p_budget, p_expand)
(write that composition to pass rag.search's other arguments).
Parameters: p_query, p_query_embedding, p_mode, p_book, p_levels, p_within as rag.search's;
p_budget tokens, 1..1,000,000 (default 3000); p_k hits, 1..1000 (default 8); p_expand adds
each hit's parent node (default true).
Raises what rag.search and rag.pack_context raise.
Cost: one search plus two indexed lookups per hit.
*/
BEGIN
    -- PL/pgSQL, not SQL: a SQL body is checked when created, and rag.search is created after it.
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_within) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;

-- function: outline sha256:725dc03a6d0c7ad286f65063c4a9893d5ac4f08c7836f80c7a5796293bf029f2
-- rag.outline: a book's table of contents: one row per node, in document order.
CREATE OR REPLACE FUNCTION rag.outline(
    p_book TEXT
) RETURNS TABLE (
    source_file        TEXT,
    parent_source_file TEXT,
    level              INT,
    node_type          TEXT,
    heading_path       TEXT,
    node_order           INT,
    chunk_count        INT,
    tokens             INT,
    embedded           BOOLEAN
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns every node (file) of p_book in document order (preorder of the summary tree: the book
summary, then each front-matter or part summary followed by what it covers), with its size in
chunks and tokens and whether it carries vectors. Unknown book: error naming the known books.
Cost: one index scan over the book's rows, grouped by file.
*/
BEGIN
    PERFORM rag._check_search_args(NULL, 1, p_book, NULL, false);
    IF p_book IS NULL THEN
        RAISE EXCEPTION 'book is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT n.source_file, min(n.parent_source_file), min(n.level), min(n.node_type), min(n.heading_path),
           min(n.node_order), count(*)::int, sum(coalesce(n.content_token_count, 0))::int,
           bool_or(n.embedding IS NOT NULL)
    FROM rag.hierarchical_content_nodes n
    WHERE n.book = p_book
    GROUP BY n.source_file
    ORDER BY min(n.node_order), n.source_file;
END
$$;

-- function: search sha256:bf5405826546689f2aa178c19043026ee2c9dcd5e68c554a3d9b66753869cb01
-- rag.search: the search, in every mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector DEFAULT NULL,
    p_mode            TEXT DEFAULT 'auto',
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL,
    p_tuning          JSONB DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Returns the p_k best hits for p_query, best first (rag.search_hit: rank 1..k, score, each
branch's rank and score, section_score, sentence_rank and sentence_score where they apply).
  p_query           the words (<= 10,000 characters; tokenized, never parsed)
  p_query_embedding its vector from the corpus model, query role (`bookrag embed`); NULL:
                    BM25 alone
  p_mode            'auto' (default: two-stage for paragraphs, hybrid when p_levels asks for
                    summaries or two-stage finds nothing), 'two-stage', 'hybrid', and the
                    branches alone, 'bm25' and 'vector' (rag._search_hits)
  p_k               1..1000 (default 10)
  p_book            NULL (every book) or one loaded book
  p_levels          NULL (all) or some of 0..3: 0 paragraphs, 1 chapter summaries, 2 parts, 3 the book
  p_within          NULL or a source_file: only that node's subtree (a chapter's summary.md:
                    the chapter)
  p_expand          any of 'parent' (the hit's parent node rows, as JSON) and 'cited' (the
                    rows a summary hit's anchors cite, as JSON); cites is always filled
  p_query_model     the model the vector was made with: refused when not the corpus model
  p_tuning          named settings for measurement, e.g. '{"sections": 7}' (rag._settings)
Raises invalid_parameter_value naming the bad value (rag._search_hits).
Cost: the mode's (two index scans and the sentence scan for the default), plus an indexed
lookup per summary hit for cites, per distinct parent for 'parent', per hit for 'cited'. A
SQL function: the caller's statement inlines it, and an expansion not asked for never runs.
*/
    WITH h AS MATERIALIZED (
        SELECT * FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_within,
                                       p_expand, p_query_model, p_tuning)
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

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], boolean, text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search(text, vector, text, int, text, int[], text, text[], text, jsonb) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

DELETE FROM rag.function_versions WHERE name IN ('_branch_sql', '_collect_sql', '_default_search', '_fusion_settings', '_install_model_search', '_knn_args', '_search_in_sections', 'search_branch', 'search_hybrid', 'search_sentences', 'search_two_stage');

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', 'e4399f95c1f5010bd946d3521f257c8a41292800eb0d71b0def78df6ab05695a', '0023_one_ranking_written_once'),
    ('_bm25', '59d90fc27392527554815364c257e3a0c722590c2727f83d47499c29d8a989ae', '0023_one_ranking_written_once'),
    ('_check_search_args', '3581c748f88e63387c98ef4b26426ac7b2d5e5f04af081d9d413294324659ca6', '0023_one_ranking_written_once'),
    ('_ensure_vector_index', '2241e4633bce058ad29d6ef1a1bd3545813bea18433e551d39aefd1f4c36be3b', '0023_one_ranking_written_once'),
    ('_fuse', '2e02ec96a0de71f87d99e4c153778e94ef4c837e03a7b96ebbee16583982f4bc', '0023_one_ranking_written_once'),
    ('_hybrid', 'c986bb5f695509c9aa00b1aa1b5f091c88a24d5718137be1d0f9f144d8af22e6', '0023_one_ranking_written_once'),
    ('_install_model_scans', '24827acf50056298f8208c0415be23c8913f93e796ffc9211c603e579bbb54a1', '0023_one_ranking_written_once'),
    ('_interleave', '43ae9034b9177abf46b9cb33815a3422c583c8aedf2ad7b4adac594cb6457be9', '0023_one_ranking_written_once'),
    ('_knn', '46a34074e1db58a580a68a22a34abea630e8e7744b11c8c8058a7107f902555b', '0023_one_ranking_written_once'),
    ('_knn_sentences', 'a1ed06c8b85ec7e548c3c6aff5a0c9fb170036ad1cf99d9f7630b84f4bda7bb6', '0023_one_ranking_written_once'),
    ('_scan_sql', 'f9f157596097fcbc10313da0fd4b7cc607c446a938ac13f0593f1b40e46e7698', '0023_one_ranking_written_once'),
    ('_search_hits', 'b1f45747ae4a1aa0d805d9d0197299e878bbd8b902429897c66f7af1bcfc6fc1', '0023_one_ranking_written_once'),
    ('_sentences', 'b4fb67fcab8e051d3c83fa55f24dd8c835b5508f5fdde94a441484d493d6c289', '0023_one_ranking_written_once'),
    ('_settings', 'bf2ca9b651936367239e34afbed3002a2d4e5ddf718f9d93bcc14beaff02f008', '0023_one_ranking_written_once'),
    ('_two_stage', 'b889d7d339578785ce20eaf7e0c10f3d4bfcce09f5c64e02313ecdd2c7ff2086', '0023_one_ranking_written_once'),
    ('build_context', '3414e8f1c27e5f50b939e5b929021a2ff1effa02fcd1333e10a3a841b84b7546', '0023_one_ranking_written_once'),
    ('outline', '725dc03a6d0c7ad286f65063c4a9893d5ac4f08c7836f80c7a5796293bf029f2', '0023_one_ranking_written_once'),
    ('search', 'bf5405826546689f2aa178c19043026ee2c9dcd5e68c554a3d9b66753869cb01', '0023_one_ranking_written_once')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
