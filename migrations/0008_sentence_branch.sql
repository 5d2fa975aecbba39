-- 0008_sentence_branch: issue 11: the sentence branch (rag.search_sentences over rag.sentences) placed in hybrid lists; search_hit gains sentence_rank and sentence_score
-- depends: 0007_search_expand_and_pack_context

-- The sentence branch's rows: every anchored sentence of a chapter summary, embedded alone.
CREATE TABLE IF NOT EXISTS rag.sentences (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_file        TEXT NOT NULL,
    chunk_index        INT NOT NULL,
    sentence_index     INT NOT NULL CHECK (sentence_index >= 0),
    content            TEXT NOT NULL CHECK (content <> ''),
    cited_source_file  TEXT NOT NULL CHECK (cited_source_file ~ '^corpus/[^/]+/.+\.md$'),
    cited_paragraphs   INT[] NOT NULL CHECK (cardinality(cited_paragraphs) >= 1 AND 1 <= ALL (cited_paragraphs)),
    embedding_model    TEXT NOT NULL,
    embedding          vector STORAGE PLAIN NOT NULL,  -- neither compressed nor TOASTed: the exact scan reads every vector
    book               TEXT GENERATED ALWAYS AS (split_part(source_file, '/', 2)) STORED,
    FOREIGN KEY (source_file, chunk_index)
        REFERENCES rag.hierarchical_content_nodes (source_file, chunk_index) ON DELETE CASCADE,
    UNIQUE (source_file, chunk_index, sentence_index),
    CHECK (cited_source_file <> source_file)
);
COMMENT ON TABLE rag.sentences IS
    'Each anchored sentence of a chapter (level-1) summary, embedded alone, with the paragraphs its anchors cite ([§12–14], docs/anchors.md): the rows of the sentence branch (rag.search_sentences). Loaded from the summary sidecars'' `sentences` with their chunk by `bookrag load`; deleted with it.';
COMMENT ON COLUMN rag.sentences.id IS 'Surrogate key (a replica identity for logical replication, docs/scaling.md).';
COMMENT ON COLUMN rag.sentences.source_file IS 'The summary the sentence belongs to (a level-1 summary.md).';
COMMENT ON COLUMN rag.sentences.chunk_index IS 'The summary chunk the sentence sits in.';
COMMENT ON COLUMN rag.sentences.sentence_index IS '0-based position of the sentence among the anchored sentences of its chunk.';
COMMENT ON COLUMN rag.sentences.content IS 'The sentence without its anchors (what was embedded).';
COMMENT ON COLUMN rag.sentences.cited_source_file IS 'The source.md of the same section, whose paragraphs the anchors cite.';
COMMENT ON COLUMN rag.sentences.cited_paragraphs IS '1-based paragraph numbers the anchors cite (hierarchical_content_nodes.paragraph), sorted.';
COMMENT ON COLUMN rag.sentences.embedding_model IS 'Model that produced embedding (the corpus model, as in the sidecar manifest).';
COMMENT ON COLUMN rag.sentences.embedding IS 'Passage embedding of content alone (sidecar sentence_recipe plain-v1), dimension of embedding_model.';
COMMENT ON COLUMN rag.sentences.book IS 'Book slug (second path segment of source_file), generated.';
GRANT SELECT ON rag.sentences TO bookrag_reader;

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
-- dropped: _filter_sql
DROP FUNCTION IF EXISTS rag._filter_sql(text, int[], text, text[], int[]);  -- its file was deleted
DROP TYPE IF EXISTS rag.search_hit CASCADE;  -- its attributes changed; dependants re-created below
CREATE TYPE rag.search_hit AS (id int, source_file text, chunk_index int, level int, node_type text, heading_path text, parent_source_file text, content text, content_token_count int, book text, node_order int, score float8, rank int, bm25_rank int, bm25_score float8, vector_rank int, vector_score float8, section_score float8, sentence_rank int, sentence_score float8);
DROP TYPE IF EXISTS rag.search_result CASCADE;  -- its attributes changed; dependants re-created below
CREATE TYPE rag.search_result AS (id int, source_file text, chunk_index int, level int, node_type text, heading_path text, parent_source_file text, content text, content_token_count int, book text, node_order int, score float8, rank int, bm25_rank int, bm25_score float8, vector_rank int, vector_score float8, section_score float8, sentence_rank int, sentence_score float8, cites json, parent json, cited json);
DROP FUNCTION IF EXISTS rag._fusion_settings(text, text, float8, float8, float8, float8);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag._search_hits(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, text[], text);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text, text, text, float8, float8, float8, float8);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, text[], text);  -- arguments or result changed

-- function: _types sha256:3fbee2a50342f919379de1b86fbcf29677b7cc029c4c5db653e6bb6e1ff0a02e
-- Row types shared by the retrieval functions (named once, reused by every function).
--
-- rag.search_hit: one ranked chunk. Every search function returns SETOF rag.search_hit:
--   the node columns (id, source_file, chunk_index, level, node_type, heading_path,
--   parent_source_file, content, content_token_count, book, node_order), then
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
-- rag.search_result: what rag.search returns: a rag.search_hit's columns, then
--   cites   JSON [{source_file, paragraphs}]: what a summary hit's anchors cite ([] otherwise);
--   parent  JSON array of the hit's parent node rows in chunk order (p_expand has 'parent'), else NULL;
--   cited   JSON array of the rows its anchors cite, reading order (p_expand has 'cited'), else NULL.
-- rag.node_chunk: one row of a node, in reading order (get_node, get_parent, get_children).
-- rag.context_row: one row of a built context (build_context).
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
            node_order            INT,
            score               FLOAT8,
            rank                INT,
            bm25_rank           INT,
            bm25_score          FLOAT8,
            vector_rank         INT,
            vector_score        FLOAT8,
            section_score       FLOAT8,
            sentence_rank       INT,
            sentence_score      FLOAT8
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'search_result') THEN
        CREATE TYPE rag.search_result AS (
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
            node_order            INT
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
            node_order            INT,
            role                TEXT,    -- 'hit' (a retrieved chunk) or 'parent' (expansion)
            hit_rank            INT,     -- rank of the hit that brought this row in
            used_tokens         INT      -- running total of tokens in reading order
        );
    END IF;
END
$$;

-- function: _branch_sql sha256:7a273ff2766967dde01da7b2b2f3c49758e4817d4911b0d0e35896a4ed6f636e
-- SQL text of one retrieval branch (BM25 or kNN), shared by search_bm25, search_vector and search_hybrid.
CREATE OR REPLACE FUNCTION rag._branch_sql(
    p_branch       TEXT,
    p_model        TEXT,
    p_dimension    INT,
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[],
    p_within_ids   INT[]
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns a SELECT yielding (id, s, r, lvl, nt, sf, pf): row id, branch score, 1-based branch
rank, and the row's level, node_type, source_file and parent_source_file (read from the heap
tuple the scan visits anyway, for the fusion's chapter term), for at most $7 rows (the
candidate pool). Placeholders: $1 query text, $2 query embedding, $3 book, $4 levels,
$5 node_type, $6 parent files, $7 pool size, $8 the ids of the `within` subtree
(rag._subtree_ids). The filters that are set, and only those, become ' AND ...' conditions
identical in both branches, so pg_search pushes each one into its index scan and the kNN
branch filters the same rows.
  'bm25'   : pg_search match of any query term (|||) on content, scored by pdb.score; the
             query is tokenized by the index's tokenizer (French stemmer, folding), never
             parsed, so operators and quotes are plain characters.
  'vector' : cosine kNN on embedding::vector(p_dimension) restricted to rows of p_model, the
             expression and predicate of that model's partial HNSW index; s = 1 - distance.
             When p_model is NULL (no vectors loaded) the branch is empty.
The model name and dimension are formatted as literal/number (%L, %s); values go through USING.
*/
DECLARE
    v_filters TEXT := concat(
        CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $3' END,
        CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($4)' END,
        CASE WHEN p_node_type IS NOT NULL THEN ' AND n.node_type = $5' END,
        CASE WHEN p_parent_files IS NOT NULL THEN ' AND n.parent_source_file = ANY($6)' END,
        CASE WHEN p_within_ids IS NOT NULL THEN ' AND n.id = ANY($8)' END);
BEGIN
    IF p_branch = 'bm25' THEN
        RETURN format(
            'SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.nt, x.sf, x.pf FROM ('
            'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.node_type AS nt, n.source_file AS sf, '
            'n.parent_source_file AS pf FROM rag.hierarchical_content_nodes n '
            'WHERE n.content ||| $1%s ORDER BY pdb.score(n.id) DESC LIMIT $7) x', v_filters);
    ELSIF p_branch = 'vector' THEN
        IF p_model IS NULL THEN
            RETURN 'SELECT NULL::int AS id, NULL::float8 AS s, NULL::int AS r, NULL::int AS lvl, NULL::text AS nt, '
                   'NULL::text AS sf, NULL::text AS pf WHERE false';
        END IF;
        RETURN format(
            'SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.nt, y.sf, y.pf FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d, n.level AS lvl, '
            'n.node_type AS nt, n.source_file AS sf, n.parent_source_file AS pf '
            'FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL%3$s '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $7) y',
            p_dimension, p_model, v_filters);
    END IF;
    RAISE EXCEPTION 'unknown branch "%"', p_branch USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- function: _fusion_settings sha256:6f8e8af1b85b29549b7010305d695ea8c7caebd73511375242535ae736420b00
-- The fusion settings of a hybrid search: the defaults and the bounds, defined here only.
CREATE OR REPLACE FUNCTION rag._fusion_settings(
    p_fusion         TEXT,
    p_normalisation  TEXT,
    p_bm25_weight    FLOAT8,
    p_vector_weight  FLOAT8,
    p_chapter_weight FLOAT8,
    p_cite_weight    FLOAT8 DEFAULT NULL,
    p_sentence_after INT DEFAULT NULL,
    p_sentence_every INT DEFAULT NULL,
    OUT fusion         TEXT,
    OUT normalisation  TEXT,
    OUT bm25_weight    FLOAT8,
    OUT vector_weight  FLOAT8,
    OUT chapter_weight FLOAT8,
    OUT cite_weight    FLOAT8,
    OUT sentence_after INT,
    OUT sentence_every INT
)
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns the settings a hybrid search runs with: each argument, or its default when NULL, after
checking it. Every function built on rag.search_hybrid (rag.search_two_stage, rag.search,
rag.build_context) takes these parameters with DEFAULT NULL and passes them on, so the
defaults live here only; `SELECT * FROM rag._fusion_settings(NULL, NULL, NULL, NULL, NULL)`
shows them. Chosen by measurement (evaluation/tune_fusion.py: tuned on one half of each
evalset, checked on the other; docs/decisions/0011-score-fusion.md):
  fusion         'convex' (default): a weighted sum of each branch's per-query normalised
                 scores; 'rrf': Reciprocal Rank Fusion (the default before issue 10).
  normalisation  'zscore' (default) or 'minmax': how 'convex' normalises a branch's scores
                 (a branch's lone candidate gets 1 under both: the top of the min-max scale,
                 but below the 2-3 a pool's best z-score reaches; see the decision record).
  bm25_weight, vector_weight   relative weights of the branches (default 0.5 and 0.5); each
                 finite and >= 0, not both 0.
  chapter_weight share of a paragraph's score taken from its chapter summary's fused score,
                 within 0..1 (default 0.4).
  cite_weight    share of a paragraph's score taken from the best candidate summary chunk whose
                 anchors cite it (docs/anchors.md), within 0..1, chapter_weight + cite_weight
                 at most 1 (default 0: measured, see README).
  sentence_after, sentence_every   the sentence branch's places in a hybrid list
                 (rag.search_sentences: paragraphs found through the chapter-summary sentences
                 that cite them, docs/anchors.md): the first sentence_after hits are the fused
                 list's, then one place in every sentence_every goes to the sentence branch's
                 next paragraph not already listed: with the defaults (1 and 3), places 2, 5, 8.
                 Both within 0..1000; sentence_every 0 = no sentence branch.
Bad values raise invalid_parameter_value (22023) naming the value; Python, the CLI and the MCP
server pass values through and show this message.
Cost: a few comparisons.
*/
BEGIN
    fusion         := coalesce(p_fusion, 'convex');
    normalisation  := coalesce(p_normalisation, 'zscore');
    bm25_weight    := coalesce(p_bm25_weight, 0.5);
    vector_weight  := coalesce(p_vector_weight, 0.5);
    chapter_weight := coalesce(p_chapter_weight, 0.4);
    cite_weight    := coalesce(p_cite_weight, 0);
    sentence_after := coalesce(p_sentence_after, 1);
    sentence_every := coalesce(p_sentence_every, 3);
    IF fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got "%"', fusion
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF normalisation NOT IN ('minmax', 'zscore') THEN
        RAISE EXCEPTION 'normalisation must be ''minmax'' or ''zscore'', got "%"', normalisation
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (bm25_weight >= 0 AND bm25_weight < 'Infinity' AND vector_weight >= 0 AND vector_weight < 'Infinity') THEN
        RAISE EXCEPTION 'branch weights must be finite and >= 0, got bm25 % and vector %', bm25_weight, vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF bm25_weight = 0 AND vector_weight = 0 THEN
        RAISE EXCEPTION 'branch weights are both 0: give at least one branch a positive weight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT chapter_weight BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'chapter_weight must be within 0..1, got %', chapter_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT cite_weight BETWEEN 0 AND 1 OR chapter_weight + cite_weight > 1 THEN
        RAISE EXCEPTION 'cite_weight must be within 0..1 and chapter_weight + cite_weight at most 1, got % and %',
            cite_weight, chapter_weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT sentence_after BETWEEN 0 AND 1000 OR NOT sentence_every BETWEEN 0 AND 1000 THEN
        RAISE EXCEPTION 'sentence_after and sentence_every must be within 0..1000, got % and %',
            sentence_after, sentence_every USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _knn_args sha256:9455372d2d1ac03c0eef8b4b2ebbc8ff43eee1b4edebf14b0f4c04573a156946
-- The checks and lookups every kNN search starts with (rag.search_vector, rag.search_sentences).
CREATE OR REPLACE FUNCTION rag._knn_args(
    p_function        TEXT,
    p_query_embedding vector,
    p_k               INT,
    p_book            TEXT,
    p_levels          INT[],
    p_node_type       TEXT,
    p_within          TEXT,
    OUT model         TEXT,
    OUT dimension     INT,
    OUT within_ids    INT[]
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the corpus model and its dimension (model NULL when no vector is loaded: the caller
returns no rows) and the ids of the p_within subtree (NULL = no restriction), after checking
the arguments: a NULL p_query_embedding is an error naming p_function; then
rag._check_search_args (k, book, levels, node_type), rag._subtree_ids (within) and
rag._corpus_model (the vector's length) raise invalid_parameter_value with their messages.
Cost: a few indexed lookups (the subtree walk when p_within is set).
*/
BEGIN
    IF p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; % needs a vector (see `bookrag embed`)', p_function
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(NULL, p_k, p_book, p_levels, p_node_type, false);
    within_ids := rag._subtree_ids(p_within, p_book);
    SELECT m.model, m.dimension INTO model, dimension FROM rag._corpus_model(p_query_embedding) m;
END
$$;

-- function: _search_hits sha256:37eebd5b13f75b10910f80e59dfb11ee656ad8df7cd60a8bbfcce68d2e13bf15
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
(rag.search_hit, best first), unchanged except in 'hybrid':
  'hybrid'     rag.search_hybrid (both branches fused; the default), with the sentence
               branch's paragraphs (rag.search_sentences) in the places p_sentence_after
               and p_sentence_every give them (rag._fusion_settings): after the first
               sentence_after fused hits, one place in every sentence_every goes to the
               sentence branch's best paragraph not already in the fused list (no chunk of
               the same paragraph there); when the fused list runs out, the sentence branch
               fills the remaining places. The merged list is cut at p_k and ranked again
               1..k (a placed row's score is its sentence score; rank, not score, orders the
               list). Not applied when the filters exclude paragraphs (levels without 0,
               node_type 'summary') or without a query vector.
  'bm25'       rag.search_bm25
  'vector'     rag.search_vector (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it; so is a word of p_expand other than 'parent' and 'cited',
and a p_query_model that is not the corpus model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid adds rag.search_sentences (about
2 ms per search on the two books, bench/bench_search.py) and the merge.
*/
DECLARE
    v_model TEXT;
    st      RECORD;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels or node_type filter'
            USING ERRCODE = 'invalid_parameter_value';
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
    IF p_mode = 'hybrid' THEN
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        IF st.sentence_every = 0 OR st.sentence_after >= p_k OR p_query_embedding IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) OR p_node_type = 'summary' THEN
            RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                p_cite_weight => p_cite_weight);
            RETURN;
        END IF;
        -- Merge: fused row i keeps key i; the sentence branch's j-th new paragraph gets key
        -- after + (j - 1) * (every - 1) + 0.5, i.e. it lands at place after + 1 + (j - 1) * every
        -- while fused rows remain, and fills the places after them (ties: sentence rank).
        RETURN QUERY
        WITH base AS (
            SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                p_cite_weight => p_cite_weight)
        ), listed AS (  -- the paragraphs the fused list holds (any of their chunks; a primary-key lookup each)
            SELECT b.source_file, (SELECT n.paragraph FROM rag.hierarchical_content_nodes n WHERE n.id = b.id) AS paragraph
            FROM base b
            WHERE b.level = 0
        ), placed AS (
            SELECT s.*, row_number() OVER (ORDER BY s.rank) AS j
            FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s
            WHERE NOT EXISTS (SELECT 1 FROM listed l WHERE l.source_file = s.source_file AND l.paragraph =
                              (SELECT n.paragraph FROM rag.hierarchical_content_nodes n WHERE n.id = s.id))
        ), merged AS (
            SELECT b.*, b.rank::float8 AS key FROM base b
            UNION ALL
            SELECT p.id, p.source_file, p.chunk_index, p.level, p.node_type, p.heading_path, p.parent_source_file,
                   p.content, p.content_token_count, p.book, p.node_order, p.score, p.rank, p.bm25_rank,
                   p.bm25_score, p.vector_rank, p.vector_score, p.section_score, p.sentence_rank, p.sentence_score,
                   st.sentence_after + (p.j - 1) * (st.sentence_every - 1) + 0.5
            FROM placed p
        )
        SELECT m.id, m.source_file, m.chunk_index, m.level, m.node_type, m.heading_path, m.parent_source_file,
               m.content, m.content_token_count, m.book, m.node_order, m.score,
               (row_number() OVER (ORDER BY m.key, m.sentence_rank))::int, m.bm25_rank, m.bm25_score, m.vector_rank,
               m.vector_score, m.section_score, m.sentence_rank, m.sentence_score
        FROM merged m
        ORDER BY m.key, m.sentence_rank
        LIMIT p_k;
    ELSIF p_mode = 'two-stage' THEN
        RETURN QUERY SELECT * FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
            p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
            p_vector_weight => p_vector_weight);
    ELSIF p_mode = 'bm25' THEN
        RETURN QUERY SELECT * FROM rag.search_bm25(p_query, p_k, p_book, p_levels, p_node_type, p_within => p_within);
    ELSE
        RETURN QUERY SELECT * FROM rag.search_vector(p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within => p_within);
    END IF;
END
$$;

-- function: build_context sha256:0fb18d5888469b193b8790c5d59a352073708d6fd1f1c8dd07bebff5dddf219f
-- rag.build_context: search + parent expansion + deduplication within a token budget, ordered for reading.
CREATE OR REPLACE FUNCTION rag.build_context(
    p_query           TEXT,
    p_query_embedding vector,
    p_budget          INT DEFAULT 3000,
    p_k               INT DEFAULT 8,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_expand          BOOLEAN DEFAULT true,
    p_mode            TEXT DEFAULT 'hybrid',
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_chapter_weight  FLOAT8 DEFAULT NULL,
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_sentence_after  INT DEFAULT NULL,
    p_sentence_every  INT DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Builds the context an LLM reads to answer p_query: the p_k hits of rag.search (p_mode
'hybrid' | 'two-stage' | 'bm25' | 'vector', checked there) packed by rag.pack_context: each hit
with its parent node's rows (when p_expand), whole units while they fit, never more than
p_budget tokens, in reading order (book, node_order, chunk_index), each row with its citation
(source_file, chunk_index, heading_path, level), its role ('hit' or 'parent'), the rank of the
hit that brought it, and the running token total.
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding NULL: BM25 only).
  p_budget   tokens, 1..1,000,000 (default 3000; checked by rag.pack_context).
  p_k        hits considered, 1..100 (default 8).
  p_book, p_levels, p_node_type  search filters (levels and node_type: not with two-stage).
  p_expand   add each hit's parent node (default true).
  p_mode     which search ranks the hits (default 'hybrid').
  p_within   NULL or a source_file: hits only from that node's subtree (parents may lie above it).
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
  p_sentence_after, p_sentence_every: passed to rag.search (NULL = rag._fusion_settings()).
Cost: one search plus rag.pack_context (two indexed lookups per hit); p50 7.4 ms on the two books,
8.2 ms at 100k rows (bench/bench_search.py, 2026-12-01).
*/
BEGIN
    -- p_budget is checked by rag.pack_context
    IF p_k IS NULL OR p_k < 1 OR p_k > 100 THEN
        RAISE EXCEPTION 'k must be between 1 and 100 for a context, got %', coalesce(p_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within,
                              p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                              p_sentence_after, p_sentence_every) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;

-- function: cites sha256:906c374385609a940d8d0c35f5ade5715c35c1f7d5b185d39135c33d8a0d8596
-- rag.cites: what one summary chunk's anchors cite, compactly, as JSON.
CREATE OR REPLACE FUNCTION rag.cites(
    p_source_file TEXT,
    p_chunk_index INT
) RETURNS JSON
LANGUAGE sql STABLE
AS $$
/*
Returns [{source_file, paragraphs}] for the chunk (p_source_file, p_chunk_index), one object per
cited file in path order: a chapter summary's chunk cites paragraphs of its section's source.md
(paragraphs sorted, [§12–14] expanded), a part or book summary's chunk cites child summaries
whole (paragraphs null). '[]' for a chunk without anchors or a source paragraph. rag.search
fills its `cites` column with it; the MCP get_node tool shows it per chunk. Rows themselves:
rag.get_citations. A SQL function the caller's statement inlines.
Cost: one index scan of rag.citations (its primary key order) per call.
*/
    SELECT coalesce((
        SELECT json_agg(json_build_object('source_file', c.f, 'paragraphs', c.p) ORDER BY c.f)
        FROM (SELECT ct.cited_source_file AS f,
                     array_agg(ct.cited_paragraph ORDER BY ct.cited_paragraph)
                         FILTER (WHERE ct.cited_paragraph IS NOT NULL) AS p
              FROM rag.citations ct
              WHERE ct.source_file = p_source_file AND ct.chunk_index = p_chunk_index
              GROUP BY ct.cited_source_file) c), '[]'::json);
$$;

-- function: search sha256:e74e6b20fc2885ea24c08e4ac1d6a8ffc88dfcba73374caf63d9beb60135d763
-- rag.search: one entry point for every search mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT DEFAULT 'hybrid',
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
) RETURNS SETOF rag.search_result
LANGUAGE sql STABLE
AS $$
/*
Runs the search named by p_mode (rag._search_hits checks every argument and dispatches) and
returns its rows (rag.search_result, best first: the called function's rag.search_hit columns,
then cites, parent, cited):
  'hybrid'     rag.search_hybrid (both branches fused; the default), with places for the
               sentence branch (rag.search_sentences; see rag._search_hits)
  'bm25'       rag.search_bm25
  'vector'     rag.search_vector (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_chapter_weight, p_cite_weight, p_sentence_after and
p_sentence_every by 'hybrid'.
  p_expand       what to attach to each hit, any of:
                   'parent'  the hit's parent node rows (rag.get_node of parent_source_file), as JSON;
                   'cited'   the rows a summary hit's anchors cite (rag.get_citations), as JSON.
                 NULL or '{}' = nothing; any other word is an error naming it. cites (what a
                 summary hit's anchors cite, compactly) is always filled.
  p_query_model  the model p_query_embedding was made with; when given and not the corpus model
                 the call is refused (a vector of another model with the same length would
                 otherwise be compared silently). NULL = not checked.
Cost: the called function's, plus one indexed lookup per summary hit for cites and per hit for
each expansion. A SQL function without settings, so the caller's statement inlines it (one plan,
cached with a prepared statement) and an expansion not asked for is never run.
*/
    SELECT h.*,
           CASE WHEN h.level = 0 THEN '[]'::json ELSE rag.cites(h.source_file, h.chunk_index) END,
           CASE WHEN 'parent' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(p) ORDER BY p.chunk_index), '[]'::json)
                FROM rag.get_node(h.parent_source_file) p) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within, p_fusion,
                          p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                          p_sentence_after, p_sentence_every, p_expand, p_query_model) h
    ORDER BY h.rank;
$$;

-- function: search_bm25 sha256:d961eeefb704ebb99a02ad0f3b5ce1444fb765babae509bdf664b9393828fcc2
-- rag.search_bm25: lexical search (pg_search BM25, French stemming) over the corpus chunks.
CREATE OR REPLACE FUNCTION rag.search_bm25(
    p_query        TEXT,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL,
    p_within       TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Returns the p_k best chunks for p_query by BM25, best first: score = BM25 score, rank 1..k,
bm25_rank = rank, bm25_score = score; vector and section columns NULL.
Parameters:
  p_query        words to search; any term may match (|||); tokenized like the index
                 (French stemmer, stopwords, ASCII folding). Required, <= 10,000 characters.
  p_k            how many chunks, 1..1000 (default 10).
  p_book         NULL = all books, else a folder under corpus/ (unknown book: error).
  p_levels       NULL = all, else e.g. '{0}' paragraphs only, '{1,2}' summaries of sections and parts.
  p_node_type    NULL, 'source' or 'summary'.
  p_parent_files NULL, or only chunks whose parent node is one of these files.
  p_within       NULL, or a source_file: only rows of that node and of the nodes below it
                 (a chapter's summary.md: the summary and its paragraphs). A file that is not
                 loaded, or that is in another book than p_book, is an error.
Edge cases: a query of only stopwords or punctuation matches nothing (no rows, no error).
Cost: one pg_search top-N index scan with the filters pushed down; p50 1.2 ms on the two books
(parallel query is off: worker start-up costs more than the scan at this size).
*/
DECLARE
    v_within INT[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    v_within := rag._subtree_ids(p_within, p_book);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'b.s, b.r, b.r, b.s, NULL::int, NULL::float8, NULL::float8, NULL::int, NULL::float8 '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING p_query, NULL::vector, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;

-- function: search_hybrid sha256:6df7ec96e444e4c0b852134a27afedf710f0e3a517a2a99f52021a71b49cd393
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
    p_cite_weight     FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks of both branches fused, best first. Each branch (BM25 top p_pool,
kNN top p_pool) gives every candidate a value x:
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
  p_query            words for the BM25 branch (required, as in rag.search_bm25).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 counts.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files, p_within: filters, applied identically to
                     both branches (p_within: a source_file, only its subtree; see rag.search_bm25).
  p_pool             candidates taken from each branch, 1..1000 (default 40; at least p_k): the
                     HNSW scan's ef_search is raised to it, so 40 costs what a top-10 kNN costs.
  p_rrf_k            the RRF constant (default 60), >= 1; used by 'rrf' only.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight:
                     NULL = the default; defaults and bounds are rag._fusion_settings's (convex,
                     zscore, 0.5, 0.5, 0.4, cite 0; names 'rrf'|'convex' and 'minmax'|'zscore',
                     weights finite, >= 0 and not both 0, chapter and cite weights 0..1, sum <= 1).
Rows without an embedding compete on BM25 alone.
Cost: a pg_search top-N scan and an HNSW scan of p_pool rows each (two small dynamic
statements), then one static statement (cached plan) fusing at most 2 x p_pool candidates in
memory and reading the p_k rows returned (bench/bench_search.py).
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
    IF p_within IS NOT NULL THEN
        v_within := rag._subtree_ids(p_within, p_book);
    END IF;
    IF st.chapter_weight > 0 AND ((p_levels IS NOT NULL AND NOT 1 = ANY(p_levels)) OR p_node_type = 'source') THEN
        v_levels := CASE WHEN p_levels IS NULL THEN NULL ELSE p_levels || 1 END;
        v_node_type := NULL;
        v_refilter := true;
    END IF;
    v_pool := greatest(p_pool, p_k);

    -- The two index scans, each a small statement of its own ($1..$8 as in rag._branch_sql).
    EXECUTE rag._collect_sql(rag._branch_sql('bm25', NULL, NULL, p_book, v_levels, v_node_type, p_parent_files, v_within))
    INTO b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf, b_floor
    USING p_query, NULL::vector, p_book, v_levels, v_node_type, p_parent_files, v_pool, v_within,
          st.fusion, p_rrf_k, st.normalisation;
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        IF v_model IS NOT NULL THEN
            PERFORM rag._set_hnsw(v_pool);
            EXECUTE rag._collect_sql(rag._branch_sql('vector', v_model, v_dim, p_book, v_levels, v_node_type,
                                                      p_parent_files, v_within))
            INTO v_id, v_x, v_s, v_lvl, v_nt, v_sf, v_pf, v_floor_v
            USING NULL::text, p_query_embedding, p_book, v_levels, v_node_type, p_parent_files, v_pool, v_within,
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
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order,
           top.score, (row_number() OVER (ORDER BY top.score DESC, least(top.br, top.vr), top.id))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, least(top.br, top.vr), top.id;
END
$$;

-- function: search_sentences sha256:927000761339b8d0231e1af67fdf7baf6d975043e10d6e3b4e3915c1f8d80fbb
-- rag.search_sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag.search_sentences(
    p_query_embedding vector,
    p_k      INT DEFAULT 10,
    p_book   TEXT DEFAULT NULL,
    p_within TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
AS $$
/*
Returns at most p_k source paragraphs (level-0 chunks): those cited by the p_k chapter-summary
sentences closest to the query, best first (rag.search_hit; fewer than p_k when those sentences
cite fewer paragraphs). Every anchored sentence of the level-1 summaries (rag.sentences,
embedded alone) is compared with p_query_embedding; a paragraph scores the best cosine
similarity among the sentences whose anchors cite it ([§12–14], docs/anchors.md), ties broken
by the paragraph's own similarity. A paragraph split into several chunks is represented
by its chunk closest to the query. score = sentence_score = that best sentence's similarity,
rank = sentence_rank = 1..k; the branch columns (bm25_*, vector_*) and section_score are NULL.
Reworded questions (a reader's modern French against the book's 1840s French) meet the
summaries' wording, and the anchors lead back to the book's own paragraph: this is why the
branch exists (measured in evaluation/experiments/sentence_anchors/ and README).
Parameters:
  p_query_embedding  the query's vector, of the corpus model (required).
  p_k                how many paragraphs, 1..1000 (default 10).
  p_book             NULL (all books) or one book.
  p_within           NULL or a source_file: only paragraphs in that node's subtree.
No sentence loaded (a corpus without anchors, or no vectors): no rows.
Cost: an exact scan of the sentences of the corpus model (1,540 rows for the two books: about
0.5 ms, their vectors stored in the row, not TOASTed; no HNSW index, see docs/anchors.md), then
one indexed lookup per paragraph the p_k best sentences cite: about 1 ms inside the server on
the two books, 2.6 ms p50 from Python with the round trip (bench/bench_search.py).
Its statement's plan is generic (planned once per session: replanning it each call cost 0.5 ms).
*/
DECLARE
    v_model  TEXT;
    v_within INT[];
BEGIN
    SELECT a.model, a.within_ids INTO v_model, v_within
    FROM rag._knn_args('search_sentences', p_query_embedding, p_k, p_book, NULL, NULL, p_within) a;
    IF v_model IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH s AS (  -- the p_k sentences closest to the query (a sentence cites 1-5 paragraphs: the paragraphs
                 -- they cite are exactly the best-ranked ones, each with its best sentence)
        SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, 1 - (st.embedding <=> p_query_embedding) AS sim
        FROM rag.sentences st
        WHERE st.embedding_model = v_model
          AND (p_book IS NULL OR st.book = p_book)
          AND (v_within IS NULL OR st.cited_source_file IN
               (SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY(v_within)))
        ORDER BY sim DESC
        LIMIT p_k
    ), para AS (
        SELECT s.f, p.n, max(s.sim) AS sim FROM s, unnest(s.ps) AS p(n) GROUP BY s.f, p.n
    ), one AS (  -- one chunk per paragraph: the one closest to the query (an index lookup each)
        SELECT c.*, para.sim
        FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order,
                   CASE WHEN n.embedding_model = v_model THEN 1 - (n.embedding <=> p_query_embedding) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (v_within IS NULL OR n.id = ANY(v_within))
            ORDER BY own DESC NULLS LAST, n.chunk_index
            LIMIT 1
        ) c
    ), top AS (
        SELECT one.*, row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id)::int AS r
        FROM one
    )
    SELECT top.id, top.source_file, top.chunk_index, top.level, top.node_type, top.heading_path,
           top.parent_source_file, top.content, top.content_token_count, top.book, top.node_order,
           top.sim, top.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, top.r, top.sim
    FROM top
    WHERE top.r <= p_k
    ORDER BY top.r;
END
$$;

-- function: search_two_stage sha256:0190ca1afc463955f7374653608b5d48b2859d9e40d4a8484a755737434519cd
-- rag.search_two_stage: find the best sections by their summaries, then the best paragraphs inside them.
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
Two-stage retrieval (seeds/two-stage-search, section 4.2):
  1. rag.search_hybrid over level-1 summaries (chapters and front matter); each section gets
     the best fused score of its summary chunks; the p_sections best are kept, their scores
     min-max normalised over them (section_score in 0..1, 1 for the best).
  2. rag.search_hybrid over the level-0 paragraphs whose parent is one of those sections;
     paragraph scores min-max normalised over the candidates.
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best, with the stage-2
  branch ranks and section_score.
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept after stage 1, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           candidates per branch in each stage (default 100).
  p_within         NULL or a source_file: both stages stay inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   (NULL = rag._fusion_settings()); its chapter term is not used here (stage 1
                   already ranks the chapters).
Edge case: when no level-1 summary matches (a corpus without summaries), stage 1 is empty and
the function falls back to a flat hybrid search over paragraphs (NOTICE).
Cost: two hybrid statements; about twice rag.search_hybrid.
*/
DECLARE
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

    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.source_file, max(h.score) AS best
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, p_sections * 10),
                                   p_book => p_book, p_levels => ARRAY[1], p_pool => p_pool,
                                   p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                   p_fusion => p_fusion, p_normalisation => p_normalisation,
                                   p_chapter_weight => 0, p_within => p_within) h
            GROUP BY h.source_file
            ORDER BY best DESC, h.source_file
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section summary matches; falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool,
                                                      p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                                      p_fusion => p_fusion, p_normalisation => p_normalisation,
                                                      p_chapter_weight => 0, p_within => p_within);
        RETURN;
    END IF;

    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool, p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                               p_fusion => p_fusion, p_normalisation => p_normalisation,
                               p_chapter_weight => 0, p_within => p_within) h
    ), scored AS (
        SELECT p.*, (1 - p_section_weight) * p.norm + p_section_weight * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.f = p.parent_source_file
    )
    SELECT x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

-- function: search_vector sha256:cb09a1745dc26b3e4279d075bc973e634980e3ca0acf9e833f2f6ab3b83d5f31
-- rag.search_vector: semantic kNN search (pgvector HNSW, cosine) with the corpus model.
CREATE OR REPLACE FUNCTION rag.search_vector(
    p_query_embedding vector,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL,
    p_within       TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k chunks nearest to p_query_embedding, best first: score = cosine similarity
(1 - cosine distance), vector_rank = rank, vector_score = score; BM25 and section columns NULL.
Parameters:
  p_query_embedding  the query vector from the corpus model (query role for e5 models);
                     its length must equal the model's dimension (error otherwise). Required.
  p_k, p_book, p_levels, p_node_type, p_parent_files, p_within: as in rag.search_bm25.
Rows without an embedding (files not embedded) never appear. Only vectors of the corpus
model are compared. Edge case: no vectors loaded -> no rows (NOTICE).
Cost: one HNSW index scan on the model's partial index (ef_search raised to the pool, iterative
scan so filters do not starve the result); p50 0.6 ms on the two books.
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    v_model TEXT;
    v_dim   INT;
    v_within INT[];
BEGIN
    SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
    FROM rag._knn_args('search_vector', p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within) a;
    IF v_model IS NULL THEN
        RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'v.s, v.r, NULL::int, NULL::float8, v.r, v.s, NULL::float8, NULL::int, NULL::float8 '
        'FROM (%s) v JOIN rag.hierarchical_content_nodes n ON n.id = v.id ORDER BY v.r',
        rag._branch_sql('vector', v_model, v_dim, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING NULL::text, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text, text, text, float8, float8, float8, float8, int, int) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, int, int, text[], text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_bm25(text, int, text, int[], text, text[], text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_sentences(vector, int, text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_vector(vector, int, text, int[], text, text[], text) TO bookrag_reader;

DELETE FROM rag.function_versions WHERE name IN ('_filter_sql');

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '3fbee2a50342f919379de1b86fbcf29677b7cc029c4c5db653e6bb6e1ff0a02e', '0008_sentence_branch'),
    ('_branch_sql', '7a273ff2766967dde01da7b2b2f3c49758e4817d4911b0d0e35896a4ed6f636e', '0008_sentence_branch'),
    ('_fusion_settings', '6f8e8af1b85b29549b7010305d695ea8c7caebd73511375242535ae736420b00', '0008_sentence_branch'),
    ('_knn_args', '9455372d2d1ac03c0eef8b4b2ebbc8ff43eee1b4edebf14b0f4c04573a156946', '0008_sentence_branch'),
    ('_search_hits', '37eebd5b13f75b10910f80e59dfb11ee656ad8df7cd60a8bbfcce68d2e13bf15', '0008_sentence_branch'),
    ('build_context', '0fb18d5888469b193b8790c5d59a352073708d6fd1f1c8dd07bebff5dddf219f', '0008_sentence_branch'),
    ('cites', '906c374385609a940d8d0c35f5ade5715c35c1f7d5b185d39135c33d8a0d8596', '0008_sentence_branch'),
    ('search', 'e74e6b20fc2885ea24c08e4ac1d6a8ffc88dfcba73374caf63d9beb60135d763', '0008_sentence_branch'),
    ('search_bm25', 'd961eeefb704ebb99a02ad0f3b5ce1444fb765babae509bdf664b9393828fcc2', '0008_sentence_branch'),
    ('search_hybrid', '6df7ec96e444e4c0b852134a27afedf710f0e3a517a2a99f52021a71b49cd393', '0008_sentence_branch'),
    ('search_sentences', '927000761339b8d0231e1af67fdf7baf6d975043e10d6e3b4e3915c1f8d80fbb', '0008_sentence_branch'),
    ('search_two_stage', '0190ca1afc463955f7374653608b5d48b2859d9e40d4a8484a755737434519cd', '0008_sentence_branch'),
    ('search_vector', 'cb09a1745dc26b3e4279d075bc973e634980e3ca0acf9e833f2f6ab3b83d5f31', '0008_sentence_branch')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
