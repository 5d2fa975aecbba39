-- rag._two_stage: 'two-stage' mode: the best sections first, then their best paragraphs (each wording apart).
CREATE OR REPLACE FUNCTION rag._two_stage(
    p_queries TEXT[],
    p_vectors vector[],
    p_model  TEXT,
    p_k      INT,
    p_book   TEXT,
    p_ids    INT[],
    p        rag.search_settings
) RETURNS TABLE (wording INT, hit rag.search_hit)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns, for each wording w (p_queries[w], p_vectors[w]; a vector may be NULL), at most p_k
paragraphs, best first, as a search of w alone, from one first search: rag._fuse over the BM25
branch's n = least(1000, greatest(pool, p_k, 10 x sections)) candidates and the kNN branch's
vector_pool, every level, its n best rows read.
  1. sections (a level-1 summary's file, a paragraph's parent) score their rows' best fused
     score; the `sections` best are kept, min-max normalised (section_score).
  2. their paragraphs among those rows; fewer than p_k: a search inside the kept sections,
     rag._fuse over their paragraphs the first search read with a BM25 score (no vector:
     pg_search inside them) and their exact kNN, greatest(p_k, pool) of each and kept.
  score = (1 - section_weight) x fused min-max normalised over them + section_weight x section.
No section: NOTICE, then rag._hybrid over paragraphs (pool, no chapter term). No paragraph: no row.
Cost per wording: a kNN scan, statements in memory, the inside search reading the sections'
paragraphs; one BM25 statement for all wordings (rag._bm25).
*/
DECLARE
    v_n      INT := least(1000, greatest(p.pool, p_k, 10 * p.sections));
    v_pool   INT := greatest(p_k, p.pool);
    v_knn    BOOLEAN;
    v_query  TEXT;
    v_vector vector;
    b_of     INT[];
    b_all    rag.candidate[];
    b        rag.candidate[];
    v        rag.candidate[];
    top      rag.fused[];
    para     rag.fused[];
    v_files  TEXT[];
    v_scores FLOAT8[];
    flat     rag.search_settings := p;
BEGIN
    SELECT array_agg(x.wording ORDER BY x.wording, (x.c).r), array_agg(x.c ORDER BY x.wording, (x.c).r)
    INTO b_of, b_all FROM rag._bm25(p_queries, v_n, p_book, NULL, p_ids) x;
    FOR w IN 1..cardinality(p_queries) LOOP
        v_query := p_queries[w];
        v_vector := p_vectors[w];
        v_knn := p_model IS NOT NULL AND v_vector IS NOT NULL;
        b := ARRAY(SELECT b_all[j] FROM generate_subscripts(b_of, 1) j WHERE b_of[j] = w ORDER BY j);
        v := NULL;
        IF v_knn THEN
            PERFORM rag._set_hnsw(p.vector_pool);
            v := ARRAY(SELECT c FROM rag._knn(p_model, v_vector, p.vector_pool, p_book, NULL, p_ids) c);
        END IF;
        top := ARRAY(SELECT f FROM rag._fuse(b, v, p) f WHERE f.rank <= v_n ORDER BY f.rank);

        -- 1. the sections, best first, and their normalised scores
        SELECT array_agg(s.section ORDER BY s.best DESC, s.section),
               array_agg(coalesce((s.best - s.lo) / nullif(s.hi - s.lo, 0), 1) ORDER BY s.best DESC, s.section)
        INTO v_files, v_scores
        FROM (SELECT t.*, min(t.best) OVER () AS lo, max(t.best) OVER () AS hi FROM (
                  SELECT CASE WHEN h.lvl = 1 THEN h.sf ELSE h.pf END AS section, max(h.fused) AS best
                  FROM unnest(top) h WHERE h.lvl <= 1 AND (h.lvl = 1 OR h.pf IS NOT NULL)
                  GROUP BY 1 ORDER BY best DESC, section LIMIT p.sections) t) s;
        IF v_files IS NULL THEN
            RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
            flat.chapter_weight := 0;
            flat.hybrid_pool := p.pool;
            RETURN QUERY SELECT w, h FROM rag._hybrid(v_query, v_vector, p_model, p_k, p_book, ARRAY[0], p_ids, flat) h;
            CONTINUE;
        END IF;

        -- 2. their paragraphs among the rows read, or a search inside them
        para := ARRAY(SELECT h FROM unnest(top) h WHERE h.lvl = 0 AND h.pf = ANY(v_files) ORDER BY h.rank);
        IF cardinality(para) < p_k THEN
            IF v_knn THEN
                b := ARRAY(SELECT ROW(h.id, h.bs, row_number() OVER (ORDER BY h.bs DESC, h.id), h.lvl, h.sf, h.pf)::rag.candidate
                           FROM unnest(para) h WHERE h.bs IS NOT NULL ORDER BY h.bs DESC, h.id LIMIT v_pool);
                v := ARRAY(SELECT ROW(z.id, 1 - z.d, row_number() OVER (ORDER BY z.d, z.id), z.lvl, z.sf, z.pf)::rag.candidate
                           FROM (SELECT y.* FROM (
                                     SELECT n.id, (n.embedding <=> v_vector)::float8 AS d, n.level AS lvl,
                                            n.source_file AS sf, n.parent_source_file AS pf
                                     FROM rag.hierarchical_content_nodes n
                                     WHERE n.level = 0 AND n.parent_source_file = ANY(v_files) AND n.embedding_model = p_model
                                       AND n.embedding IS NOT NULL AND (p_ids IS NULL OR n.id = ANY(p_ids))
                                     OFFSET 0) y  -- OFFSET 0: read through the parent index, exactly, never the HNSW scan
                                 ORDER BY y.d LIMIT v_pool) z
                           ORDER BY z.d, z.id);
            ELSE
                b := ARRAY(SELECT x.c FROM rag._bm25(ARRAY[v_query], v_pool, NULL, ARRAY[0], p_ids, v_files) x);
            END IF;
            para := ARRAY(SELECT f FROM rag._fuse(b, v, p) f WHERE f.rank <= v_pool ORDER BY f.rank);
        END IF;

        RETURN QUERY
        WITH scored AS (
            SELECT h.*, sec.sc,
                   (1 - p.section_weight) * coalesce((h.fused - min(h.fused) OVER ()) / nullif(max(h.fused) OVER () - min(h.fused) OVER (), 0), 1)
                   + p.section_weight * sec.sc AS final
            FROM unnest(para) h JOIN unnest(v_files, v_scores) AS sec(f, sc) ON sec.f = h.pf
        ), best AS (
            SELECT s.*, (row_number() OVER (ORDER BY s.final DESC, s.rank, s.id))::int AS r
            FROM scored s ORDER BY s.final DESC, s.rank, s.id LIMIT p_k
        )
        SELECT w, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               x.final, x.r, x.br, x.bs, x.vr, x.vs, x.sc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
        FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
        ORDER BY x.r;
    END LOOP;
END
$$;
