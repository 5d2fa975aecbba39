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
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, '
        'b.s, b.r, b.r, b.s, NULL::int, NULL::float8, NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING p_query, NULL::vector, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;
