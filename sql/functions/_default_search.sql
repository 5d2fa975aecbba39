-- rag._default_search: the corpus model's generated default search; as installed by this file, a stand-in that returns nothing.
CREATE OR REPLACE FUNCTION rag._default_search(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
The name rag._search_hits calls, statically, for the plain default search (mode 'auto' or
'two-stage' without book, within or settings, k 1..100, a query vector). rag._install_model_search
replaces this body (CREATE OR REPLACE: same signature, same privileges) with the corpus model's
generated search at each load of embedded rows and after migrations; this file's version, which
a migration installs, is the stand-in until then (a corpus without vectors): it returns no row,
so rag._search_hits runs the general functions. The generated version also returns no row for
a corpus whose registered model is not the one it was generated for (or not the only one), or
a query vector of another dimension: the general functions then answer, or raise the error
that names the mismatch. A fixed name lets rag._search_hits call it without EXECUTE and without
looking the name up (0.25 ms p50 less per default search on the books: decision 29).
Parameters: p_query, p_query_embedding, p_k as rag.search's.
Cost: none here; the generated version's is rag.search's default (README, Latency).
*/
BEGIN
    RETURN;
END
$$;
