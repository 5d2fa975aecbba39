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
    p_mode            TEXT DEFAULT 'auto',
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Builds the context an LLM reads to answer p_query: the p_k hits of rag.search (p_mode
'auto' | 'hybrid' | 'two-stage' | 'bm25' | 'vector', checked there) packed by rag.pack_context: each hit
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
  p_book, p_levels, p_node_type  search filters (levels or node_type asking for summaries: 'auto'
             runs hybrid; 'two-stage' refuses them).
  p_expand   add each hit's parent node (default true).
  p_mode     which search ranks the hits (default 'auto', as rag.search: since migration 0014
             the paragraphs of the best sections, each with its chapter summary as parent).
  p_within   NULL or a source_file: hits only from that node's subtree (parents may lie above it).
Cost: one search plus rag.pack_context (two indexed lookups per hit); p50 11.1 ms on the two books,
26.1 ms at 100k rows with the default mode (bench/bench_search.py, migration 0014).
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
