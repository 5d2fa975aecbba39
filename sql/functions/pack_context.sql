-- rag.pack_context: given hits in rank order, the reading-order context that fits a token budget.
CREATE OR REPLACE FUNCTION rag.pack_context(
    p_hit_ids INT[],
    p_budget  INT DEFAULT 3000,
    p_expand  TEXT[] DEFAULT '{parent}'
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Packs the rows p_hit_ids (best hit first; unknown ids and NULLs skipped) into a context within
p_budget tokens (1..1,000,000, default 3000): for each hit, its parent node's rows (when p_expand,
the word list rag.search takes, has 'parent', the default, and the hit is not a root; NULL or '{}':
the hits alone; 'parent' is the one expansion a context takes) plus the hit, minus rows taken,
added whole when it fits, else the hit alone if it fits, else skipped. Rows in reading order with
their citation, role ('hit' or 'parent'), the hit's rank and the running total (rag.context_row).
The MCP server packs the hits it holds without searching again. Raises invalid_parameter_value
naming a word of p_expand other than 'parent', or the budget out of range. Cost: two index
lookups per hit.
*/
DECLARE
    v_hit       RECORD;
    v_ids       INT[] := '{}';
    v_roles     TEXT[] := '{}';
    v_ranks     INT[] := '{}';
    v_left      INT := p_budget;
    v_unit_ids  INT[];
    v_unit_tok  INT;
    v_parents   BOOLEAN := 'parent' = ANY(coalesce(p_expand, '{}'));
BEGIN
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent'] THEN
        RAISE EXCEPTION 'a context expands parent only, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS DISTINCT FROM 'parent')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
        WHERE v_parents AND NOT (p.id = ANY(v_ids));
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
