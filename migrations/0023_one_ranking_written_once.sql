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

-- function: _types sha256:5011f85d27841319077373bfc3cbc99660b2685391a9e099b0e51930b790f288
-- Row types shared by the retrieval functions (named once, reused by every function).
--
-- What each type holds: COMMENT ON TYPE below (\dT+ rag.*).
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
COMMENT ON TYPE rag.search_hit IS 'One ranked chunk (every search): the node columns (paragraph: its 1-based paragraph number in its file, the §N anchors cite), score (higher is better), rank 1..k, bm25_rank/bm25_score and vector_rank/vector_score (NULL where a branch did not read it), section_score (two-stage: its section''s; hybrid: its chapter''s), sentence_rank/sentence_score (rows the sentence branch placed), cites (what a summary hit''s anchors cite, JSON), parent and cited (JSON, when rag.search expands them).';
COMMENT ON TYPE rag.node_chunk IS 'One row of a node in reading order (get_node, get_parent): the node columns.';
COMMENT ON TYPE rag.context_row IS 'One row of a read within a token budget, reading order: role hit or parent (build_context, pack_context; hit_rank the hit that brought it) or child / omitted (get_children: an omitted child has no content and its size in content_token_count); used_tokens the running total.';
COMMENT ON TYPE rag.candidate IS 'One row a retrieval branch read (rag._bm25, rag._knn): id, raw score s, branch rank r, level, source_file, parent_source_file.';
COMMENT ON TYPE rag.fused IS 'One candidate after rag._fuse: branch ranks and raw scores (br, bs, vr, vs), lvl, sf, pf, fused score, floor (a row no branch read), rank in the fused list.';
COMMENT ON TYPE rag.search_settings IS 'The tuning of one search: names, defaults and bounds in rag._settings.';

-- function: _bm25 sha256:3ef59d40786c907d9b0292f1de0977fe2c1be68628aff9b2ef9e5ee1d7f08e98
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
Returns the p_n rows best matching p_query (pg_search BM25, French stemming, any term: |||;
never parsed) as rag.candidate: s the score, r 1..p_n (ties by id, the cut included); filters
p_book, p_levels, p_ids, p_parents (NULL for none). Cost: one top-N scan; without filters a
static statement (cached plan), with filters a dynamic one, so pg_search pushes them down.
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

-- function: _ensure_vector_index sha256:b0db4ec180d034e7e63f18a1aaa581b01e562c563ac4f10cd73426559b710b84
-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Registers (p_model, p_dimension) and creates, if missing, the partial HNSW cosine indexes of its
rows: chunks on embedding::vector(p_dimension) (hcn_hnsw_…), sentences on
embedding::halfvec(p_dimension) (sent_halfvec_…; a component beyond 65504 fails the build,
naming it); drops the former sent_hnsw_… index; writes the model's scans
(rag._install_model_scans). Returns the chunks' index name. Another dimension for a registered
model is an error. Cost: O(rows) to build (100k 384-d rows: 140 s), instant when they exist.
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

-- function: _fuse sha256:7a1484236b834b6ac14e1ea2a57010f9816a92ca233d84bf219a260f4181b2d1
-- rag._fuse: two branches' candidates fused into one ranked list (the fusion formulas, written here only).
CREATE OR REPLACE FUNCTION rag._fuse(
    p_bm25   rag.candidate[],
    p_vector rag.candidate[],
    p        rag.search_settings
) RETURNS SETOF rag.fused
LANGUAGE sql STABLE
AS $$
/*
Returns each candidate of either branch once, with its fused score, floor (a row no branch read)
and rank (ties: the better branch rank, then id). A branch's value x of a candidate:
  'rrf'     1 / (rrf_k + branch rank), 0 when absent; fused = bm25_weight x_b + vector_weight x_v
  'convex'  its score normalised over the branch ('zscore' or 'minmax'; 1 when all equal), the
            branch's floor least(lowest x, 0) when absent;
            fused = (bm25_weight x_b + vector_weight x_v) / (bm25_weight + vector_weight)
Cost: a sort in memory; inlined into the caller's statement.
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

-- function: _hybrid sha256:cf8fee5e80e74b723a4c1fd36e16135d3128a2e74d5cbd6097609fbc0d41e433
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
Returns the p_k best rows of rag._fuse over both branches' greatest(hybrid_pool, p_k)
candidates, best first: score = fused, and for a paragraph (1 - chapter_weight) x fused +
chapter_weight x its chapter's (its parent summary's best fused score among the candidates,
else the floor; section_score). When p_levels leaves out level 1, the branches read it too and
the filter applies after. Ties: the fused order.
Cost: two index scans, a fusion in memory, p_k lookups.
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

-- function: _install_model_scans sha256:fcac2b3f771f93c6cc694797766d2a4665acd185cdaef82e0a52ea63d013547e
-- rag._install_model_scans: write the corpus model's kNN scans as inlinable SQL functions (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_scans(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Writes rag._knn and rag._knn_sentences for p_model (rag._scan_sql's text as inlinable SQL
functions, so callers' static statements cache the index scan; no ranking in them), keeping
their identity and privileges; returns p_model. Run at each load (rag._ensure_vector_index) and
by `bookrag migrate`. A model with a $ keeps the stand-ins (NOTICE). Cost: milliseconds.
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

-- function: _interleave sha256:60c3c19bcf5233725bfd16f029d8280ce39cfb37b1f79fb0029cb88780e9dbe3
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
Returns at most p_k rows ranked 1..k: place p is the sentence branch's (p_sentences) when
p > p_after and (p - p_after - 1) % p_every = 0, p_rows's otherwise; each place takes its
list's next row whose paragraph is not placed yet (a p_rows row: not placed by the branch), so
a paragraph both hold takes the better place; a list that runs out leaves its places to the
other. A placed branch row takes the branch columns of the same chunk later in p_rows.
Cost: a loop over at most 3k rows in memory.
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

-- function: _knn sha256:e8619667b6974cc60e83221a568e802a05a171d3d9ce59e1d7b8f7e3e6957046
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
Returns the p_n rows of p_model nearest to p_vector (rag.candidate: s the cosine similarity),
filtered by p_book, p_levels, p_ids. This file's version EXECUTEs rag._scan_sql('nodes', …);
rag._install_model_scans replaces it with that text as inlinable SQL for the corpus model.
The caller sets ef_search (rag._set_hnsw). Cost: one HNSW scan.
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

-- function: _knn_sentences sha256:460ea5835506509cae277878d831c0bdc17be0e56b1da13d31dd7f8984d8fed6
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
Returns the p_n sentences of p_model nearest to p_vector (halfvec HNSW index), as the file and
paragraphs they cite and the full-precision distance. Replaced as rag._knn is.
Cost: one HNSW scan.
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

-- function: _scan_sql sha256:b71a8596d8edf1663731951a3a2c9db4b8b3a89afcf49b8a3ea08cd75c9c45f1
-- rag._scan_sql: the text of a kNN scan over one model's HNSW index (rag._knn, rag._knn_sentences).
CREATE OR REPLACE FUNCTION rag._scan_sql(
    p_scan      TEXT,
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns the SELECT of one kNN scan for p_model of p_dimension, both as literals (the partial
HNSW index's expression and predicate, which a parameter cannot match):
  'nodes'      rag.candidate rows: $3 nearest to $2; $1 the expected model (else no row),
               $4 book, $5 levels, $6 ids, each NULL for none
  'sentences'  (cited file, cited paragraphs, distance) of the $3 sentences nearest to $2; $4 book
Raises invalid_parameter_value for another scan, a model with a $, a dimension out of 1..2000.
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

-- function: _search_hits sha256:22ceee77191c2d4f058531ce98cf3130841868d2f3d0190ee90165dc054faaf1
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
Checks rag.search's arguments and returns the mode's rows (rag.search_hit, best first, without
cites and expansions): 'auto' is 'two-stage' when p_levels allows paragraphs, else 'hybrid',
and 'hybrid' when two-stage finds no paragraph; 'two-stage' rag._two_stage (p_levels NULL or
{0}); 'hybrid' rag._hybrid; 'bm25' rag._bm25 alone; 'vector' rag._knn alone (p_vector required).
In two-stage and hybrid, with a vector and paragraphs allowed, the sentence branch
(rag._sentences) takes its places (rag._interleave). Raises invalid_parameter_value naming the
value (mode, query, k, book, levels, expand, query model or vector length, a setting, within).
Parallel query and sequential scans off; rag._set_hnsw's settings restored on return.
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

-- function: _sentences sha256:8af0b4492a6b355341b347760ad6cf7e06bf2afddefd5e10f8794a689eef8c5e
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
Returns at most p_k paragraphs, best first: those cited by the 2 x p_k chapter-summary
sentences (rag.sentences) nearest to p_vector, each scored by its best citing sentence's
similarity (sentence_score, sentence_rank; ties by its own similarity), by its chunk nearest the
query. The sentences come from the halfvec HNSW index (rag._knn_sentences), or exactly within
p_ids's subtree. Cost: one HNSW scan of 2 x p_k sentences, a lookup per paragraph.
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

-- function: _settings sha256:5b12c383fbb63a4f63acc6f01d71441021554891a52a387356979358c09add3f
-- rag._settings: the tuning of a search (names, defaults and bounds, defined here only).
CREATE OR REPLACE FUNCTION rag._settings(
    p_tuning JSONB DEFAULT NULL
) RETURNS rag.search_settings
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the settings a search runs with: the defaults, overridden by p_tuning's named values
(NULL or '{}' = the defaults; `SELECT * FROM rag._settings()` shows them).
  fusion 'convex' | 'rrf'; normalisation 'zscore' | 'minmax'   (rag._fuse)
  bm25_weight, vector_weight 0.5, 0.5 (finite, >= 0, not both 0); rrf_k 60 (>= 1)
  chapter_weight 0.4 (0..1), hybrid_pool 40 (1..1000)            (rag._hybrid)
  sections 5 (1..100), section_weight 0.3 (0..1), pool 100, vector_pool 40 (1..1000) (rag._two_stage)
  sentence_after 1, sentence_every 3 (0..1000; every 0 = off)    (rag._interleave)
Raises invalid_parameter_value naming the setting: unknown, of the wrong type, out of bounds.
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

-- function: _two_stage sha256:6c479a3a4f5b88eaf799f4f7708c4a0edaff4d19afdb3feaa83e81549983efc5
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
Returns at most p_k paragraphs, best first, from one first search: rag._fuse over the BM25
branch's n = least(1000, greatest(pool, p_k, 10 x sections)) candidates and the kNN branch's
vector_pool, every level, its n best rows read.
  1. sections (a level-1 summary's file, a paragraph's parent) score their rows' best fused
     score; the `sections` best are kept, min-max normalised (section_score).
  2. their paragraphs among those rows; fewer than p_k: a search inside the kept sections,
     rag._fuse over their paragraphs the first search read with a BM25 score (no vector:
     pg_search inside them) and their exact kNN, greatest(p_k, pool) of each and kept.
  score = (1 - section_weight) x fused min-max normalised over them + section_weight x section.
No section: NOTICE, then rag._hybrid over paragraphs (pool, no chapter term). No paragraph: no row.
Cost: two index scans, statements in memory; the inside search reads the sections' paragraphs.
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

-- function: build_context sha256:872835a537dda31e654ab314f4caddffade9892ed8c7080ca6bef99bf0ce3922
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
Returns the context an LLM reads: rag.pack_context(ARRAY(SELECT id FROM rag.search(p_query,
p_query_embedding, p_mode, p_k, p_book, p_levels, p_within) ORDER BY rank), p_budget, p_expand)
(write that composition to pass other rag.search arguments). p_budget 1..1,000,000 tokens
(default 3000), p_k 1..1000 (default 8), p_expand each hit's parent (default true).
Raises what rag.search and rag.pack_context raise. Cost: one search, two lookups per hit.
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

-- function: get_children sha256:f84c1c235faf5803aec1bd94033076c21d4b57a06e6b7370e25ee8a63a67461b
-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
"Load the children" of p_source_file: its child nodes in document order, each whole, while the
running total of their sizes stays within p_budget (0..1,000,000 tokens, default 4000); the
first that does not fit and every one after it are left out, so the result reads as one
contiguous stretch of the book. Rows (rag.context_row): an included child's rows in chunk order,
role 'child', with their paragraph (§N) and used_tokens the running total; a child left out,
one row, role 'omitted', no content, its size in content_token_count. A leaf or unknown file:
no rows. Cost: one index range scan on parent_source_file plus the children's rows.
*/
BEGIN
    IF p_budget IS NULL OR p_budget < 0 OR p_budget > 1000000 THEN
        RAISE EXCEPTION 'budget must be between 0 and 1000000 tokens, got %', coalesce(p_budget::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH kids AS (
        SELECT n.source_file AS f, min(n.node_order) AS pos, min(n.level) AS lvl, min(n.node_type) AS nt,
               min(n.heading_path) AS hp, min(n.book) AS bk, sum(coalesce(n.content_token_count, 0))::int AS tokens
        FROM rag.hierarchical_content_nodes n
        WHERE n.parent_source_file = p_source_file
        GROUP BY n.source_file
    ), cut AS (
        SELECT k.*, sum(k.tokens) OVER (ORDER BY k.pos, k.f) AS running
        FROM kids k
    ), marked AS (
        SELECT c.*, bool_and(c.running <= p_budget) OVER (ORDER BY c.pos, c.f) AS fits
        FROM cut c
    )
    SELECT u.source_file, u.chunk_index, u.level, u.node_type, u.heading_path, u.content, u.content_token_count,
           u.book, u.node_order, u.paragraph, u.role, NULL::int,
           CASE WHEN u.role = 'child' THEN (sum(coalesce(u.content_token_count, 0)) FILTER (WHERE u.role = 'child')
                OVER (ORDER BY u.pos, u.source_file, u.chunk_index))::int END
    FROM (
        SELECT m.pos, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
               n.content_token_count, n.book, n.node_order, n.paragraph,
               'child'::text AS role
        FROM marked m JOIN rag.hierarchical_content_nodes n ON n.source_file = m.f
        WHERE m.fits
        UNION ALL
        SELECT m.pos, m.f, NULL::int, m.lvl, m.nt, m.hp, NULL::text, m.tokens, m.bk, m.pos, NULL::int, 'omitted'
        FROM marked m
        WHERE NOT m.fits
    ) u
    ORDER BY u.pos, u.source_file, u.chunk_index;
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

-- function: pack_context sha256:6dd1f3e8d28103bba1b1997e4cdd618ebc1f3ecc79df0e3c4a42ca794d60da95
-- rag.pack_context: given hits in rank order, the reading-order context that fits a token budget.
CREATE OR REPLACE FUNCTION rag.pack_context(
    p_hit_ids INT[],
    p_budget  INT DEFAULT 3000,
    p_expand  BOOLEAN DEFAULT true
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Packs the rows p_hit_ids (best hit first; unknown ids and NULLs skipped) into a context within
p_budget tokens (1..1,000,000, default 3000): for each hit, its parent node's rows (when
p_expand, default true, and not a root) plus the hit, minus rows taken, added whole when it
fits, else the hit alone if it fits, else skipped. Rows in reading order with their citation,
role ('hit' or 'parent'), the hit's rank and the running total (rag.context_row). The MCP server
packs the hits it holds without searching again. Cost: two index lookups per hit.
*/
DECLARE
    v_hit       RECORD;
    v_ids       INT[] := '{}';
    v_roles     TEXT[] := '{}';
    v_ranks     INT[] := '{}';
    v_left      INT := p_budget;
    v_unit_ids  INT[];
    v_unit_tok  INT;
BEGIN
    IF p_budget IS NULL OR p_budget < 1 OR p_budget > 1000000 THEN
        RAISE EXCEPTION 'budget must be between 1 and 1000000 tokens, got %', coalesce(p_budget::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_hit IN
        SELECT n.id, n.parent_source_file, n.content_token_count, u.rank::int AS rank
        FROM unnest(p_hit_ids) WITH ORDINALITY AS u(id, rank)
        JOIN rag.hierarchical_content_nodes n ON n.id = u.id
        ORDER BY u.rank
    LOOP
        CONTINUE WHEN v_hit.id = ANY(v_ids);
        -- The unit: parent rows not yet taken (in chunk order), then the hit.
        SELECT coalesce(array_agg(p.id ORDER BY p.chunk_index), '{}'), coalesce(sum(p.content_token_count), 0)
        INTO v_unit_ids, v_unit_tok
        FROM rag.get_node(v_hit.parent_source_file) p
        WHERE p_expand AND NOT (p.id = ANY(v_ids));
        IF v_unit_tok + coalesce(v_hit.content_token_count, 0) <= v_left THEN
            v_ids   := v_ids || v_unit_ids || v_hit.id;
            v_roles := v_roles || array_fill('parent'::text, ARRAY[cardinality(v_unit_ids)]) || 'hit'::text;
            v_ranks := v_ranks || array_fill(v_hit.rank, ARRAY[cardinality(v_unit_ids)]) || v_hit.rank;
            v_left  := v_left - v_unit_tok - coalesce(v_hit.content_token_count, 0);
        ELSIF coalesce(v_hit.content_token_count, 0) <= v_left THEN
            v_ids   := v_ids || v_hit.id;
            v_roles := v_roles || 'hit'::text;
            v_ranks := v_ranks || v_hit.rank;
            v_left  := v_left - coalesce(v_hit.content_token_count, 0);
        END IF;
        EXIT WHEN v_left <= 0;
    END LOOP;

    RETURN QUERY
    SELECT n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
           n.content_token_count, n.book, n.node_order, n.paragraph, u.role, u.hit_rank,
           (sum(coalesce(n.content_token_count, 0)) OVER (ORDER BY n.book, n.node_order, n.source_file, n.chunk_index))::int
    FROM unnest(v_ids, v_roles, v_ranks) AS u(id, role, hit_rank)
    JOIN rag.hierarchical_content_nodes n ON n.id = u.id
    ORDER BY n.book, n.node_order, n.source_file, n.chunk_index;
END
$$;

-- function: search sha256:7e7c91102cc94246e9a74fa625def88fed6ebdbb287eed665a2d47e4bd4caed3
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
  p_query_embedding its vector from the corpus model, query role (`bookrag embed`); NULL: BM25 alone
  p_mode            'auto' (default: 'two-stage' for paragraphs, 'hybrid' when p_levels asks for
                    summaries or two-stage finds nothing), 'two-stage', 'hybrid', 'bm25', 'vector'
  p_k               1..1000 (default 10); p_book one loaded book; p_levels some of 0..3;
                    p_within a source_file: only its subtree
  p_expand          'parent' fills parent, 'cited' fills cited (JSON); cites is always filled
  p_query_model     the vector's model: refused when not the corpus model
  p_tuning          named settings for measurement, e.g. '{"sections": 7}' (rag._settings)
Raises invalid_parameter_value naming the bad value (rag._search_hits).
Cost: the mode's scans, plus a lookup per summary hit (cites), per distinct parent ('parent'),
per hit ('cited'). A SQL function: inlined into the caller's statement.
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

-- function: search_phrasings sha256:f2b9d420f313ab5756381a8fec140c0dabc2cebe727a5c4429bb9eae9457db75
-- rag.search_phrasings: one question searched in several phrasings at once, their lists fused.
CREATE OR REPLACE FUNCTION rag.search_phrasings(
    p_query               TEXT,
    p_query_embedding     vector,
    p_phrasings           TEXT[],
    p_phrasing_embeddings vector[] DEFAULT NULL,
    p_k                   INT DEFAULT 10,
    p_book                TEXT DEFAULT NULL,
    p_levels              INT[] DEFAULT NULL,
    p_within              TEXT DEFAULT NULL,
    p_expand              TEXT[] DEFAULT NULL,
    p_query_model         TEXT DEFAULT NULL,
    p_mode                TEXT DEFAULT 'auto',
    p_fusion              TEXT DEFAULT 'rrf'
) RETURNS TABLE (rank INT, score FLOAT8, found_by INT[], phrasing_ranks INT[], hit rag.search_hit)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the p_k best hits of one question searched as p_query and as each of p_phrasings (other
wordings: the author's keywords, a passage in his style), best first: each wording one
rag.search with the same filters, expansions and model check (its top max(p_k, 20)), the lists
fused: rank, score; found_by (0 = p_query, i = p_phrasings[i]); phrasing_ranks (its rank in each,
in found_by's order); hit (the rag.search_hit row of the list that ranked it best).
  p_phrasings           0..4 wordings, none empty, over 10,000 characters, or repeating the query
                        or another (case and outer spaces aside); none: rag.search's own rows
  p_phrasing_embeddings their vectors, same order; required when the query has one and the mode
                        reads vectors
  p_mode                every search's mode (default 'auto', decision 0031)
  p_fusion              'rrf' (default): sum of 1 / (60 + rank); 'best': the best rank. Ties:
                        found by more lists, then the best list rank
  the others            as rag.search's
Raises invalid_parameter_value naming the phrasing and the rule it breaks; rag.search the rest.
Cost: one rag.search per wording, and a sort of at most 5 x max(p_k, 20) rows.
*/
DECLARE
    v_n    INT := coalesce(cardinality(p_phrasings), 0);
    v_pool INT := CASE WHEN v_n = 0 THEN p_k ELSE greatest(p_k, 20) END;
    v_key  TEXT;
BEGIN
    IF v_n > 4 THEN
        RAISE EXCEPTION 'at most 4 phrasings besides the query, got %', v_n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1..v_n LOOP
        v_key := lower(btrim(p_phrasings[i], E' \t\r\n'));
        IF v_key IS NULL OR v_key = '' THEN
            RAISE EXCEPTION 'phrasing % is empty', i USING ERRCODE = 'invalid_parameter_value';
        ELSIF length(p_phrasings[i]) > 10000 THEN
            RAISE EXCEPTION 'phrasing % is % characters long; the limit is 10000', i, length(p_phrasings[i])
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF v_key = lower(btrim(p_query, E' \t\r\n')) THEN
            RAISE EXCEPTION 'phrasing % repeats the query: "%"', i, left(p_phrasings[i], 80)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR j IN 1..i - 1 LOOP
            IF v_key = lower(btrim(p_phrasings[j], E' \t\r\n')) THEN
                RAISE EXCEPTION 'phrasing % repeats phrasing %: "%"', i, j, left(p_phrasings[i], 80)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END LOOP;
    IF p_phrasing_embeddings IS NOT NULL AND coalesce(cardinality(p_phrasing_embeddings), 0) <> v_n THEN
        RAISE EXCEPTION 'p_phrasing_embeddings has % vectors for % phrasings', coalesce(cardinality(p_phrasing_embeddings), 0), v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n > 0 AND p_phrasing_embeddings IS NULL AND p_query_embedding IS NOT NULL AND p_mode IS DISTINCT FROM 'bm25' THEN
        RAISE EXCEPTION 'the phrasings have no vectors (p_phrasing_embeddings) while the query has one: mode % compares vectors',
            p_mode USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_fusion IS NULL OR p_fusion NOT IN ('rrf', 'best') THEN
        RAISE EXCEPTION 'fusion of phrasings must be ''rrf'' or ''best'', got "%"', coalesce(p_fusion, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    RETURN QUERY
    WITH wordings AS (
        SELECT 0 AS i, p_query AS text, p_query_embedding AS emb
        UNION ALL
        SELECT u.o::int, u.t, u.e
        FROM unnest(p_phrasings, coalesce(p_phrasing_embeddings, array_fill(NULL::vector, ARRAY[v_n])))
             WITH ORDINALITY AS u(t, e, o)
    ), lists AS (
        SELECT w.i, s AS row
        FROM wordings w
        CROSS JOIN LATERAL rag.search(w.text, w.emb, p_mode, v_pool, p_book, p_levels,
                                      p_within => p_within, p_expand => p_expand, p_query_model => p_query_model) s
    ), fused AS (
        SELECT (l.row).id AS id,
               CASE WHEN p_fusion = 'rrf' THEN sum(1.0 / (60 + (l.row).rank)) ELSE max(1.0 / (60 + (l.row).rank)) END AS score,
               array_agg(l.i ORDER BY l.i) AS found_by,
               array_agg((l.row).rank ORDER BY l.i) AS ranks,
               (array_agg(l.row ORDER BY (l.row).rank, l.i))[1] AS best
        FROM lists l
        GROUP BY (l.row).id
    )
    SELECT (row_number() OVER (ORDER BY f.score DESC, cardinality(f.found_by) DESC, (f.best).rank, f.id))::int,
           f.score::float8, f.found_by, f.ranks, f.best
    FROM fused f
    ORDER BY 1
    LIMIT p_k;
END
$$;

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], boolean, text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search(text, vector, text, int, text, int[], text, text[], text, jsonb) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

DELETE FROM rag.function_versions WHERE name IN ('_branch_sql', '_collect_sql', '_default_search', '_fusion_settings', '_install_model_search', '_knn_args', '_search_in_sections', 'search_branch', 'search_hybrid', 'search_sentences', 'search_two_stage');

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '5011f85d27841319077373bfc3cbc99660b2685391a9e099b0e51930b790f288', '0023_one_ranking_written_once'),
    ('_bm25', '3ef59d40786c907d9b0292f1de0977fe2c1be68628aff9b2ef9e5ee1d7f08e98', '0023_one_ranking_written_once'),
    ('_check_search_args', '3581c748f88e63387c98ef4b26426ac7b2d5e5f04af081d9d413294324659ca6', '0023_one_ranking_written_once'),
    ('_ensure_vector_index', 'b0db4ec180d034e7e63f18a1aaa581b01e562c563ac4f10cd73426559b710b84', '0023_one_ranking_written_once'),
    ('_fuse', '7a1484236b834b6ac14e1ea2a57010f9816a92ca233d84bf219a260f4181b2d1', '0023_one_ranking_written_once'),
    ('_hybrid', 'cf8fee5e80e74b723a4c1fd36e16135d3128a2e74d5cbd6097609fbc0d41e433', '0023_one_ranking_written_once'),
    ('_install_model_scans', 'fcac2b3f771f93c6cc694797766d2a4665acd185cdaef82e0a52ea63d013547e', '0023_one_ranking_written_once'),
    ('_interleave', '60c3c19bcf5233725bfd16f029d8280ce39cfb37b1f79fb0029cb88780e9dbe3', '0023_one_ranking_written_once'),
    ('_knn', 'e8619667b6974cc60e83221a568e802a05a171d3d9ce59e1d7b8f7e3e6957046', '0023_one_ranking_written_once'),
    ('_knn_sentences', '460ea5835506509cae277878d831c0bdc17be0e56b1da13d31dd7f8984d8fed6', '0023_one_ranking_written_once'),
    ('_scan_sql', 'b71a8596d8edf1663731951a3a2c9db4b8b3a89afcf49b8a3ea08cd75c9c45f1', '0023_one_ranking_written_once'),
    ('_search_hits', '22ceee77191c2d4f058531ce98cf3130841868d2f3d0190ee90165dc054faaf1', '0023_one_ranking_written_once'),
    ('_sentences', '8af0b4492a6b355341b347760ad6cf7e06bf2afddefd5e10f8794a689eef8c5e', '0023_one_ranking_written_once'),
    ('_settings', '5b12c383fbb63a4f63acc6f01d71441021554891a52a387356979358c09add3f', '0023_one_ranking_written_once'),
    ('_two_stage', '6c479a3a4f5b88eaf799f4f7708c4a0edaff4d19afdb3feaa83e81549983efc5', '0023_one_ranking_written_once'),
    ('build_context', '872835a537dda31e654ab314f4caddffade9892ed8c7080ca6bef99bf0ce3922', '0023_one_ranking_written_once'),
    ('get_children', 'f84c1c235faf5803aec1bd94033076c21d4b57a06e6b7370e25ee8a63a67461b', '0023_one_ranking_written_once'),
    ('outline', '725dc03a6d0c7ad286f65063c4a9893d5ac4f08c7836f80c7a5796293bf029f2', '0023_one_ranking_written_once'),
    ('pack_context', '6dd1f3e8d28103bba1b1997e4cdd618ebc1f3ecc79df0e3c4a42ca794d60da95', '0023_one_ranking_written_once'),
    ('search', '7e7c91102cc94246e9a74fa625def88fed6ebdbb287eed665a2d47e4bd4caed3', '0023_one_ranking_written_once'),
    ('search_phrasings', 'f2b9d420f313ab5756381a8fec140c0dabc2cebe727a5c4429bb9eae9457db75', '0023_one_ranking_written_once')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
