-- rag.pack_context: given hits in rank order, the reading-order context that fits a token budget.
CREATE OR REPLACE FUNCTION rag.pack_context(
    p_hit_ids INT[],
    p_budget  INT DEFAULT 3000,
    p_expand  BOOLEAN DEFAULT true
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Packs the rows p_hit_ids (ids of rag.hierarchical_content_nodes, best hit first; the hit's rank
is its position) into a context: for each hit, the unit to add is its parent node's rows (when
p_expand and the hit is not a root) plus the hit itself, minus rows already taken. A unit is
added whole when it fits in what remains of p_budget; otherwise the hit alone if it fits;
otherwise the hit is skipped and the next one tried. The total never exceeds p_budget (sum of
content_token_count). Rows come out in reading order (book, node_order, chunk_index), each with
its citation, its role ('hit' or 'parent'), the rank of the hit that brought it and the running
token total. rag.build_context is rag.search followed by this; a caller that already holds the
hits of a search (the MCP server) packs them without searching again.
Parameters:
  p_hit_ids  row ids in rank order (from rag.search's id column); unknown ids and NULLs are skipped.
  p_budget   tokens, 1..1,000,000 (default 3000).
  p_expand   add each hit's parent node (default true).
Cost: one primary-key lookup and one (source_file, chunk_index) range scan per hit.
*/
DECLARE
    v_hit       RECORD;
    v_ids       INT[] := '{}';
    v_roles     TEXT[] := '{}';
    v_ranks     INT[] := '{}';
    v_left      INT := p_budget;
    v_unit_ids  INT[];
    v_unit_tok  INT;
BEGIN
    IF p_budget IS NULL OR p_budget < 1 OR p_budget > 1000000 THEN
        RAISE EXCEPTION 'budget must be between 1 and 1000000 tokens, got %', coalesce(p_budget::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_hit IN
        SELECT n.id, n.parent_source_file, n.content_token_count, u.rank::int AS rank
        FROM unnest(p_hit_ids) WITH ORDINALITY AS u(id, rank)
        JOIN rag.hierarchical_content_nodes n ON n.id = u.id
        ORDER BY u.rank
    LOOP
        CONTINUE WHEN v_hit.id = ANY(v_ids);
        -- The unit: parent rows not yet taken (in chunk order), then the hit.
        SELECT coalesce(array_agg(p.id ORDER BY p.chunk_index), '{}'), coalesce(sum(p.content_token_count), 0)
        INTO v_unit_ids, v_unit_tok
        FROM rag.get_node(v_hit.parent_source_file) p
        WHERE p_expand AND NOT (p.id = ANY(v_ids));
        IF v_unit_tok + coalesce(v_hit.content_token_count, 0) <= v_left THEN
            v_ids   := v_ids || v_unit_ids || v_hit.id;
            v_roles := v_roles || array_fill('parent'::text, ARRAY[cardinality(v_unit_ids)]) || 'hit'::text;
            v_ranks := v_ranks || array_fill(v_hit.rank, ARRAY[cardinality(v_unit_ids)]) || v_hit.rank;
            v_left  := v_left - v_unit_tok - coalesce(v_hit.content_token_count, 0);
        ELSIF coalesce(v_hit.content_token_count, 0) <= v_left THEN
            v_ids   := v_ids || v_hit.id;
            v_roles := v_roles || 'hit'::text;
            v_ranks := v_ranks || v_hit.rank;
            v_left  := v_left - coalesce(v_hit.content_token_count, 0);
        END IF;
        EXIT WHEN v_left <= 0;
    END LOOP;

    RETURN QUERY
    SELECT n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
           n.content_token_count, n.book, n.node_order, n.paragraph, u.role, u.hit_rank,
           (sum(coalesce(n.content_token_count, 0)) OVER (ORDER BY n.book, n.node_order, n.source_file, n.chunk_index))::int
    FROM unnest(v_ids, v_roles, v_ranks) AS u(id, role, hit_rank)
    JOIN rag.hierarchical_content_nodes n ON n.id = u.id
    ORDER BY n.book, n.node_order, n.source_file, n.chunk_index;
END
$$;
