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
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL
) RETURNS SETOF rag.search_result
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Runs the search named by p_mode and returns its rows (rag.search_result, best first: the
called function's rag.search_hit columns, then cites, parent, cited):
  'hybrid'     rag.search_hybrid (both branches fused; the default)
  'bm25'       rag.search_bm25
  'vector'     rag.search_vector (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_chapter_weight and p_cite_weight by 'hybrid'.
  p_expand       what to attach to each hit, any of:
                   'parent'  the hit's parent node rows (rag.get_node of parent_source_file), as JSON;
                   'cited'   the rows a summary hit's anchors cite (rag.get_citations), as JSON.
                 NULL or '{}' = nothing; any other word is an error naming it. cites (what a
                 summary hit's anchors cite, compactly) is always filled.
  p_query_model  the model p_query_embedding was made with; when given and not the corpus model
                 the call is refused (a vector of another model with the same length would
                 otherwise be compared silently). NULL = not checked.
Cost: the called function's, plus one indexed lookup per hit for cites and per expansion.
*/
DECLARE
    v_hits  rag.search_hit[];
    v_model TEXT;
BEGIN
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query_model IS NOT NULL AND p_query_embedding IS NOT NULL THEN
        SELECT m.model INTO v_model FROM rag._corpus_model(NULL) m;
        IF v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels or node_type filter'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'hybrid' THEN
        SELECT array_agg(h ORDER BY h.rank) INTO v_hits FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
            p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
            p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
            p_cite_weight => p_cite_weight) h;
    ELSIF p_mode = 'two-stage' THEN
        SELECT array_agg(h ORDER BY h.rank) INTO v_hits FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
            p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
            p_vector_weight => p_vector_weight) h;
    ELSIF p_mode = 'bm25' THEN
        SELECT array_agg(h ORDER BY h.rank) INTO v_hits FROM rag.search_bm25(p_query, p_k, p_book, p_levels, p_node_type, p_within => p_within) h;
    ELSE
        SELECT array_agg(h ORDER BY h.rank) INTO v_hits FROM rag.search_vector(p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within => p_within) h;
    END IF;

    RETURN QUERY
    SELECT h.*,
           (SELECT coalesce(json_agg(json_build_object('source_file', c.f, 'paragraphs', c.p) ORDER BY c.f), '[]'::json)
            FROM (SELECT ct.cited_source_file AS f,
                         array_agg(ct.cited_paragraph ORDER BY ct.cited_paragraph) FILTER (WHERE ct.cited_paragraph IS NOT NULL) AS p
                  FROM rag.citations ct
                  WHERE ct.source_file = h.source_file AND ct.chunk_index = h.chunk_index
                  GROUP BY ct.cited_source_file) c),
           CASE WHEN 'parent' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(p) ORDER BY p.chunk_index), '[]'::json)
                FROM rag.get_node(h.parent_source_file) p) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(c) ORDER BY c.node_order, c.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) c) END
    FROM unnest(v_hits) h
    ORDER BY h.rank;
END
$$;
