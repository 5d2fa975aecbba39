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
