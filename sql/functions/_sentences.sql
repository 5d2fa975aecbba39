-- rag._sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag._sentences(
    p_model   TEXT,
    p_vectors vector[],
    p_k       INT,
    p_book    TEXT,
    p_ids     INT[]
) RETURNS TABLE (wording INT, hit rag.search_hit)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns, for each vector p_vectors[wording] (NULL: no row), at most p_k paragraphs, best first:
those cited by the 2 x p_k chapter-summary sentences (rag.sentences) nearest to it, each scored
by its best citing sentence's similarity (sentence_score, sentence_rank; ties by its own
similarity), by its chunk nearest the vector. The sentences come from the halfvec HNSW index
(rag._knn_sentences), or exactly within p_ids's subtree. Rows by wording, then rank.
Cost: one statement; per vector an HNSW scan of 2 x p_k sentences and a lookup per paragraph.
*/
BEGIN
    IF p_ids IS NULL THEN
        PERFORM rag._set_hnsw(2 * p_k);
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT u.v, u.i::int AS i FROM unnest(p_vectors) WITH ORDINALITY AS u(v, i) WHERE u.v IS NOT NULL
    ), s AS (
        SELECT q.i, k.cited_source_file AS f, k.cited_paragraphs AS ps, k.distance AS d
        FROM q CROSS JOIN LATERAL rag._knn_sentences(p_model, q.v, 2 * p_k, p_book) k WHERE p_ids IS NULL
        UNION ALL
        SELECT q.i, exact.* FROM q CROSS JOIN LATERAL (
            SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> q.v)::float8
            FROM rag.sentences st
            WHERE p_ids IS NOT NULL AND st.embedding_model = p_model AND (p_book IS NULL OR st.book = p_book)
              AND st.cited_source_file IN (SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY(p_ids))
            ORDER BY st.embedding <=> q.v LIMIT 2 * p_k) exact
    ), cited AS (
        SELECT s.i, s.f, c.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS c(n) GROUP BY s.i, s.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.i, x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (PARTITION BY cited.i ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (
        SELECT para.i, c.*, para.sim FROM para JOIN q ON q.i = para.i
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, n.kind,
                   CASE WHEN n.embedding_model = p_model THEN 1 - (n.embedding <=> q.v) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (p_ids IS NULL OR n.id = ANY(p_ids))
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, (row_number() OVER (PARTITION BY one.i ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id))::int AS r FROM one
    )
    SELECT t.i, ROW(t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
           t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
           t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
           NULL::json, NULL::json, NULL::json, t.kind)::rag.search_hit
    FROM top t WHERE t.r <= p_k ORDER BY t.i, t.r;
END
$$;
