-- 0036_one_expand_convention: p_expand is a text array in rag.build_context and rag.pack_context too; rag.build_context takes every argument rag.search takes (p_query_model, p_tuning)
-- depends: 0035_books_volume_listed

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag.build_context(text, vector, int, int, text, int[], boolean, text, text);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag.pack_context(int[], int, boolean);  -- arguments or result changed

-- function: build_context sha256:65e947d5b9f9a0e0b0902ca5e2e5503a607035f3471d3dcbf33168c3dc20a99e
-- rag.build_context: search + parent expansion + deduplication within a token budget, ordered for reading.
CREATE OR REPLACE FUNCTION rag.build_context(
    p_query           TEXT,
    p_query_embedding vector,
    p_budget          INT DEFAULT 3000,
    p_k               INT DEFAULT 8,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_expand          TEXT[] DEFAULT '{parent}',
    p_mode            TEXT DEFAULT 'auto',
    p_within          TEXT DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL,
    p_tuning          JSONB DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the context an LLM reads: the p_k hits of rag.search (every argument of rag.search, by
the same name, default and meaning: p_query, p_query_embedding, p_mode, p_k, p_book, p_levels,
p_within, p_query_model, p_tuning; p_k defaults to 8 here) packed by rag.pack_context within
p_budget tokens (1..1,000,000, default 3000) with p_expand (default '{parent}': each hit's parent
node; NULL or '{}': the hits alone). It is rag.pack_context(ARRAY(SELECT id FROM rag.search(…)
ORDER BY rank), p_budget, p_expand).
Raises what rag.search and rag.pack_context raise. Cost: one search, two lookups per hit.
*/
BEGIN
    -- PL/pgSQL, not SQL: a SQL body is checked when created, and rag.search is created after it.
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_within,
                              NULL, p_query_model, p_tuning) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;

-- function: pack_context sha256:1a8fafebf5d610955820a531049b5665534191543d21bf0e9f7557830d3be6fc
-- rag.pack_context: given hits in rank order, the reading-order context that fits a token budget.
CREATE OR REPLACE FUNCTION rag.pack_context(
    p_hit_ids INT[],
    p_budget  INT DEFAULT 3000,
    p_expand  TEXT[] DEFAULT '{parent}'
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
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

GRANT EXECUTE ON FUNCTION rag.build_context(text, vector, int, int, text, int[], text[], text, text, text, jsonb) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.pack_context(int[], int, text[]) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('build_context', '65e947d5b9f9a0e0b0902ca5e2e5503a607035f3471d3dcbf33168c3dc20a99e', '0036_one_expand_convention'),
    ('pack_context', '1a8fafebf5d610955820a531049b5665534191543d21bf0e9f7557830d3be6fc', '0036_one_expand_convention')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
