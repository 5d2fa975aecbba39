-- rag.search_sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag.search_sentences(
    p_query_embedding vector,
    p_k      INT DEFAULT 10,
    p_book   TEXT DEFAULT NULL,
    p_within TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns at most p_k source paragraphs (level-0 chunks): those cited by the p_k chapter-summary
sentences nearest to the query (see below), best first (rag.search_hit; fewer than p_k when those sentences
cite fewer paragraphs). Every anchored sentence of the level-1 summaries (rag.sentences,
embedded alone) is a candidate; a paragraph scores the best cosine similarity among the
sentences whose anchors cite it ([§12–14], docs/anchors.md), ties broken by the paragraph's
own similarity. A paragraph split into several chunks is represented by its chunk closest to
the query. score = sentence_score = that best sentence's similarity, rank = sentence_rank =
1..k; the branch columns (bm25_*, vector_*) and section_score are NULL.
Reworded questions (a reader's modern French against the book's 1840s French) meet the
summaries' wording, and the anchors lead back to the book's own paragraph: this is why the
branch exists (measured in evaluation/experiments/sentence_anchors/ and README).
Parameters:
  p_query_embedding  the query's vector, of the corpus model (required).
  p_k                how many paragraphs, 1..1000 (default 10).
  p_book             NULL (all books) or one book.
  p_within           NULL or a source_file: only paragraphs in that node's subtree.
No sentence loaded (a corpus without anchors, or no vectors): no rows.
The nearest sentences are approximate (HNSW over the embeddings cast to halfvec, decision 27:
the p_k found are ordered by the half-precision distance, then scored with the full one), except
within a subtree, where they are exact.
Cost: an HNSW scan of the sentences' partial halfvec index for the corpus model (rag._ensure_vector_index;
ef_search raised to p_k, iterative scan so a book filter does not starve it) or, with p_within,
an exact ranking of the subtree's sentences (rag.sentences_cited_idx); a small dynamic
statement planned in microseconds; then a static statement (plan cached) that looks up, for
each paragraph the p_k best sentences cite that can rank within p_k, its chunks by index. The
halfvec index (migration 0018) halved the index (120 -> 69 MB for 61,594 sentences) and took
the kNN statement from 0.99 to 0.84 ms p50 on the books and from 4.57 to 3.76 ms at 100k
synthetic rows (both statements called in turn in one database; decision 27); the whole
function 1.9-2.6 ms p50 from Python on the books (bench/bench_search.py, whose absolute times
move by a third between runs). A query vector with a component beyond halfvec's range (65504)
is refused by the cast, naming the value.
*/
DECLARE
    v_model  TEXT;
    v_dim    INT;
    v_within INT[];
    c_file   TEXT[];    -- the sentences' cited paragraphs, one element each: file, number, distance
    c_par    INT[];
    c_dist   FLOAT8[];
BEGIN
    SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
    FROM rag._knn_args('search_sentences', p_query_embedding, p_k, p_book, NULL, NULL, p_within) a;
    IF v_model IS NULL THEN
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    -- The p_k nearest sentences (the paragraphs they cite are exactly the best-ranked ones,
    -- each with its best sentence). Whole corpus or a book: the HNSW index, which orders by
    -- the half-precision distance (its expression has the dimension in it, hence format); the
    -- distance kept is the full-precision one. Within a subtree: the few sentences citing its files,
    -- found by rag.sentences_cited_idx and ranked exactly (an expression the HNSW index does not
    -- match), because an index scan filtered that narrowly can stop (hnsw.max_scan_tuples) before
    -- it has found p_k of them.
    EXECUTE format(
        'SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) FROM ('
        'SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, (st.embedding <=> $1)::float8 AS d '
        'FROM rag.sentences st WHERE st.embedding_model = %1$L%2$s%3$s '
        'ORDER BY %4$s LIMIT $2) s, unnest(s.ps) AS p(n)',
        v_model,
        CASE WHEN p_book IS NOT NULL THEN ' AND st.book = $3' END,
        CASE WHEN v_within IS NOT NULL THEN ' AND st.cited_source_file IN '
            '(SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY($4))' END,
        CASE WHEN v_within IS NULL THEN format('st.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s)', v_dim)
             ELSE 'st.embedding <=> $1' END)
    INTO c_file, c_par, c_dist
    USING p_query_embedding, p_k, p_book, v_within;
    RETURN QUERY
    WITH cited AS (
        SELECT c.f, c.n, 1 - min(c.d) AS sim FROM unnest(c_file, c_par, c_dist) AS c(f, n, d) GROUP BY c.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (  -- one chunk per paragraph: the one closest to the query (an index lookup each)
        SELECT c.*, para.sim
        FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   CASE WHEN n.embedding_model = v_model THEN 1 - (n.embedding <=> p_query_embedding) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (v_within IS NULL OR n.id = ANY(v_within))
            ORDER BY own DESC NULLS LAST, n.chunk_index
            LIMIT 1
        ) c
    ), top AS (
        SELECT one.*, row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id)::int AS r
        FROM one
    )
    SELECT top.id, top.source_file, top.chunk_index, top.level, top.node_type, top.heading_path,
           top.parent_source_file, top.content, top.content_token_count, top.book, top.node_order, top.paragraph,
           top.sim, top.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, top.r, top.sim,
           NULL::json, NULL::json, NULL::json
    FROM top
    WHERE top.r <= p_k
    ORDER BY top.r;
END
$$;
