-- Raise the HNSW search settings for the current search (callers restore them on return).
CREATE OR REPLACE FUNCTION rag._set_hnsw(p_ef_search INT)
RETURNS VOID
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog
AS $$
/*
Sets hnsw.ef_search to p_ef_search clamped to 40..1000 and hnsw.iterative_scan to
relaxed_order, both transaction-local: a caller that declares `SET hnsw.ef_search` and
`SET hnsw.iterative_scan` in its definition gets its previous values back when it returns.
Why a definer function: bookrag_reader may not execute set_config (migration 0003: a reader
that could change settings could lift its own limits), and a STABLE search function may not
run SET itself. This function can change only these two settings, within bounds.
Cost: two set_config calls, microseconds.
*/
BEGIN
    PERFORM set_config('hnsw.ef_search', greatest(40, least(coalesce(p_ef_search, 40), 1000))::text, true);
    PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
END
$$;
