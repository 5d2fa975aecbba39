-- 0033_node_chunk_kind: rag.node_chunk carries kind: get_node and get_parent say which rows are the author's own summaries
-- depends: 0032_sentences_for_every_wording

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP TYPE IF EXISTS rag.node_chunk CASCADE;  -- its attributes changed; dependants re-created below
CREATE TYPE rag.node_chunk AS (id int, source_file text, chunk_index int, level int, node_type text, heading_path text, parent_source_file text, content text, content_token_count int, book text, node_order int, paragraph int, kind text);

-- function: _types sha256:8817d763655a4f4c1816a415a29ad864bd0f7dc1df8ebdd117e5a1054331a000
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
            cited               JSON,
            kind                TEXT
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
            paragraph           INT,
            kind                TEXT
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
COMMENT ON TYPE rag.search_hit IS 'One ranked chunk (every search): the node columns (paragraph: its 1-based paragraph number in its file, the §N anchors cite), score (higher is better), rank 1..k, bm25_rank/bm25_score and vector_rank/vector_score (NULL where a branch did not read it), section_score (two-stage: its section''s; hybrid: its chapter''s), sentence_rank/sentence_score (rows the sentence branch placed), cites (what a summary hit''s anchors cite, the end notes a paragraph calls, JSON), parent and cited (JSON, when rag.search expands them), kind (''author_summary'': the author''s own summary of its section; ''text'' otherwise).';
COMMENT ON TYPE rag.node_chunk IS 'One row of a node in reading order (get_node, get_parent): the node columns, kind included (author_summary: the author''s own summary of its section).';
COMMENT ON TYPE rag.context_row IS 'One row of a read within a token budget, reading order: role hit or parent (build_context, pack_context; hit_rank the hit that brought it) or child / omitted (get_children: an omitted child has no content and its size in content_token_count); used_tokens the running total.';
COMMENT ON TYPE rag.candidate IS 'One row a retrieval branch read (rag._bm25, rag._knn): id, raw score s, branch rank r, level, source_file, parent_source_file.';
COMMENT ON TYPE rag.fused IS 'One candidate after rag._fuse: branch ranks and raw scores (br, bs, vr, vs), lvl, sf, pf, fused score, floor (a row no branch read), rank in the fused list.';
COMMENT ON TYPE rag.search_settings IS 'The tuning of one search: names, defaults and bounds in rag._settings.';

-- function: get_node sha256:a286eb3eeee1dcc3195e348a5838c3d19f952ec9610c915f556641899dab815b
-- rag.get_node: all rows of one node (one corpus file), in chunk order.
CREATE OR REPLACE FUNCTION rag.get_node(
    p_source_file TEXT
) RETURNS SETOF rag.node_chunk
LANGUAGE sql STABLE
AS $$
/*
Returns the rows of p_source_file ordered by chunk_index (kind: 'text', or 'author_summary' for the
author's own summary of the section); no rows when the file is not loaded.
Parameters: p_source_file  repo-relative path, e.g. 'corpus/<book>/<part>/<section>/summary.md'.
Cost: one index range scan on (source_file, chunk_index).
*/
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, n.kind
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

GRANT EXECUTE ON FUNCTION rag.get_node(text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.get_parent(text) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '8817d763655a4f4c1816a415a29ad864bd0f7dc1df8ebdd117e5a1054331a000', '0033_node_chunk_kind'),
    ('get_node', 'a286eb3eeee1dcc3195e348a5838c3d19f952ec9610c915f556641899dab815b', '0033_node_chunk_kind'),
    ('get_parent', '81cd92c5049fc185f926d6c0f7a6afae79be416d6158f331bd69422c55ffa860', '0033_node_chunk_kind')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
