-- 0025_shared_bm25_scan: rag._bm25 reads every wording's list in one statement with its limit written in (pg_search's top-N scan); rag._two_stage and rag._search_hits take several wordings
-- depends: 0024_dress_once

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag._bm25(text, int, text, int[], int[], text[]);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag._search_hits(text, vector, text, int, text, int[], text, text[], text, jsonb);  -- arguments or result changed
DROP FUNCTION IF EXISTS rag._two_stage(text, vector, text, int, text, int[], rag.search_settings);  -- arguments or result changed

-- function: _bm25 sha256:6bb730a68513c43f03aad1b9a38bcc07b117f7cd7d7f6948a18fdc48291b32ff
-- rag._bm25: the BM25 branch's candidates (pg_search), best first, for one or more wordings in one scan.
CREATE OR REPLACE FUNCTION rag._bm25(
    p_queries TEXT[],
    p_n       INT,
    p_book    TEXT DEFAULT NULL,
    p_levels  INT[] DEFAULT NULL,
    p_ids     INT[] DEFAULT NULL,
    p_parents TEXT[] DEFAULT NULL
) RETURNS TABLE (wording INT, c rag.candidate)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns, for each p_queries[wording], the p_n rows best matching it (pg_search BM25, French
stemming, any term: |||; never parsed) as rag.candidate: s the score, r 1..p_n (ties by id, the
cut included); filters p_book, p_levels, p_ids, p_parents (NULL for none). Rows by wording, then r.
Cost: one statement, one top-N scan per wording (pg_search opens its index once per statement:
three wordings cost about 1.4 x one); without filters static (cached plan), with filters dynamic,
so pg_search pushes them down.
*/
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT w.i::int, ROW(x.id, x.s, x.r, x.lvl, x.sf, x.pf)::rag.candidate '
        'FROM unnest($1) WITH ORDINALITY AS w(t, i) CROSS JOIN LATERAL ('
        'SELECT y.*, (row_number() OVER (ORDER BY y.s DESC, y.id))::int AS r FROM ('
        'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf '
        'FROM rag.hierarchical_content_nodes n WHERE n.content ||| w.t%s ORDER BY pdb.score(n.id) DESC, n.id LIMIT %s) y) x '
        'ORDER BY w.i, x.r',
        concat(CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $2' END,
               CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($3)' END,
               CASE WHEN p_ids IS NOT NULL THEN ' AND n.id = ANY($4)' END,
               CASE WHEN p_parents IS NOT NULL THEN ' AND n.parent_source_file = ANY($5)' END),
        p_n)
    USING p_queries, p_book, p_levels, p_ids, p_parents;
END
$$;

-- function: _hybrid sha256:fb4e5141bd975470d3a2c1ef216b28aabce4d236c4c0a15d26aa987c1b7ec6ac
-- rag._hybrid: 'hybrid' mode: both branches fused over every level, a paragraph lifted by its chapter.
CREATE OR REPLACE FUNCTION rag._hybrid(
    p_query  TEXT,
    p_vector vector,
    p_model  TEXT,
    p_k      INT,
    p_book   TEXT,
    p_levels INT[],
    p_ids    INT[],
    p        rag.search_settings
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the p_k best rows of rag._fuse over both branches' greatest(hybrid_pool, p_k)
candidates, best first: score = fused, and for a paragraph (1 - chapter_weight) x fused +
chapter_weight x its chapter's (its parent summary's best fused score among the candidates,
else the floor; section_score). When p_levels leaves out level 1, the branches read it too and
the filter applies after. Ties: the fused order.
Cost: two index scans, a fusion in memory, p_k lookups.
*/
DECLARE
    v_n      INT := greatest(p.hybrid_pool, p_k);
    v_levels INT[] := CASE WHEN p.chapter_weight > 0 AND NOT 1 = ANY(p_levels) THEN p_levels || 1 ELSE p_levels END;
    b        rag.candidate[];
    v        rag.candidate[];
BEGIN
    b := ARRAY(SELECT x.c FROM rag._bm25(ARRAY[p_query], v_n, p_book, v_levels, p_ids) x);
    IF p_model IS NOT NULL AND p_vector IS NOT NULL THEN
        PERFORM rag._set_hnsw(v_n);
        v := ARRAY(SELECT c FROM rag._knn(p_model, p_vector, v_n, p_book, v_levels, p_ids) c);
    END IF;
    RETURN QUERY
    WITH f AS (
        SELECT * FROM rag._fuse(b, v, p)
    ), ch AS (
        SELECT f.sf, max(f.fused) AS cs FROM f WHERE f.lvl = 1 AND p.chapter_weight > 0 GROUP BY f.sf
    ), c AS (
        SELECT f.*, CASE WHEN f.lvl = 0 AND p.chapter_weight > 0 THEN coalesce(ch.cs, f.floor) END AS cs
        FROM f LEFT JOIN ch ON ch.sf = f.pf
    ), top AS (
        SELECT c.*, CASE WHEN c.lvl <> 0 THEN c.fused
                         ELSE (1 - p.chapter_weight) * c.fused + p.chapter_weight * coalesce(c.cs, 0) END AS score
        FROM c
        WHERE p_levels IS NULL OR c.lvl = ANY(p_levels)
        ORDER BY score DESC, c.rank
        LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, top.rank))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, top.rank;
END
$$;

-- function: _search_hits sha256:4c6b9b3b220e2af11dead944950b55478dff1a94a45bdb8afd226c3e373739de
-- rag._search_hits: rag.search's checks and its modes (the mode list is defined here), for one or more wordings.
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_queries     TEXT[],
    p_vectors     vector[],
    p_mode        TEXT,
    p_k           INT,
    p_book        TEXT,
    p_levels      INT[],
    p_within      TEXT,
    p_expand      TEXT[],
    p_query_model TEXT,
    p_tuning      JSONB
) RETURNS TABLE (wording INT, hit rag.search_hit)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Checks rag.search's arguments and returns, for each wording w (p_queries[w] and its vector
p_vectors[w], same length), the rows a search of w alone returns (best first, without cites
and expansions): 'auto' is 'two-stage' when p_levels allows paragraphs, else 'hybrid', and
'hybrid' when two-stage finds no paragraph; 'two-stage' rag._two_stage (p_levels NULL or {0});
'hybrid' rag._hybrid; 'bm25' rag._bm25 alone; 'vector' rag._knn alone (vectors required).
In two-stage and hybrid, with a vector and paragraphs allowed, the sentence branch
(rag._sentences) takes its places (rag._interleave). Raises invalid_parameter_value naming the
value (mode, query, k, book, levels, expand, query model or vector length, a setting, within).
Parallel query and sequential scans off; rag._set_hnsw's settings restored on return.
Cost: the mode's scans per wording, BM25's in one statement for all (rag._bm25).
*/
DECLARE
    v_n     INT := cardinality(p_queries);
    v_mode  TEXT := p_mode;
    v_model TEXT;
    v_ids   INT[];
    p       rag.search_settings;
    f_of    INT[];
    f_all   rag.search_hit[];
    f_rows  rag.search_hit[];
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(v_n, 0) = 0 OR cardinality(p_vectors) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'give one vector (or NULL) per wording: % wordings, % vectors',
            coalesce(v_n, 0), coalesce(cardinality(p_vectors), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR w IN 1..v_n LOOP
        PERFORM rag._check_search_args(p_queries[w], p_k, p_book, p_levels, p_mode <> 'vector');
    END LOOP;
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p := rag._settings(p_tuning);
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) THEN 'two-stage' ELSE 'hybrid' END;
    ELSIF p_mode = 'two-stage' AND NOT coalesce(p_levels <@ ARRAY[0], true) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0}, got levels %',
            p_levels USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_mode = 'vector' AND array_position(p_vectors, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; vector search needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode <> 'bm25' THEN  -- (bm25 reads no vector: nothing of it is checked)
        FOR w IN 1..v_n LOOP
            CONTINUE WHEN p_vectors[w] IS NULL;
            SELECT m.model INTO v_model FROM rag._corpus_model(p_vectors[w]) m;  -- raises on another length, or several models
            IF p_query_model IS NOT NULL AND v_model IS DISTINCT FROM p_query_model THEN
                RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                    p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    v_ids := rag._subtree_ids(p_within, p_book);

    IF v_mode = 'bm25' THEN
        RETURN QUERY
        SELECT x.wording, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               (x.c).s, (x.c).r, (x.c).r, (x.c).s, NULL::int, NULL::float8,
               NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json)::rag.search_hit
        FROM rag._bm25(p_queries, p_k, p_book, p_levels, v_ids) x
        JOIN rag.hierarchical_content_nodes n ON n.id = (x.c).id
        ORDER BY x.wording, (x.c).r;
        RETURN;
    END IF;
    IF v_mode = 'vector' THEN
        IF v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
        FOR w IN 1..v_n LOOP
            RETURN QUERY
            SELECT w, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   c.s, c.r, NULL::int, NULL::float8, c.r, c.s,
                   NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json)::rag.search_hit
            FROM rag._knn(v_model, p_vectors[w], p_k, p_book, p_levels, v_ids) c
            JOIN rag.hierarchical_content_nodes n ON n.id = c.id
            ORDER BY c.r;
        END LOOP;
        RETURN;
    END IF;
    IF v_mode = 'two-stage' THEN
        SELECT array_agg(t.wording ORDER BY t.wording, (t.hit).rank), array_agg(t.hit ORDER BY t.wording, (t.hit).rank)
        INTO f_of, f_all FROM rag._two_stage(p_queries, p_vectors, v_model, p_k, p_book, v_ids, p) t;
    END IF;
    FOR w IN 1..v_n LOOP
        f_rows := ARRAY(SELECT f_all[j] FROM generate_subscripts(f_of, 1) j WHERE f_of[j] = w ORDER BY j);
        IF v_mode = 'hybrid' OR (p_mode = 'auto' AND cardinality(f_rows) = 0) THEN
            -- 'auto' when two-stage found no paragraph (words only in summaries, no query vector):
            -- the hybrid list, summaries included, rather than nothing
            f_rows := ARRAY(SELECT h FROM rag._hybrid(p_queries[w], p_vectors[w], v_model, p_k, p_book, p_levels, v_ids, p) h
                            ORDER BY h.rank);
        END IF;
        IF p.sentence_every = 0 OR p.sentence_after >= p_k OR v_model IS NULL OR p_vectors[w] IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) THEN
            RETURN QUERY SELECT w, h FROM unnest(f_rows) h;
        ELSE
            RETURN QUERY SELECT w, i FROM rag._interleave(f_rows, ARRAY(SELECT s FROM rag._sentences(v_model, p_vectors[w], p_k, p_book, v_ids) s),
                                                          p.sentence_after, p.sentence_every, p_k) i;
        END IF;
    END LOOP;
END
$$;

-- function: _two_stage sha256:36d2618e75c0ab7960777aa3e5dfcbc309ab090c47d22b378d0dfc6a8d8c9a33
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
               x.final, x.r, x.br, x.bs, x.vr, x.vs, x.sc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json)::rag.search_hit
        FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
        ORDER BY x.r;
    END LOOP;
END
$$;

-- function: search sha256:cf34255699cf4e766a7fc13d213e86949a12fce677531a668062b9f44a5831c0
-- rag.search: the search, in every mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector DEFAULT NULL,
    p_mode            TEXT DEFAULT 'auto',
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL,
    p_tuning          JSONB DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Returns the p_k best hits for p_query, best first (rag.search_hit: rank 1..k, score, each
branch's rank and score, section_score, sentence_rank and sentence_score where they apply).
  p_query_embedding its vector from the corpus model, query role (`bookrag embed`); NULL: BM25 alone
  p_mode            'auto' (default: 'two-stage' for paragraphs, 'hybrid' when p_levels asks for
                    summaries or two-stage finds nothing), 'two-stage', 'hybrid', 'bm25', 'vector'
  p_k               1..1000 (default 10); p_book one loaded book; p_levels some of 0..3;
                    p_within a source_file: only its subtree
  p_expand          'parent' fills parent, 'cited' fills cited (JSON); cites is always filled
  p_query_model     the vector's model: refused when not the corpus model
  p_tuning          named settings for measurement, e.g. '{"sections": 7}' (rag._settings)
Raises invalid_parameter_value naming the bad value (rag._search_hits).
Cost: the mode's scans and rag._dress's lookups. A SQL function: inlined into the caller's statement.
*/
    SELECT d.*
    FROM (SELECT array_agg(h.hit ORDER BY (h.hit).rank) AS hits
          FROM rag._search_hits(ARRAY[p_query], ARRAY[p_query_embedding], p_mode, p_k, p_book, p_levels, p_within,
                                p_expand, p_query_model, p_tuning) h) x
    CROSS JOIN LATERAL rag._dress(x.hits, p_expand) d;
$$;

-- function: search_phrasings sha256:ec1b896713bfe223b209ba47543501cbe4ae21573b96124b57dd95e1bfb8988b
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_bm25', '6bb730a68513c43f03aad1b9a38bcc07b117f7cd7d7f6948a18fdc48291b32ff', '0025_shared_bm25_scan'),
    ('_hybrid', 'fb4e5141bd975470d3a2c1ef216b28aabce4d236c4c0a15d26aa987c1b7ec6ac', '0025_shared_bm25_scan'),
    ('_search_hits', '4c6b9b3b220e2af11dead944950b55478dff1a94a45bdb8afd226c3e373739de', '0025_shared_bm25_scan'),
    ('_two_stage', '36d2618e75c0ab7960777aa3e5dfcbc309ab090c47d22b378d0dfc6a8d8c9a33', '0025_shared_bm25_scan'),
    ('search', 'cf34255699cf4e766a7fc13d213e86949a12fce677531a668062b9f44a5831c0', '0025_shared_bm25_scan'),
    ('search_phrasings', 'ec1b896713bfe223b209ba47543501cbe4ae21573b96124b57dd95e1bfb8988b', '0025_shared_bm25_scan')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
