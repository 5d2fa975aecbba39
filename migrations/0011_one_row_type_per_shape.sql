-- 0011_one_row_type_per_shape: issue 12: rag.search_hit ends with cites, parent, cited (rag.search_result dropped); rag.get_children returns rag.context_row; rag.build_context is rag.pack_context over rag.search with the search's filters only; rag.search_branch(query, query_embedding, branch, ...) replaces rag.search_bm25 and rag.search_vector (decision 20); rag.search_sentences looks up only the paragraphs that can rank within k (same rows)
-- depends: 0010_sentence_interleave_paragraph

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
-- dropped: search_bm25
DROP FUNCTION IF EXISTS rag.search_bm25(text, int, text, int[], text, text[], text);  -- its file was deleted
-- dropped: search_vector
DROP FUNCTION IF EXISTS rag.search_vector(vector, int, text, int[], text, text[], text);  -- its file was deleted
DROP TYPE IF EXISTS rag.search_result CASCADE;  -- removed from _types.sql; the functions that returned it changed
DROP TYPE IF EXISTS rag.search_hit CASCADE;  -- its attributes changed; dependants re-created below
CREATE TYPE rag.search_hit AS (id int, source_file text, chunk_index int, level int, node_type text, heading_path text, parent_source_file text, content text, content_token_count int, book text, node_order int, paragraph int, score float8, rank int, bm25_rank int, bm25_score float8, vector_rank int, vector_score float8, section_score float8, sentence_rank int, sentence_score float8, cites json, parent json, cited json);
DROP FUNCTION IF EXISTS rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text, text, text, float8, float8, float8, float8, int, int);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.get_children(text, int);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, int, int, text[], text);  -- arguments or result changed

-- function: _types sha256:36ef20befafe9b6d289ea55d32665c39d6588b29d751bee00f39c2e03bd62c44
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
END
$$;

-- function: _branch_sql sha256:6d7fcaabdd866597eb4712803ba208234b9f6d5a2cd853815e15128a7bb63329
-- SQL text of one retrieval branch (BM25 or kNN), shared by search_branch and search_hybrid.
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

-- function: _fusion_settings sha256:3c90bcca88304fcd305cf14c9ac8350afc1123a73fc05f0a31180643d7ddf72e
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
checking it. Every function built on rag.search_hybrid (rag.search_two_stage, rag.search)
takes these parameters with DEFAULT NULL and passes them on, so the defaults live here only
(rag.build_context runs them; rag.pack_context over rag.search passes others); `SELECT * FROM rag._fusion_settings(NULL, NULL, NULL, NULL, NULL)`
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
                 next paragraph not placed yet (with the defaults, 1 and 3: places 2, 5, 8), so
                 a paragraph both lists hold takes the better of its two places (rag._search_hits).
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

-- function: _knn_args sha256:402412f2b25323a97fa5ed72c5257df9c816082e8501a1fde8c55ef9dee5a4ad
-- The checks and lookups every kNN search starts with (rag.search_branch's 'vector', rag.search_sentences).
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

-- function: _search_hits sha256:b9bc96308a13715ac285f987f604aee43e8e2334218a14d790375b4f19fa010e
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
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it; so is a word of p_expand other than 'parent' and 'cited',
and a p_query_model that is not the corpus model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid adds rag.search_sentences and
the merge (about 1.1 ms per search on the two books, 3.1 ms at 100k rows: bench/bench_search.py,
migration 0011).
*/
DECLARE
    v_model TEXT;
    st      RECORD;
    f_rows  rag.search_hit[];  -- the fused list, best first, and each row's paragraph key
    f_keys  TEXT[];
    s_rows  rag.search_hit[];  -- the sentence branch's paragraphs, best first, and their keys
    s_keys  TEXT[];
    v_fi    INT := 1;
    v_si    INT := 1;
    v_n     INT := 0;
    v_seen  TEXT[] := '{}';    -- the keys placed so far, and those the sentence branch placed
    v_seen_s TEXT[] := '{}';
    v_take  BOOLEAN;
    r       rag.search_hit;
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
        -- Merge: the greedy interleave of evaluation/experiments/sentence_anchors/slots.py. A
        -- paragraph's key is its file and number (its chunks are one paragraph); other rows keep
        -- their id. Two chunks of one paragraph in the fused list both stay. At most k + 2k rows,
        -- so the loop and its ANY() are cheap.
        SELECT array_agg(b ORDER BY b.rank),
               array_agg(CASE WHEN b.level = 0 THEN b.source_file || '#' || b.paragraph ELSE b.id::text END ORDER BY b.rank)
        INTO f_rows, f_keys
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                 p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                 p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                 p_cite_weight => p_cite_weight) b;
        SELECT array_agg(s ORDER BY s.rank), array_agg(s.source_file || '#' || s.paragraph ORDER BY s.rank)
        INTO s_rows, s_keys
        FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s;
        f_rows := coalesce(f_rows, '{}');
        s_rows := coalesce(s_rows, '{}');
        WHILE v_n < p_k AND (v_fi <= cardinality(f_rows) OR v_si <= cardinality(s_rows)) LOOP
            v_take := (v_si <= cardinality(s_rows) AND v_n >= st.sentence_after
                       AND (v_n - st.sentence_after) % st.sentence_every = 0)
                      OR v_fi > cardinality(f_rows);
            IF v_take THEN
                WHILE v_si <= cardinality(s_rows) AND s_keys[v_si] = ANY(v_seen) LOOP
                    v_si := v_si + 1;
                END LOOP;
                CONTINUE WHEN v_si > cardinality(s_rows);
                r := s_rows[v_si];
                FOR i IN v_fi .. cardinality(f_rows) LOOP  -- the same chunk later in the fused list: its branch columns too
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
    ELSIF p_mode = 'two-stage' THEN
        RETURN QUERY SELECT * FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
            p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
            p_vector_weight => p_vector_weight);
    ELSE
        RETURN QUERY SELECT * FROM rag.search_branch(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type,
                                                     p_within);
    END IF;
END
$$;

-- function: build_context sha256:224753edcb3f15a7bc0b9815db3f786145dbcdf4e274bdd4307a4804e2f7c290
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
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Builds the context an LLM reads to answer p_query: the p_k hits of rag.search (p_mode
'hybrid' | 'two-stage' | 'bm25' | 'vector', checked there) packed by rag.pack_context: each hit
with its parent node's rows (when p_expand), whole units while they fit, never more than
p_budget tokens, in reading order (book, node_order, chunk_index), each row with its citation
(source_file, chunk_index, heading_path, level), its role ('hit' or 'parent'), the rank of the
hit that brought it, and the running token total.
It is exactly
  rag.pack_context(ARRAY(SELECT id FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book,
                   p_levels, p_node_type, p_within) ORDER BY rank), p_budget, p_expand)
with the default fusion settings; write that composition to pass rag.search's other arguments
(fusion, weights, the sentence branch's places): `bookrag search --budget`, `bookrag ask` and
`bookrag eval` do.
Parameters:
  p_query, p_query_embedding  as in rag.search (embedding NULL: BM25 only).
  p_budget   tokens, 1..1,000,000 (default 3000; checked by rag.pack_context).
  p_k        hits considered, 1..1000 (default 8; checked by rag.search).
  p_book, p_levels, p_node_type  search filters (levels and node_type: not with two-stage).
  p_expand   add each hit's parent node (default true).
  p_mode     which search ranks the hits (default 'hybrid').
  p_within   NULL or a source_file: hits only from that node's subtree (parents may lie above it).
Cost: one search plus rag.pack_context (two indexed lookups per hit); p50 6.5 ms on the two books,
10.9 ms at 100k rows (bench/bench_search.py, migration 0011).
*/
BEGIN
    -- PL/pgSQL, not SQL: a SQL body is checked when created, and rag.search is created after it.
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;

-- function: get_children sha256:24ead7baa59710b61e91e5c431895155fa6263b28b9a876eb456bf42bac3b7d6
-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
"Load the children" of p_source_file: the nodes whose parent_source_file is p_source_file,
in document order (node_order, then path). Children are taken whole, in that order, while the
running total of their sizes (sum of content_token_count over a node's rows) stays within
p_budget; the first child that does not fit, and every child after it, is left out, so what
is returned always reads as a contiguous stretch of the book.
Result (rag.context_row, the shape of every budgeted read): for each included child, its rows
in chunk order with role 'child' and used_tokens the running total of the rows returned so far;
for each child left out, one row with role 'omitted', chunk_index, content, paragraph and
used_tokens NULL, and content_token_count the whole child's size, so the caller knows exactly
what was omitted and how big it is. hit_rank is NULL. Every row carries its book; its parent
is p_source_file. Included rows carry their paragraph number in their file (the §N anchors cite).
Parameters:
  p_source_file  the parent node's file.
  p_budget       tokens, 0..1,000,000 (default 4000); 0 includes nothing and lists every child.
Edge cases: a leaf or unknown file returns no rows.
Cost: one index range scan on parent_source_file plus the children's rows.
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

-- function: search sha256:f5e842a44844cdc9f2e0e4b2e371877cfd96afa5efaf7ed9eab9811a6380c662
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
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Runs the search named by p_mode (rag._search_hits checks every argument and dispatches) and
returns its rows (rag.search_hit, best first) with cites, parent and cited filled:
  'hybrid'     rag.search_hybrid (both branches fused; the default), with places for the
               sentence branch (rag.search_sentences; see rag._search_hits)
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
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
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
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

-- function: search_branch sha256:97b25c6963af2bea7f95ad23fa742a105d38a2cbe2c4d169f43c84456134d7b9
-- rag.search_branch: one branch of the hybrid search alone: BM25 (pg_search) or kNN (pgvector HNSW).
CREATE OR REPLACE FUNCTION rag.search_branch(
    p_query           TEXT,
    p_query_embedding vector,
    p_branch          TEXT,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks of one branch, best first, rank 1..k:
  'bm25'    lexical search over p_query (pg_search BM25, French stemming): score = bm25_score =
            the BM25 score, bm25_rank = rank; p_query_embedding unused. Any term may match (|||);
            the query is tokenized like the index (French stemmer, stopwords, ASCII folding),
            never parsed. A query of only stopwords or punctuation matches nothing (no rows).
  'vector'  semantic kNN of p_query_embedding (cosine, the corpus model only): score =
            vector_score = 1 - cosine distance, vector_rank = rank; p_query unused. Rows without
            an embedding never appear; no vectors loaded -> no rows (NOTICE).
The other branch's columns, section_score, the sentence columns, cites, parent and cited are NULL.
rag.search's modes 'bm25' and 'vector' are this function (with cites); rag.search_hybrid fuses
the same two statements (rag._branch_sql).
Parameters (in rag.search's order):
  p_query            words to search ('bm25': required, <= 10,000 characters).
  p_query_embedding  the query vector from the corpus model, query role for e5 models
                     ('vector': required; its length must be the model's dimension).
  p_branch           'bm25' or 'vector'; anything else is an error naming it.
  p_k                how many chunks, 1..1000 (default 10).
  p_book             NULL = all books, else a folder under corpus/ (unknown book: error).
  p_levels           NULL = all, else e.g. '{0}' paragraphs only, '{1,2}' section and part summaries.
  p_node_type        NULL, 'source' or 'summary'.
  p_within           NULL, or a source_file: only rows of that node and of the nodes below it
                     (a chapter's summary.md: the summary and its paragraphs). A file that is not
                     loaded, or that is in another book than p_book, is an error.
Cost: one index scan with the filters pushed down — pg_search top-N for 'bm25', HNSW on the
model's partial index for 'vector' (ef_search raised to k, at least 40; iterative scan so filters
do not starve the result) — planned as a small dynamic statement; p50 1.9 ms ('bm25') and 1.4 ms
('vector') from Python on the two books (bench/bench_search.py, migration 0011).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans off,
because on small tables the planner prices the HNSW scan above a sequential scan that is several
times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW settings raised
below are restored when the function returns.
*/
DECLARE
    v_model  TEXT;
    v_dim    INT;
    v_within INT[];
BEGIN
    IF p_branch IS DISTINCT FROM 'bm25' AND p_branch IS DISTINCT FROM 'vector' THEN
        RAISE EXCEPTION 'branch must be bm25 or vector, got "%"', coalesce(p_branch, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_branch = 'bm25' THEN
        PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
        v_within := rag._subtree_ids(p_within, p_book);
    ELSE
        SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
        FROM rag._knn_args('vector search', p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within) a;
        IF v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, b.s, b.r, %s, '
        'NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        CASE p_branch WHEN 'bm25' THEN 'b.r, b.s, NULL::int, NULL::float8' ELSE 'NULL::int, NULL::float8, b.r, b.s' END,
        rag._branch_sql(p_branch, v_model, v_dim, p_book, p_levels, p_node_type, NULL, v_within))
    USING p_query, p_query_embedding, p_book, p_levels, p_node_type, NULL::text[], p_k, v_within;
END
$$;

-- function: search_hybrid sha256:800aa8b4a29813493e820ecbc5c1a5f1c0894a6341d2fbf4373dd2791083cb66
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
  p_query            words for the BM25 branch (required, as in rag.search_branch).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 counts.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files, p_within: filters, applied identically to
                     both branches (p_within: a source_file, only its subtree; see rag.search_branch).
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
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, least(top.br, top.vr), top.id))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, least(top.br, top.vr), top.id;
END
$$;

-- function: search_sentences sha256:5e879d4eaa94b022257aa866e7df60ad33fe67770981e07b041c31af869802aa
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
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns at most p_k source paragraphs (level-0 chunks): those cited by the p_k chapter-summary
sentences nearest to the query (see below), best first (rag.search_hit; fewer than p_k when those sentences
cite fewer paragraphs). Every anchored sentence of the level-1 summaries (rag.sentences,
embedded alone) is a candidate; a paragraph scores the best cosine similarity among the
sentences whose anchors cite it ([§12–14], docs/anchors.md), ties broken by the paragraph's
own similarity. A paragraph split into several chunks is represented by its chunk closest to
the query. score = sentence_score = that best sentence's similarity, rank = sentence_rank =
1..k; the branch columns (bm25_*, vector_*) and section_score are NULL.
Reworded questions (a reader's modern French against the book's 1840s French) meet the
summaries' wording, and the anchors lead back to the book's own paragraph: this is why the
branch exists (measured in evaluation/experiments/sentence_anchors/ and README).
Parameters:
  p_query_embedding  the query's vector, of the corpus model (required).
  p_k                how many paragraphs, 1..1000 (default 10).
  p_book             NULL (all books) or one book.
  p_within           NULL or a source_file: only paragraphs in that node's subtree.
No sentence loaded (a corpus without anchors, or no vectors): no rows.
The nearest sentences are approximate (HNSW), except within a subtree, where they are exact.
Cost: an HNSW scan of the sentences' partial index for the corpus model (rag._ensure_vector_index;
ef_search raised to p_k, iterative scan so a book filter does not starve it) or, with p_within,
an exact ranking of the subtree's sentences (rag.sentences_cited_idx); a small dynamic
statement planned in microseconds; then a static statement (plan cached) that looks up, for
each paragraph the p_k best sentences cite that can rank within p_k, its chunks by index. About 0.75 ms inside the
server on the two books, 1.2-1.5 ms p50 from Python (bench/bench_search.py).
*/
DECLARE
    v_model  TEXT;
    v_dim    INT;
    v_within INT[];
    c_file   TEXT[];    -- the sentences' cited paragraphs, one element each: file, number, distance
    c_par    INT[];
    c_dist   FLOAT8[];
BEGIN
    SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
    FROM rag._knn_args('search_sentences', p_query_embedding, p_k, p_book, NULL, NULL, p_within) a;
    IF v_model IS NULL THEN
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    -- The p_k nearest sentences (the paragraphs they cite are exactly the best-ranked ones,
    -- each with its best sentence). Whole corpus or a book: the HNSW index (its expression has
    -- the dimension in it, hence format). Within a subtree: the few sentences citing its files,
    -- found by rag.sentences_cited_idx and ranked exactly (an expression the HNSW index does not
    -- match), because an index scan filtered that narrowly can stop (hnsw.max_scan_tuples) before
    -- it has found p_k of them.
    EXECUTE format(
        'SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) FROM ('
        'SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, (%1$s)::float8 AS d '
        'FROM rag.sentences st WHERE st.embedding_model = %2$L%3$s%4$s '
        'ORDER BY %1$s LIMIT $2) s, unnest(s.ps) AS p(n)',
        CASE WHEN v_within IS NULL THEN format('st.embedding::vector(%1$s) <=> $1::vector(%1$s)', v_dim)
             ELSE 'st.embedding <=> $1' END,
        v_model,
        CASE WHEN p_book IS NOT NULL THEN ' AND st.book = $3' END,
        CASE WHEN v_within IS NOT NULL THEN ' AND st.cited_source_file IN '
            '(SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY($4))' END)
    INTO c_file, c_par, c_dist
    USING p_query_embedding, p_k, p_book, v_within;
    RETURN QUERY
    WITH cited AS (
        SELECT c.f, c.n, 1 - min(c.d) AS sim FROM unnest(c_file, c_par, c_dist) AS c(f, n, d) GROUP BY c.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (  -- one chunk per paragraph: the one closest to the query (an index lookup each)
        SELECT c.*, para.sim
        FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
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
           top.parent_source_file, top.content, top.content_token_count, top.book, top.node_order, top.paragraph,
           top.sim, top.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, top.r, top.sim,
           NULL::json, NULL::json, NULL::json
    FROM top
    WHERE top.r <= p_k
    ORDER BY top.r;
END
$$;

-- function: search_two_stage sha256:3a4120878d1b263f73e854c040d21b73639da7bf209c5983be278695440003d4
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
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8,
           NULL::json, NULL::json, NULL::json
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.get_children(text, int) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search(text, vector, text, int, text, int[], text, text, text, text, float8, float8, float8, float8, int, int, text[], text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_branch(text, vector, text, int, text, int[], text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_sentences(vector, int, text, text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

DELETE FROM rag.function_versions WHERE name IN ('search_bm25', 'search_vector');

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '36ef20befafe9b6d289ea55d32665c39d6588b29d751bee00f39c2e03bd62c44', '0011_one_row_type_per_shape'),
    ('_branch_sql', '6d7fcaabdd866597eb4712803ba208234b9f6d5a2cd853815e15128a7bb63329', '0011_one_row_type_per_shape'),
    ('_fusion_settings', '3c90bcca88304fcd305cf14c9ac8350afc1123a73fc05f0a31180643d7ddf72e', '0011_one_row_type_per_shape'),
    ('_knn_args', '402412f2b25323a97fa5ed72c5257df9c816082e8501a1fde8c55ef9dee5a4ad', '0011_one_row_type_per_shape'),
    ('_search_hits', 'b9bc96308a13715ac285f987f604aee43e8e2334218a14d790375b4f19fa010e', '0011_one_row_type_per_shape'),
    ('build_context', '224753edcb3f15a7bc0b9815db3f786145dbcdf4e274bdd4307a4804e2f7c290', '0011_one_row_type_per_shape'),
    ('get_children', '24ead7baa59710b61e91e5c431895155fa6263b28b9a876eb456bf42bac3b7d6', '0011_one_row_type_per_shape'),
    ('search', 'f5e842a44844cdc9f2e0e4b2e371877cfd96afa5efaf7ed9eab9811a6380c662', '0011_one_row_type_per_shape'),
    ('search_branch', '97b25c6963af2bea7f95ad23fa742a105d38a2cbe2c4d169f43c84456134d7b9', '0011_one_row_type_per_shape'),
    ('search_hybrid', '800aa8b4a29813493e820ecbc5c1a5f1c0894a6341d2fbf4373dd2791083cb66', '0011_one_row_type_per_shape'),
    ('search_sentences', '5e879d4eaa94b022257aa866e7df60ad33fe67770981e07b041c31af869802aa', '0011_one_row_type_per_shape'),
    ('search_two_stage', '3a4120878d1b263f73e854c040d21b73639da7bf209c5983be278695440003d4', '0011_one_row_type_per_shape')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
