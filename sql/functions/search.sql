-- rag.search: one entry point for every search mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT DEFAULT 'auto',
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
    p_sentence_after  INT DEFAULT NULL,
    p_sentence_every  INT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Runs the search named by p_mode (rag._search_hits checks every argument and dispatches) and
returns its rows (rag.search_hit, best first) with cites, parent and cited filled:
  'auto'       the default: 'two-stage' when the filters allow paragraphs (none, levels {0},
               node_type 'source'), 'hybrid' when they ask for summaries or when two-stage
               finds no paragraph (decision 23)
  'hybrid'     rag.search_hybrid (both branches fused, every level), with places for the
               sentence branch (rag.search_sentences; see rag._search_hits)
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only: levels {0} and node_type
               'source' are the only filters it takes), with
               the same places for the sentence branch
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_sentence_after and p_sentence_every by both,
p_chapter_weight and p_cite_weight by 'hybrid' (checked in both: rag._fusion_settings).
  p_expand       what to attach to each hit, any of:
                   'parent'  the hit's parent node rows (rag.get_node of parent_source_file), as JSON;
                   'cited'   the rows a summary hit's anchors cite (rag.get_citations), as JSON.
                 NULL or '{}' = nothing; any other word is an error naming it. cites (what a
                 summary hit's anchors cite, compactly) is always filled.
  p_query_model  the model p_query_embedding was made with; when given and not the corpus model
                 the call is refused (a vector of another model with the same length would
                 otherwise be compared silently). NULL = not checked.
Cost: the called function's, plus one indexed lookup per summary hit for cites, per distinct
parent for 'parent' (hits of one section share one built JSON: two-stage's k hits come from at
most 5 sections, 4.3 distinct parents for 10 hits on the books' bench queries) and per hit for
'cited'. A SQL function without settings, so the caller's statement inlines it (one plan,
cached with a prepared statement) and an expansion not asked for is never run.
*/
    WITH h AS MATERIALIZED (
        SELECT * FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type,
                                       p_within, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                       p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every,
                                       p_expand, p_query_model)
    ), parents AS (  -- each parent node's rows as JSON, built once however many hits share it
        SELECT f.file, (SELECT json_agg(row_to_json(p) ORDER BY p.chunk_index) FROM rag.get_node(f.file) p) AS rows
        FROM (SELECT DISTINCT h.parent_source_file AS file FROM h
              WHERE 'parent' = ANY(p_expand) AND h.parent_source_file IS NOT NULL) f
    )
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           CASE WHEN h.level = 0 THEN '[]'::json ELSE rag.cites(h.source_file, h.chunk_index) END,
           CASE WHEN 'parent' = ANY(p_expand) THEN coalesce(parents.rows, '[]'::json) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;
