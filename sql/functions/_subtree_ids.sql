-- The row ids of a node's subtree (the node and every descendant), for the `within` filter.
CREATE OR REPLACE FUNCTION rag._subtree_ids(
    p_within TEXT,
    p_book   TEXT DEFAULT NULL
) RETURNS INT[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns NULL when p_within is NULL (no restriction); else the ids of every row of the node
p_within (a source_file) and of all the nodes below it, following parent_source_file down
(a chapter's summary.md: the summary and its source.md paragraphs; a part: its chapters; a
book's root: the whole book). Raises invalid_parameter_value when p_within names no loaded
node, or when p_book is given and the node belongs to another book.
Cost: one index lookup per level of the tree (hcn_parent_idx), then one per node of the
subtree; a chapter is a few rows, a whole book a few thousand ids.
*/
DECLARE
    v_book TEXT;
    v_ids  INT[];
BEGIN
    IF p_within IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT n.book INTO v_book FROM rag.hierarchical_content_nodes n WHERE n.source_file = p_within LIMIT 1;
    IF v_book IS NULL THEN
        RAISE EXCEPTION 'within "%" names no loaded node; use a source_file from a search hit or rag.outline', p_within
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_book IS NOT NULL AND p_book <> v_book THEN
        RAISE EXCEPTION 'within "%" is in book "%", not in book "%"', p_within, v_book, p_book
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH RECURSIVE t(f) AS (
        SELECT p_within
        UNION
        SELECT c.source_file FROM rag.hierarchical_content_nodes c JOIN t ON c.parent_source_file = t.f
    )
    SELECT array_agg(n.id ORDER BY n.id) INTO v_ids
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file IN (SELECT f FROM t);
    RETURN v_ids;
END
$$;
