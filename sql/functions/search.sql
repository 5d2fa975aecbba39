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
Cost: the mode's scans and rag._dress's lookups. A SQL function: inlined into the caller's statement.
*/
    SELECT d.*
    FROM (SELECT array_agg(h.hit ORDER BY (h.hit).rank) AS hits
          FROM rag._search_hits(ARRAY[p_query], ARRAY[p_query_embedding], p_mode, p_k, p_book, p_levels, p_within,
                                p_expand, p_query_model, p_tuning) h) x
    CROSS JOIN LATERAL rag._dress(x.hits, p_expand) d;
$$;
