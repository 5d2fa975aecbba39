-- 0006_score_fusion_within_citations: score fusion (convex combination with min-max or z-score normalisation, or RRF), chapter-aware and citation-aware ranking, search inside a subtree (within), rag.search as the one entry point (issues 10, 11); rag.get_citations (issue 11); an empty levels array refused (issue 13)
-- depends: 0005_paragraphs_and_citations

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag._branch_sql(text, text, int, text, int[], text, text[]);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag._filter_sql(text, int[], text, text[]);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.build_context(text, vector, int, int, text, int[], text, boolean, text);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search_bm25(text, int, text, int[], text, text[]);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search_two_stage(text, vector, int, text, int, float8, int);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.search_vector(vector, int, text, int[], text, text[]);  -- arguments or result changed

-- function: _branch_sql sha256:04dcb2aa417ca85519c2688f006ba6787c9eb949ec6194f5fea647649ca96041
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
candidate pool). Placeholders: $1 query text, $2 query embedding, $3..$6 and $8
filters (see rag._filter_sql), $7 pool size.
  'bm25'   : pg_search match of any query term (|||) on content, scored by pdb.score; the
             query is tokenized by the index's tokenizer (French stemmer, folding), never
             parsed, so operators and quotes are plain characters.
  'vector' : cosine kNN on embedding::vector(p_dimension) restricted to rows of p_model, the
             expression and predicate of that model's partial HNSW index; s = 1 - distance.
             When p_model is NULL (no vectors loaded) the branch is empty.
The model name and dimension are formatted as literal/number (%L, %s); values go through USING.
*/
DECLARE
    v_filters TEXT := rag._filter_sql(p_book, p_levels, p_node_type, p_parent_files, p_within_ids);
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

-- function: _check_search_args sha256:13781b9e39ec5f65db20f25b7d53aa2add6123e484f8cd3a50ef1bd60f2282a8
-- Validate the arguments shared by every search function; raise a clear error on bad input.
CREATE OR REPLACE FUNCTION rag._check_search_args(
    p_query     TEXT,
    p_k         INT,
    p_book      TEXT DEFAULT NULL,
    p_levels    INT[] DEFAULT NULL,
    p_node_type TEXT DEFAULT NULL,
    p_query_required BOOLEAN DEFAULT true
) RETURNS VOID
LANGUAGE plpgsql STABLE
AS $$
/*
Contract: returns nothing when the arguments are usable, raises invalid_parameter_value (22023)
otherwise, with a message naming the value and the limit. The rules (documented in README):
  - p_query: required unless p_query_required is false; empty or whitespace-only is an error;
    longer than 10,000 characters is an error. Operators, quotes and punctuation are not
    errors: BM25 tokenizes the string, it never parses a query language.
  - p_k: between 1 and 1000.
  - p_book: NULL (all books) or a book present in rag.books.
  - p_levels: NULL or a non-empty array of values within 0..3.
  - p_node_type: NULL, 'source' or 'summary'.
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
    IF p_node_type IS NOT NULL AND p_node_type NOT IN ('source', 'summary') THEN
        RAISE EXCEPTION 'node_type must be ''source'' or ''summary'', got "%"', p_node_type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _filter_sql sha256:2116f6ed2781cc2eed848f6fa4888c54ec77bb07337161439c115c15c1c1a123
-- The WHERE fragment for the shared filters, identical for the BM25 and the kNN branch.
CREATE OR REPLACE FUNCTION rag._filter_sql(
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[],
    p_within_ids   INT[]
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns ' AND ...' conditions on alias n, referencing the values only through the
placeholders every search statement binds in the same order:
  $3 book, $4 levels, $5 node_type, $6 parent files, $8 the ids of the `within` subtree
(rag._subtree_ids; $7 is the pool size).
Only the filters that are set appear, so pg_search can push each one into its index scan
and the kNN branch filters the same rows. Cost: string concatenation only.
*/
    SELECT concat(
        CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $3' END,
        CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($4)' END,
        CASE WHEN p_node_type IS NOT NULL THEN ' AND n.node_type = $5' END,
        CASE WHEN p_parent_files IS NOT NULL THEN ' AND n.parent_source_file = ANY($6)' END,
        CASE WHEN p_within_ids IS NOT NULL THEN ' AND n.id = ANY($8)' END
    );
$$;

-- function: _fusion_settings sha256:6c52e9d6451235d884d979bfc0c01cfa24327c089d7ac499730192dba0274470
-- The fusion settings of a hybrid search: the defaults and the bounds, defined here only.
CREATE OR REPLACE FUNCTION rag._fusion_settings(
    p_fusion         TEXT,
    p_normalisation  TEXT,
    p_bm25_weight    FLOAT8,
    p_vector_weight  FLOAT8,
    p_chapter_weight FLOAT8,
    p_cite_weight    FLOAT8 DEFAULT NULL,
    OUT fusion         TEXT,
    OUT normalisation  TEXT,
    OUT bm25_weight    FLOAT8,
    OUT vector_weight  FLOAT8,
    OUT chapter_weight FLOAT8,
    OUT cite_weight    FLOAT8
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
END
$$;

-- function: _subtree_ids sha256:da90aa34b095ca8f41ab1e7b3fcdfa27cf24461d62aebbfefd78dea18588624d
-- The row ids of a node's subtree (the node and every descendant), for the `within` filter.
CREATE OR REPLACE FUNCTION rag._subtree_ids(
    p_within TEXT,
    p_book   TEXT DEFAULT NULL
) RETURNS INT[]
LANGUAGE plpgsql STABLE
AS $$
/*
Returns NULL when p_within is NULL (no restriction); else the ids of every row of the node
p_within (a source_file) and of all the nodes below it, following parent_source_file down
(a chapter's summary.md: the summary and its source.md paragraphs; a part: its chapters; a
book's root: the whole book). Raises invalid_parameter_value when p_within names no loaded
node, or when p_book is given and the node belongs to another book.
Cost: one index lookup per level of the tree (hcn_parent_idx), then one per node of the
subtree; a chapter is a few rows, a whole book a few thousand ids.
*/
DECLARE
    v_book TEXT;
    v_ids  INT[];
BEGIN
    IF p_within IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT n.book INTO v_book FROM rag.hierarchical_content_nodes n WHERE n.source_file = p_within LIMIT 1;
    IF v_book IS NULL THEN
        RAISE EXCEPTION 'within "%" names no loaded node; use a source_file from a search hit or rag.outline', p_within
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_book IS NOT NULL AND p_book <> v_book THEN
        RAISE EXCEPTION 'within "%" is in book "%", not in book "%"', p_within, v_book, p_book
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH RECURSIVE t(f) AS (
        SELECT p_within
        UNION
        SELECT c.source_file FROM rag.hierarchical_content_nodes c JOIN t ON c.parent_source_file = t.f
    )
    SELECT array_agg(n.id ORDER BY n.id) INTO v_ids
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file IN (SELECT f FROM t);
    RETURN v_ids;
END
$$;

-- function: build_context sha256:2938f453bc65fc5f81225f0bca164a59401b9ec0a6836c4ff59e7113d153b510
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
    p_cite_weight     FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Builds the context an LLM reads to answer p_query. Takes the p_k hits of rag.search (p_mode
'hybrid' | 'two-stage' | 'bm25' | 'vector', checked there) in rank order; for each hit, the unit to add
is its parent node's rows (when p_expand and the hit is not a root) plus the hit itself, minus
rows already taken. A unit is added whole when it fits in what remains of p_budget; otherwise
the hit alone is added if it fits; otherwise the hit is skipped and the next one tried.
The total never exceeds p_budget (sum of content_token_count). Rows come out in reading
order (book, document node_order, chunk_index), each with its citation (source_file,
chunk_index, heading_path, level), its role ('hit' or 'parent'), the rank of the hit that
brought it, and the running token total.
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding NULL: BM25 only).
  p_budget   tokens, 1..1,000,000 (default 3000).
  p_k        hits considered, 1..100 (default 8).
  p_book, p_levels, p_node_type  search filters (levels and node_type: not with two-stage).
  p_expand   add each hit's parent node (default true).
  p_mode     which search ranks the hits (default 'hybrid').
  p_within   NULL or a source_file: hits only from that node's subtree (parents may lie above it).
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight: passed to
             rag.search (NULL = rag._fusion_settings()).
Cost: one search plus one indexed lookup per hit; p50 2.8 ms on the two books, 9.4 ms at 100k rows.
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
    IF p_k IS NULL OR p_k < 1 OR p_k > 100 THEN
        RAISE EXCEPTION 'k must be between 1 and 100 for a context, got %', coalesce(p_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_hit IN
        SELECT h.id, h.source_file, h.parent_source_file, h.content_token_count, h.rank
        FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within,
                        p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight) h
        ORDER BY h.rank
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
           n.content_token_count, n.book, n.node_order, u.role, u.hit_rank,
           (sum(coalesce(n.content_token_count, 0)) OVER (ORDER BY n.book, n.node_order, n.source_file, n.chunk_index))::int
    FROM unnest(v_ids, v_roles, v_ranks) AS u(id, role, hit_rank)
    JOIN rag.hierarchical_content_nodes n ON n.id = u.id
    ORDER BY n.book, n.node_order, n.source_file, n.chunk_index;
END
$$;

-- function: get_citations sha256:447bf4f3ab68311c57cc16ffa68922fa86777ed5bd54d85569b2b0fe4bae4ab7
-- rag.get_citations: what a summary cites (its anchors): the book's own paragraphs behind it.
CREATE OR REPLACE FUNCTION rag.get_citations(
    p_source_file TEXT,
    p_chunk_index INT DEFAULT NULL
) RETURNS TABLE (
    citing_chunk_index  INT,
    id                  INT,
    source_file         TEXT,
    chunk_index         INT,
    paragraph           INT,
    level               INT,
    node_type           TEXT,
    heading_path        TEXT,
    parent_source_file  TEXT,
    content             TEXT,
    content_token_count INT,
    book                TEXT,
    node_order          INT
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the rows cited by the anchors ([§12–14], docs/anchors.md) of one summary chunk, or of
every chunk of the summary when p_chunk_index is NULL: for a chapter summary, the chunks of the
cited paragraphs of its source.md (every chunk of a paragraph split in several); for a part or
book summary, every row of each cited child summary. Ordered by citing chunk, then reading
order; a row cited twice by one chunk appears once. citing_chunk_index says which chunk of
p_source_file cites the row.
Parameters:
  p_source_file  the summary (a citation's source_file). Required; unknown -> error.
  p_chunk_index  one chunk of it, 0..chunk_count-1, or NULL for all (default).
Edge cases: a source.md (level 0) or a summary without anchors cites nothing -> no rows.
Cost: index lookups on rag.citations and (source_file, paragraph); < 1 ms for a chapter.
*/
DECLARE
    v_chunks INT;
BEGIN
    SELECT count(*) INTO v_chunks FROM rag.hierarchical_content_nodes n WHERE n.source_file = p_source_file;
    IF v_chunks = 0 THEN
        RAISE EXCEPTION 'no node "%"; use a source_file from a search hit or the outline', p_source_file
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_chunk_index IS NOT NULL AND (p_chunk_index < 0 OR p_chunk_index >= v_chunks) THEN
        RAISE EXCEPTION 'chunk_index must be between 0 and % for %, got %', v_chunks - 1, p_source_file, p_chunk_index
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT DISTINCT ON (c.chunk_index, n.node_order, n.chunk_index)
           c.chunk_index, n.id, n.source_file, n.chunk_index, n.paragraph, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order
    FROM rag.citations c
    JOIN rag.hierarchical_content_nodes n
      ON n.source_file = c.cited_source_file AND (c.cited_paragraph IS NULL OR n.paragraph = c.cited_paragraph)
    WHERE c.source_file = p_source_file AND (p_chunk_index IS NULL OR c.chunk_index = p_chunk_index)
    ORDER BY c.chunk_index, n.node_order, n.chunk_index;
END
$$;

-- function: search sha256:cf9de8439a0132e56ecde0a4abb7d77f8f84506bd502adc4aa0032032a9c742e
-- rag.search: one entry point for every search mode (the mode list is defined and checked here).
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
    p_cite_weight     FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Runs the search named by p_mode and returns its rows unchanged (rag.search_hit, best first):
  'hybrid'     rag.search_hybrid (both branches fused; the default)
  'bm25'       rag.search_bm25
  'vector'     rag.search_vector (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_chapter_weight and p_cite_weight by 'hybrid'.
Cost: the called function's (one extra PL/pgSQL call).
*/
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels or node_type filter'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'hybrid' THEN
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
            p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
            p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
            p_cite_weight => p_cite_weight);
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

-- function: search_bm25 sha256:ff96f343ebc3fa0c01c1fcac44af3ccfb18165e5b00b462d4158ccbaf731912b
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
        'b.s, b.r, b.r, b.s, NULL::int, NULL::float8, NULL::float8 '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING p_query, NULL::vector, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;

-- function: search_hybrid sha256:618b893039e8d8ddecfea268bab0fc97ff1246b3774e4029d67c49720744709f
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
    c_collect CONSTANT TEXT := 'SELECT array_agg(c.id ORDER BY c.r), array_agg(c.x ORDER BY c.r), '
        'array_agg(c.s ORDER BY c.r), array_agg(c.lvl ORDER BY c.r), array_agg(c.nt ORDER BY c.r), '
        'array_agg(c.sf ORDER BY c.r), array_agg(c.pf ORDER BY c.r), least(min(c.x), 0) FROM ('
        'SELECT c0.*, CASE WHEN $9 = ''rrf'' THEN 1.0::float8 / ($10 + c0.r) '
        'WHEN $11 = ''minmax'' THEN coalesce((c0.s - min(c0.s) OVER ()) / nullif(max(c0.s) OVER () - min(c0.s) OVER (), 0), 1) '
        'ELSE coalesce((c0.s - avg(c0.s) OVER ()) / nullif(stddev_pop(c0.s) OVER (), 0), 1) END AS x '
        'FROM (%s) c0) c';
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
    EXECUTE format(c_collect, rag._branch_sql('bm25', NULL, NULL, p_book, v_levels, v_node_type, p_parent_files, v_within))
    INTO b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf, b_floor
    USING p_query, NULL::vector, p_book, v_levels, v_node_type, p_parent_files, v_pool, v_within,
          st.fusion, p_rrf_k, st.normalisation;
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        IF v_model IS NOT NULL THEN
            PERFORM rag._set_hnsw(v_pool);
            EXECUTE format(c_collect, rag._branch_sql('vector', v_model, v_dim, p_book, v_levels, v_node_type,
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
           top.br, top.bs, top.vr, top.vs, top.cs
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, least(top.br, top.vr), top.id;
END
$$;

-- function: search_two_stage sha256:424e2d77e27fbb59803cb5e23880a5f16402aa75ba9d17faead6c813f6349009
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
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

-- function: search_vector sha256:e046a95db8ba7b91396f045ef3b9221a3144d7d937c671e0ddcd4c71185c3e8e
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
    IF p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; search_vector needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(NULL, p_k, p_book, p_levels, p_node_type, false);
    v_within := rag._subtree_ids(p_within, p_book);
    SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
    IF v_model IS NULL THEN
        RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'v.s, v.r, NULL::int, NULL::float8, v.r, v.s, NULL::float8 '
        'FROM (%s) v JOIN rag.hierarchical_content_nodes n ON n.id = v.id ORDER BY v.r',
        rag._branch_sql('vector', v_model, v_dim, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING NULL::text, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], text, boolean, text, text, text, text, float8, float8, float8, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_bm25(text, int, text, int[], text, text[], text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_hybrid(text, vector, int, text, int[], text, text[], int, int, float8, float8, text, text, float8, text, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_two_stage(text, vector, int, text, int, float8, int, text, text, text, float8, float8) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_vector(vector, int, text, int[], text, text[], text) TO bookrag_reader;

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_branch_sql', '04dcb2aa417ca85519c2688f006ba6787c9eb949ec6194f5fea647649ca96041', '0006_score_fusion_within_citations'),
    ('_check_search_args', '13781b9e39ec5f65db20f25b7d53aa2add6123e484f8cd3a50ef1bd60f2282a8', '0006_score_fusion_within_citations'),
    ('_filter_sql', '2116f6ed2781cc2eed848f6fa4888c54ec77bb07337161439c115c15c1c1a123', '0006_score_fusion_within_citations'),
    ('_fusion_settings', '6c52e9d6451235d884d979bfc0c01cfa24327c089d7ac499730192dba0274470', '0006_score_fusion_within_citations'),
    ('_subtree_ids', 'da90aa34b095ca8f41ab1e7b3fcdfa27cf24461d62aebbfefd78dea18588624d', '0006_score_fusion_within_citations'),
    ('build_context', '2938f453bc65fc5f81225f0bca164a59401b9ec0a6836c4ff59e7113d153b510', '0006_score_fusion_within_citations'),
    ('get_citations', '447bf4f3ab68311c57cc16ffa68922fa86777ed5bd54d85569b2b0fe4bae4ab7', '0006_score_fusion_within_citations'),
    ('search', 'cf9de8439a0132e56ecde0a4abb7d77f8f84506bd502adc4aa0032032a9c742e', '0006_score_fusion_within_citations'),
    ('search_bm25', 'ff96f343ebc3fa0c01c1fcac44af3ccfb18165e5b00b462d4158ccbaf731912b', '0006_score_fusion_within_citations'),
    ('search_hybrid', '618b893039e8d8ddecfea268bab0fc97ff1246b3774e4029d67c49720744709f', '0006_score_fusion_within_citations'),
    ('search_two_stage', '424e2d77e27fbb59803cb5e23880a5f16402aa75ba9d17faead6c813f6349009', '0006_score_fusion_within_citations'),
    ('search_vector', 'e046a95db8ba7b91396f045ef3b9221a3144d7d937c671e0ddcd4c71185c3e8e', '0006_score_fusion_within_citations')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
