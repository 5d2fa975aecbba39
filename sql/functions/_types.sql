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
