-- rag.search_phrasings: one question searched in several phrasings at once, their lists fused.
CREATE OR REPLACE FUNCTION rag.search_phrasings(
    p_query               TEXT,
    p_query_embedding     vector,
    p_phrasings           TEXT[],
    p_phrasing_embeddings vector[] DEFAULT NULL,
    p_k                   INT DEFAULT 10,
    p_book                TEXT DEFAULT NULL,
    p_levels              INT[] DEFAULT NULL,
    p_within              TEXT DEFAULT NULL,
    p_expand              TEXT[] DEFAULT NULL,
    p_query_model         TEXT DEFAULT NULL,
    p_mode                TEXT DEFAULT 'auto',
    p_fusion              TEXT DEFAULT 'rrf'
) RETURNS TABLE (rank INT, score FLOAT8, found_by INT[], phrasing_ranks INT[], hit rag.search_hit)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_k best hits of one question searched as p_query and as each of p_phrasings (other
wordings: the author's keywords, a passage in his style), best first: each wording searched as
rag.search searches it (rag._search_hits: same checks and filters; its top max(p_k, 20)), the lists
fused: rank, score; found_by (0 = p_query, i = p_phrasings[i]); phrasing_ranks (its rank in each,
in found_by's order); hit (the row of the list that ranked it best, with rag._dress's cites and
expansions).
  p_phrasings           0..4 wordings, none empty, over 10,000 characters, or repeating the query
                        or another (case and outer spaces aside); none: rag.search's own rows
  p_phrasing_embeddings their vectors, same order; required when the query has one and the mode
                        reads vectors
  p_mode                every search's mode (default 'auto', decision 0031)
  p_fusion              'rrf' (default): sum of 1 / (60 + rank); 'best': the best rank. Ties:
                        found by more lists, then the best list rank
  the others            as rag.search's
Raises invalid_parameter_value naming the phrasing and the rule it breaks; rag.search the rest.
Cost: one search per wording, their BM25 scans in one statement; a sort of at most 5 x max(p_k, 20)
rows; rag._dress over p_k.
*/
DECLARE
    v_n    INT := coalesce(cardinality(p_phrasings), 0);
    v_pool INT := CASE WHEN v_n = 0 THEN p_k ELSE greatest(p_k, 20) END;
    v_key  TEXT;
BEGIN
    IF v_n > 4 THEN
        RAISE EXCEPTION 'at most 4 phrasings besides the query, got %', v_n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1..v_n LOOP
        v_key := lower(btrim(p_phrasings[i], E' \t\r\n'));
        IF v_key IS NULL OR v_key = '' THEN
            RAISE EXCEPTION 'phrasing % is empty', i USING ERRCODE = 'invalid_parameter_value';
        ELSIF length(p_phrasings[i]) > 10000 THEN
            RAISE EXCEPTION 'phrasing % is % characters long; the limit is 10000', i, length(p_phrasings[i])
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF v_key = lower(btrim(p_query, E' \t\r\n')) THEN
            RAISE EXCEPTION 'phrasing % repeats the query: "%"', i, left(p_phrasings[i], 80)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR j IN 1..i - 1 LOOP
            IF v_key = lower(btrim(p_phrasings[j], E' \t\r\n')) THEN
                RAISE EXCEPTION 'phrasing % repeats phrasing %: "%"', i, j, left(p_phrasings[i], 80)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END LOOP;
    IF p_phrasing_embeddings IS NOT NULL AND coalesce(cardinality(p_phrasing_embeddings), 0) <> v_n THEN
        RAISE EXCEPTION 'p_phrasing_embeddings has % vectors for % phrasings', coalesce(cardinality(p_phrasing_embeddings), 0), v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n > 0 AND p_phrasing_embeddings IS NULL AND p_query_embedding IS NOT NULL AND p_mode IS DISTINCT FROM 'bm25' THEN
        RAISE EXCEPTION 'the phrasings have no vectors (p_phrasing_embeddings) while the query has one: mode % compares vectors',
            p_mode USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_fusion IS NULL OR p_fusion NOT IN ('rrf', 'best') THEN
        RAISE EXCEPTION 'fusion of phrasings must be ''rrf'' or ''best'', got "%"', coalesce(p_fusion, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    RETURN QUERY
    WITH lists AS (
        SELECT s.wording - 1 AS i, s.hit AS row
        FROM rag._search_hits(ARRAY[p_query] || p_phrasings,
                              ARRAY[p_query_embedding] || coalesce(p_phrasing_embeddings, array_fill(NULL::vector, ARRAY[v_n])),
                              p_mode, v_pool, p_book, p_levels, p_within, p_expand, p_query_model, NULL) s
    ), fused AS (
        SELECT (l.row).id AS id,
               CASE WHEN p_fusion = 'rrf' THEN sum(1.0 / (60 + (l.row).rank)) ELSE max(1.0 / (60 + (l.row).rank)) END AS score,
               array_agg(l.i ORDER BY l.i) AS found_by,
               array_agg((l.row).rank ORDER BY l.i) AS ranks,
               (array_agg(l.row ORDER BY (l.row).rank, l.i))[1] AS best
        FROM lists l
        GROUP BY (l.row).id
    ), top AS MATERIALIZED (
        SELECT (row_number() OVER (ORDER BY f.score DESC, cardinality(f.found_by) DESC, (f.best).rank, f.id))::int AS rank,
               f.score::float8 AS score, f.found_by, f.ranks, f.best
        FROM fused f
        ORDER BY 1
        LIMIT p_k
    )
    SELECT t.rank, t.score, t.found_by, t.ranks, d
    FROM top t
    JOIN rag._dress(ARRAY(SELECT x.best FROM top x), p_expand) d ON d.id = (t.best).id
    ORDER BY t.rank;
END
$$;
