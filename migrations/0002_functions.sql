-- 0002_functions: install the retrieval functions (sql/functions/ at version 1)
-- depends: 0001_schema

-- function: _types sha256:6af9878b589b817ce2de04ceb631169afab94d057f2bc0fa5885b369391cb882
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
--   section_score               two-stage only: the score of the section the chunk sits in.
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
            section_score       FLOAT8
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

-- function: _branch_sql sha256:561a51963f2c5634926eca111576162f93088cc542fe14d5420bd536cf213a69
-- SQL text of one retrieval branch (BM25 or kNN), shared by search_bm25, search_vector and search_hybrid.
CREATE OR REPLACE FUNCTION rag._branch_sql(
    p_branch       TEXT,
    p_model        TEXT,
    p_dimension    INT,
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[]
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns a SELECT yielding (id, s, r): row id, branch score, 1-based branch rank, for at most
$7 rows (the candidate pool). Placeholders: $1 query text, $2 query embedding, $3..$6 filters
(see rag._filter_sql), $7 pool size.
  'bm25'   : pg_search match of any query term (|||) on content, scored by pdb.score; the
             query is tokenized by the index's tokenizer (French stemmer, folding), never
             parsed, so operators and quotes are plain characters.
  'vector' : cosine kNN on embedding::vector(p_dimension) restricted to rows of p_model, the
             expression and predicate of that model's partial HNSW index; s = 1 - distance.
             When p_model is NULL (no vectors loaded) the branch is empty.
The model name and dimension are formatted as literal/number (%L, %s); values go through USING.
*/
DECLARE
    v_filters TEXT := rag._filter_sql(p_book, p_levels, p_node_type, p_parent_files);
BEGIN
    IF p_branch = 'bm25' THEN
        RETURN format(
            'SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r FROM ('
            'SELECT n.id, pdb.score(n.id)::float8 AS s FROM rag.hierarchical_content_nodes n '
            'WHERE n.content ||| $1%s ORDER BY pdb.score(n.id) DESC LIMIT $7) x', v_filters);
    ELSIF p_branch = 'vector' THEN
        IF p_model IS NULL THEN
            RETURN 'SELECT NULL::int AS id, NULL::float8 AS s, NULL::int AS r WHERE false';
        END IF;
        RETURN format(
            'SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d '
            'FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL%3$s '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $7) y',
            p_dimension, p_model, v_filters);
    END IF;
    RAISE EXCEPTION 'unknown branch "%"', p_branch USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- function: _check_search_args sha256:e5c3a8e553e81a3061d1e5a110a109187ece8797b0d53e4c4d341a9b589168eb
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
  - p_levels: NULL or values within 0..3.
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

-- function: _corpus_model sha256:bb53ae93ac1e216b9b3882159948aefe47ce70a68f23c434d258dd94e7404f22
-- The corpus embedding model and its dimension, checked against a query embedding.
CREATE OR REPLACE FUNCTION rag._corpus_model(
    p_query_embedding vector,
    OUT model TEXT,
    OUT dimension INT
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the single model registered in rag.embedding_models (model NULL when no vector was
ever loaded: the kNN branch is then empty). Raises invalid_parameter_value when
p_query_embedding's length differs from the model's dimension, or when several models are
registered (the loader keeps one; two models' vectors are never compared).
*/
DECLARE
    v_count INT;
BEGIN
    SELECT count(*) INTO v_count FROM rag.embedding_models;
    IF v_count > 1 THEN
        RAISE EXCEPTION 'several embedding models are registered (%); reload the corpus with one model',
            (SELECT string_agg(m.model, ', ') FROM rag.embedding_models m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.model, m.dimension INTO model, dimension FROM rag.embedding_models m;
    IF model IS NOT NULL AND p_query_embedding IS NOT NULL AND vector_dims(p_query_embedding) <> dimension THEN
        RAISE EXCEPTION 'query embedding has % dimensions; the corpus model "%" has %',
            vector_dims(p_query_embedding), model, dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _ensure_vector_index sha256:2fbad8e721a0f3762c2b4867b26e72a20bcf03216188c2586387b4c0e40a18cf
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
whatever the model's dimension. Returns the index name. A model already registered with
another dimension is an error. Cost: index creation is O(rows of the model) (100k 384-d rows in 140 s with the default
64MB maintenance_work_mem); instant when it exists.
*/
DECLARE
    v_dim   INT;
    v_index TEXT := 'hcn_hnsw_' || substr(md5(p_model), 1, 12);
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
    RETURN v_index;
END
$$;

-- function: _filter_sql sha256:2bf64bd28360f1cd264ffbd7fffd03fe21ccab3320d9c5966d6d01db707f5be8
-- The WHERE fragment for the shared filters, identical for the BM25 and the kNN branch.
CREATE OR REPLACE FUNCTION rag._filter_sql(
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[]
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns ' AND ...' conditions on alias n, referencing the values only through the
placeholders every search statement binds in the same order:
  $3 book, $4 levels, $5 node_type, $6 parent files.
Only the filters that are set appear, so pg_search can push each one into its index scan
and the kNN branch filters the same rows. Cost: string concatenation only.
*/
    SELECT concat(
        CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $3' END,
        CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($4)' END,
        CASE WHEN p_node_type IS NOT NULL THEN ' AND n.node_type = $5' END,
        CASE WHEN p_parent_files IS NOT NULL THEN ' AND n.parent_source_file = ANY($6)' END
    );
$$;

-- function: build_context sha256:6f8e1dbecd5efb55906fe2a31220e7f0fc91e5e1b657b4d5320b44eb2169450a
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
    p_mode            TEXT DEFAULT 'hybrid'
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Builds the context an LLM reads to answer p_query. Takes the p_k hits of the chosen search
(p_mode 'hybrid' | 'two-stage' | 'bm25' | 'vector') in rank order; for each hit, the unit to add
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
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels or node_type filter'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_hit IN
        SELECT h.id, h.source_file, h.parent_source_file, h.content_token_count, h.rank
        FROM (
            SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type)
            WHERE p_mode = 'hybrid'
            UNION ALL
            SELECT * FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book)
            WHERE p_mode = 'two-stage'
            UNION ALL
            SELECT * FROM rag.search_bm25(p_query, p_k, p_book, p_levels, p_node_type)
            WHERE p_mode = 'bm25'
            UNION ALL
            SELECT * FROM rag.search_vector(p_query_embedding, p_k, p_book, p_levels, p_node_type)
            WHERE p_mode = 'vector'
        ) h
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

-- function: get_children sha256:ddc5c43d1db0fb3a42be08956d4db4a200686b288d26960f74126fba7b740d92
-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS TABLE (
    source_file         TEXT,
    chunk_index         INT,
    level               INT,
    node_type           TEXT,
    heading_path        TEXT,
    content             TEXT,
    content_token_count INT,
    node_tokens         INT,
    included            BOOLEAN,
    book                TEXT,
    parent_source_file  TEXT
)
LANGUAGE plpgsql STABLE
AS $$
/*
"Load the children" of p_source_file: the nodes whose parent_source_file is p_source_file,
in document order (node_order, then path). Children are taken whole, in that order, while the
running total of their sizes (sum of content_token_count over a node's rows) stays within
p_budget; the first child that does not fit, and every child after it, is left out, so what
is returned always reads as a contiguous stretch of the book.
Result: for each included child, its rows (included = true, chunk order); for each child
left out, one row with included = false, chunk_index and content NULL, its heading_path and
node_tokens,
so the caller knows exactly what was omitted and how big it is. Every row also carries its book
and its parent (p_source_file), so it can be cited as it is.
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
    SELECT u.source_file, u.chunk_index, u.level, u.node_type, u.heading_path, u.content,
           u.content_token_count, u.node_tokens, u.included, u.book, p_source_file
    FROM (
        SELECT m.pos, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
               n.content_token_count, m.tokens AS node_tokens, true AS included, n.book
        FROM marked m JOIN rag.hierarchical_content_nodes n ON n.source_file = m.f
        WHERE m.fits
        UNION ALL
        SELECT m.pos, m.f, NULL::int, m.lvl, m.nt, m.hp, NULL::text, NULL::int, m.tokens, false, m.bk
        FROM marked m
        WHERE NOT m.fits
    ) u
    ORDER BY u.pos, u.source_file, u.chunk_index;
END
$$;

-- function: get_node sha256:8de57d82302495bc7d896c0e314e32f514b7d4493a02a6ae3925e5dd00ccd30f
-- rag.get_node: all rows of one node (one corpus file), in chunk order.
CREATE OR REPLACE FUNCTION rag.get_node(
    p_source_file TEXT
) RETURNS SETOF rag.node_chunk
LANGUAGE sql STABLE
AS $$
/*
Returns the rows of p_source_file ordered by chunk_index; no rows when the file is not loaded.
Parameters: p_source_file  repo-relative path, e.g. 'corpus/<book>/<part>/<section>/summary.md'.
Cost: one index range scan on (source_file, chunk_index).
*/
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file = p_source_file
    ORDER BY n.chunk_index;
$$;

-- function: get_parent sha256:81cd92c5049fc185f926d6c0f7a6afae79be416d6158f331bd69422c55ffa860
-- rag.get_parent: parent expansion: all rows of a node's parent, in chunk order.
CREATE OR REPLACE FUNCTION rag.get_parent(
    p_source_file TEXT
) RETURNS SETOF rag.node_chunk
LANGUAGE sql STABLE
AS $$
/*
Given a hit's source_file (any of its rows), returns every row of the parent node
(the rows whose source_file is the hit's parent_source_file) ordered by chunk_index:
for a paragraph, its section summary; for a section summary, its part's; and so on.
Returns nothing for a root (parent_source_file NULL) or an unknown file.
Cost: two index lookups; < 0.2 ms.
*/
    SELECT p.*
    FROM (SELECT n.parent_source_file FROM rag.hierarchical_content_nodes n
          WHERE n.source_file = p_source_file LIMIT 1) h
    CROSS JOIN LATERAL rag.get_node(h.parent_source_file) p;
$$;

-- function: list_books sha256:3c1244b9fae9a93831f2bdf044a94f7c1b0b9052eaf79e329a5533da0c9e5174
-- rag.list_books: the books loaded, with their size.
CREATE OR REPLACE FUNCTION rag.list_books()
RETURNS TABLE (
    book             TEXT,
    title            TEXT,
    author           TEXT,
    year             INT,
    embedding_policy TEXT,
    nodes            INT,
    chunks           INT,
    tokens           BIGINT,
    embedded_chunks  INT,
    levels           INT[]
)
LANGUAGE sql STABLE
AS $$
/*
Returns one row per book in rag.books: metadata from its manifest and counts over its rows
(nodes = files, chunks = rows, tokens = sum of content_token_count, embedded_chunks = rows
with a vector, levels present). Cost: one pass over the table grouped by book.
*/
    SELECT b.book, b.title, b.author, b.year, b.embedding_policy,
           count(DISTINCT n.source_file)::int, count(n.id)::int,
           coalesce(sum(n.content_token_count), 0)::bigint,
           count(n.embedding)::int,
           coalesce(array_agg(DISTINCT n.level ORDER BY n.level) FILTER (WHERE n.level IS NOT NULL), '{}')
    FROM rag.books b
    LEFT JOIN rag.hierarchical_content_nodes n ON n.book = b.book
    GROUP BY b.book, b.title, b.author, b.year, b.embedding_policy
    ORDER BY b.book;
$$;

-- function: outline sha256:752509a745c200670141a4c624018ad98bd71e607c3a4f0134cfdc1341d935ec
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
    PERFORM rag._check_search_args(NULL, 1, p_book, NULL, NULL, false);
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

-- function: search_bm25 sha256:027985df1d06e5b8fb5724f65a9f011f981b3c3c6b4a50ccc0ca4c79bb8b7869
-- rag.search_bm25: lexical search (pg_search BM25, French stemming) over the corpus chunks.
CREATE OR REPLACE FUNCTION rag.search_bm25(
    p_query        TEXT,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL
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
Edge cases: a query of only stopwords or punctuation matches nothing (no rows, no error).
Cost: one pg_search top-N index scan with the filters pushed down; p50 1.2 ms on the two books
(parallel query is off: worker start-up costs more than the scan at this size).
*/
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'b.s, b.r, b.r, b.s, NULL::int, NULL::float8, NULL::float8 '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files))
    USING p_query, NULL::vector, p_book, p_levels, p_node_type, p_parent_files, p_k;
END
$$;

-- function: search_hybrid sha256:52da5b227f754b0b7fdb8ef400f047d55928f56fb10716521d4499815b5e98a2
-- rag.search_hybrid: BM25 + kNN fused by Reciprocal Rank Fusion, in one statement.
CREATE OR REPLACE FUNCTION rag.search_hybrid(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_parent_files    TEXT[] DEFAULT NULL,
    p_pool            INT DEFAULT 100,
    p_rrf_k           INT DEFAULT 60,
    p_bm25_weight     FLOAT8 DEFAULT 1.0,
    p_vector_weight   FLOAT8 DEFAULT 1.0
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks by RRF: score = bm25_weight / (rrf_k + bm25_rank)
+ vector_weight / (rrf_k + vector_rank), a missing branch adding 0; ties broken by the best
branch rank, then id. Each row also carries its branch ranks and scores (NULL where the chunk
was not in that branch's pool).
Parameters:
  p_query            words for the BM25 branch (required, as in rag.search_bm25).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 ranks count.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files: filters, applied identically to both branches.
  p_pool             candidates taken from each branch, p_k..1000 (default 100).
  p_rrf_k            the RRF constant (default 60), >= 1.
  p_bm25_weight, p_vector_weight  per-branch weights >= 0 (default 1, 1).
Rows without an embedding compete on BM25 alone.
Cost: one statement: a pg_search top-N scan and an HNSW scan of p_pool rows each, a hash
join of at most 2 x p_pool ids; p50 2.6 ms on the two books (4,317 rows), 9.3 ms at 100k rows
(bench/bench_search.py).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    v_model TEXT;
    v_dim   INT;
    v_pool  INT;
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    IF p_rrf_k IS NULL OR p_rrf_k < 1 THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', coalesce(p_rrf_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_bm25_weight, -1) < 0 OR coalesce(p_vector_weight, -1) < 0 THEN
        RAISE EXCEPTION 'branch weights must be >= 0, got bm25 % and vector %', p_bm25_weight, p_vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_pool := greatest(p_pool, p_k);
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        PERFORM set_config('hnsw.ef_search', greatest(40, v_pool)::text, true);
        PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH b AS (%s), v AS (%s), f AS ('
        '  SELECT coalesce(b.id, v.id) AS id,'
        '         coalesce($8 / ($10 + b.r), 0) + coalesce($9 / ($10 + v.r), 0) AS score,'
        '         b.r AS br, b.s AS bs, v.r AS vr, v.s AS vs'
        '  FROM b FULL JOIN v ON b.id = v.id) '
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'f.score, (row_number() OVER (ORDER BY f.score DESC, least(f.br, f.vr), f.id))::int, '
        'f.br, f.bs, f.vr, f.vs, NULL::float8 '
        'FROM f JOIN rag.hierarchical_content_nodes n ON n.id = f.id '
        'ORDER BY f.score DESC, least(f.br, f.vr), f.id LIMIT $11',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files),
        rag._branch_sql('vector', CASE WHEN p_query_embedding IS NULL THEN NULL ELSE v_model END,
                        v_dim, p_book, p_levels, p_node_type, p_parent_files))
    USING p_query, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, v_pool,
          p_bm25_weight, p_vector_weight, p_rrf_k::float8, p_k;
END
$$;

-- function: search_two_stage sha256:88f62a8cee048de74def7573fee09d27e80af81ccc14a1d5e28750e589eb77e5
-- rag.search_two_stage: find the best sections by their summaries, then the best paragraphs inside them.
CREATE OR REPLACE FUNCTION rag.search_two_stage(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_sections        INT DEFAULT 5,
    p_section_weight  FLOAT8 DEFAULT 0.3,
    p_pool            INT DEFAULT 100
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2):
  1. rag.search_hybrid over level-1 summaries (chapters and front matter); each section gets
     the best RRF score of its summary chunks; the p_sections best are kept, their scores
     divided by the best one (section_score in 0..1].
  2. rag.search_hybrid over the level-0 paragraphs whose parent is one of those sections;
     paragraph scores divided by the best one.
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
        SELECT t.source_file, t.best, t.best / max(t.best) OVER () AS norm
        FROM (
            SELECT h.source_file, max(h.score) AS best
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, p_sections * 10),
                                   p_book => p_book, p_levels => ARRAY[1], p_pool => p_pool) h
            GROUP BY h.source_file
            ORDER BY best DESC, h.source_file
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section summary matches; falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool);
        RETURN;
    END IF;

    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, h.score / max(h.score) OVER () AS norm
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool) h
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

-- function: search_vector sha256:8bc27a8f0c06eab892ea376cd63a8d33d0edb7946247b8f07ff71bfde505a3c5
-- rag.search_vector: semantic kNN search (pgvector HNSW, cosine) with the corpus model.
CREATE OR REPLACE FUNCTION rag.search_vector(
    p_query_embedding vector,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL
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
  p_k, p_book, p_levels, p_node_type, p_parent_files: as in rag.search_bm25.
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
BEGIN
    IF p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; search_vector needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(NULL, p_k, p_book, p_levels, p_node_type, false);
    SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
    IF v_model IS NULL THEN
        RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
        RETURN;
    END IF;
    PERFORM set_config('hnsw.ef_search', greatest(40, least(p_k, 1000))::text, true);
    PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'v.s, v.r, NULL::int, NULL::float8, v.r, v.s, NULL::float8 '
        'FROM (%s) v JOIN rag.hierarchical_content_nodes n ON n.id = v.id ORDER BY v.r',
        rag._branch_sql('vector', v_model, v_dim, p_book, p_levels, p_node_type, p_parent_files))
    USING NULL::text, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, p_k;
END
$$;

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '6af9878b589b817ce2de04ceb631169afab94d057f2bc0fa5885b369391cb882', '0002_functions'),
    ('_branch_sql', '561a51963f2c5634926eca111576162f93088cc542fe14d5420bd536cf213a69', '0002_functions'),
    ('_check_search_args', 'e5c3a8e553e81a3061d1e5a110a109187ece8797b0d53e4c4d341a9b589168eb', '0002_functions'),
    ('_corpus_model', 'bb53ae93ac1e216b9b3882159948aefe47ce70a68f23c434d258dd94e7404f22', '0002_functions'),
    ('_ensure_vector_index', '2fbad8e721a0f3762c2b4867b26e72a20bcf03216188c2586387b4c0e40a18cf', '0002_functions'),
    ('_filter_sql', '2bf64bd28360f1cd264ffbd7fffd03fe21ccab3320d9c5966d6d01db707f5be8', '0002_functions'),
    ('build_context', '6f8e1dbecd5efb55906fe2a31220e7f0fc91e5e1b657b4d5320b44eb2169450a', '0002_functions'),
    ('get_children', 'ddc5c43d1db0fb3a42be08956d4db4a200686b288d26960f74126fba7b740d92', '0002_functions'),
    ('get_node', '8de57d82302495bc7d896c0e314e32f514b7d4493a02a6ae3925e5dd00ccd30f', '0002_functions'),
    ('get_parent', '81cd92c5049fc185f926d6c0f7a6afae79be416d6158f331bd69422c55ffa860', '0002_functions'),
    ('list_books', '3c1244b9fae9a93831f2bdf044a94f7c1b0b9052eaf79e329a5533da0c9e5174', '0002_functions'),
    ('outline', '752509a745c200670141a4c624018ad98bd71e607c3a4f0134cfdc1341d935ec', '0002_functions'),
    ('search_bm25', '027985df1d06e5b8fb5724f65a9f011f981b3c3c6b4a50ccc0ca4c79bb8b7869', '0002_functions'),
    ('search_hybrid', '52da5b227f754b0b7fdb8ef400f047d55928f56fb10716521d4499815b5e98a2', '0002_functions'),
    ('search_two_stage', '88f62a8cee048de74def7573fee09d27e80af81ccc14a1d5e28750e589eb77e5', '0002_functions'),
    ('search_vector', '8bc27a8f0c06eab892ea376cd63a8d33d0edb7946247b8f07ff71bfde505a3c5', '0002_functions')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
