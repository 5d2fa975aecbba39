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
