-- 0030_books_as_they_are: issue 36: a paragraph cites the end notes it calls (rag.cites, rag.get_citations, rag._dress for level 0); rag.search_hit carries kind (the author's own summary); rag.outline gives depth and author_summaries
-- depends: 0029_author_summaries

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP TYPE IF EXISTS rag.search_hit CASCADE;  -- its attributes changed; dependants re-created below
CREATE TYPE rag.search_hit AS (id int, source_file text, chunk_index int, level int, node_type text, heading_path text, parent_source_file text, content text, content_token_count int, book text, node_order int, paragraph int, score float8, rank int, bm25_rank int, bm25_score float8, vector_rank int, vector_score float8, section_score float8, sentence_rank int, sentence_score float8, cites json, parent json, cited json, kind text);
DROP FUNCTION IF EXISTS rag.outline(text);  -- arguments or result changed

-- function: _types sha256:3b469e1a067e84ac0397e06eeae1a0d2b5a77c64f869f84db7be8f5f5412e231
-- Row types shared by the retrieval functions (named once, reused by every function).
--
-- What each type holds: COMMENT ON TYPE below (\dT+ rag.*).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'search_hit') THEN
        CREATE TYPE rag.search_hit AS (
            id                  INT,
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            parent_source_file  TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT,
            score               FLOAT8,
            rank                INT,
            bm25_rank           INT,
            bm25_score          FLOAT8,
            vector_rank         INT,
            vector_score        FLOAT8,
            section_score       FLOAT8,
            sentence_rank       INT,
            sentence_score      FLOAT8,
            cites               JSON,
            parent              JSON,
            cited               JSON,
            kind                TEXT
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'node_chunk') THEN
        CREATE TYPE rag.node_chunk AS (
            id                  INT,
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            parent_source_file  TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'context_row') THEN
        CREATE TYPE rag.context_row AS (
            source_file         TEXT,
            chunk_index         INT,
            level               INT,
            node_type           TEXT,
            heading_path        TEXT,
            content             TEXT,
            content_token_count INT,
            book                TEXT,
            node_order          INT,
            paragraph           INT,     -- the chunk's paragraph number in its file (§N)
            role                TEXT,    -- 'hit', 'parent' (build_context); 'child', 'omitted' (get_children)
            hit_rank            INT,     -- rank of the hit that brought this row in (NULL for children)
            used_tokens         INT      -- running total of tokens in reading order
        );
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'candidate') THEN
        CREATE TYPE rag.candidate AS (id INT, s FLOAT8, r INT, lvl INT, sf TEXT, pf TEXT);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'fused') THEN
        CREATE TYPE rag.fused AS (id INT, br INT, bs FLOAT8, vr INT, vs FLOAT8, lvl INT, sf TEXT, pf TEXT,
                                  fused FLOAT8, floor FLOAT8, rank INT);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'search_settings') THEN
        CREATE TYPE rag.search_settings AS (
            fusion TEXT, normalisation TEXT, bm25_weight FLOAT8, vector_weight FLOAT8, rrf_k INT,
            chapter_weight FLOAT8, hybrid_pool INT, sections INT, section_weight FLOAT8, pool INT,
            vector_pool INT, sentence_after INT, sentence_every INT);
    END IF;
END
$$;
COMMENT ON TYPE rag.search_hit IS 'One ranked chunk (every search): the node columns (paragraph: its 1-based paragraph number in its file, the §N anchors cite), score (higher is better), rank 1..k, bm25_rank/bm25_score and vector_rank/vector_score (NULL where a branch did not read it), section_score (two-stage: its section''s; hybrid: its chapter''s), sentence_rank/sentence_score (rows the sentence branch placed), cites (what a summary hit''s anchors cite, the end notes a paragraph calls, JSON), parent and cited (JSON, when rag.search expands them), kind (''author_summary'': the author''s own summary of its section; ''text'' otherwise).';
COMMENT ON TYPE rag.node_chunk IS 'One row of a node in reading order (get_node, get_parent): the node columns.';
COMMENT ON TYPE rag.context_row IS 'One row of a read within a token budget, reading order: role hit or parent (build_context, pack_context; hit_rank the hit that brought it) or child / omitted (get_children: an omitted child has no content and its size in content_token_count); used_tokens the running total.';
COMMENT ON TYPE rag.candidate IS 'One row a retrieval branch read (rag._bm25, rag._knn): id, raw score s, branch rank r, level, source_file, parent_source_file.';
COMMENT ON TYPE rag.fused IS 'One candidate after rag._fuse: branch ranks and raw scores (br, bs, vr, vs), lvl, sf, pf, fused score, floor (a row no branch read), rank in the fused list.';
COMMENT ON TYPE rag.search_settings IS 'The tuning of one search: names, defaults and bounds in rag._settings.';

-- function: _dress sha256:55b479b200dbb5a35edc5847a9dbd0b5be5b5382bee896580fde588ded07feff
-- rag._dress: search hits with their cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag._dress(
    p_hits   rag.search_hit[],
    p_expand TEXT[]
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Returns p_hits in rank order with cites filled (rag.cites: what a summary hit's anchors cite,
the end notes a paragraph calls), parent when p_expand has 'parent' (the parent node's rows, JSON, '[]' without one)
and cited when it has 'cited' (rag.get_citations, JSON); the other columns as given.
Cost: a lookup per hit, per distinct parent ('parent'), per hit ('cited').
*/
    WITH h AS (
        SELECT * FROM unnest(p_hits)
    ), parents AS (  -- each parent node's rows as JSON, built once however many hits share it
        SELECT f.file, (SELECT json_agg(row_to_json(p) ORDER BY p.chunk_index) FROM rag.get_node(f.file) p) AS rows
        FROM (SELECT DISTINCT h.parent_source_file AS file FROM h
              WHERE 'parent' = ANY(p_expand) AND h.parent_source_file IS NOT NULL) f
    )
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           rag.cites(h.source_file, h.chunk_index),
           CASE WHEN 'parent' = ANY(p_expand) THEN coalesce(parents.rows, '[]'::json) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END,
           h.kind
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;

-- function: _hybrid sha256:be716531101fcd06103f7b1495d7af435ca7c40b5bc133069b4d2a741d178497
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
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, top.rank;
END
$$;

-- function: _interleave sha256:60c3c19bcf5233725bfd16f029d8280ce39cfb37b1f79fb0029cb88780e9dbe3
-- rag._interleave: a mode's list and the sentence branch's merged into the places the fusion settings give the branch.
CREATE OR REPLACE FUNCTION rag._interleave(
    p_rows      rag.search_hit[],
    p_sentences rag.search_hit[],
    p_after     INT,
    p_every     INT,
    p_k         INT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns at most p_k rows ranked 1..k: place p is the sentence branch's (p_sentences) when
p > p_after and (p - p_after - 1) % p_every = 0, p_rows's otherwise; each place takes its
list's next row whose paragraph is not placed yet (a p_rows row: not placed by the branch), so
a paragraph both hold takes the better place; a list that runs out leaves its places to the
other. A placed branch row takes the branch columns of the same chunk later in p_rows.
Cost: a loop over at most 3k rows in memory.
*/
DECLARE
    f_keys  TEXT[] := '{}';
    s_keys  TEXT[] := '{}';
    v_fi    INT := 1;
    v_si    INT := 1;
    v_n     INT := 0;
    v_seen  TEXT[] := '{}';    -- the keys placed so far, and those the sentence branch placed
    v_seen_s TEXT[] := '{}';
    v_take  BOOLEAN;
    f_rows  rag.search_hit[] := coalesce(p_rows, '{}');
    s_rows  rag.search_hit[] := coalesce(p_sentences, '{}');
    r       rag.search_hit;
BEGIN
    FOR i IN 1 .. cardinality(f_rows) LOOP
        f_keys[i] := CASE WHEN (f_rows[i]).level = 0 THEN (f_rows[i]).source_file || '#' || (f_rows[i]).paragraph
                          ELSE (f_rows[i]).id::text END;
    END LOOP;
    FOR i IN 1 .. cardinality(s_rows) LOOP
        s_keys[i] := (s_rows[i]).source_file || '#' || (s_rows[i]).paragraph;
    END LOOP;
    WHILE v_n < p_k AND (v_fi <= cardinality(f_rows) OR v_si <= cardinality(s_rows)) LOOP
        v_take := (v_si <= cardinality(s_rows) AND v_n >= p_after AND (v_n - p_after) % p_every = 0)
                  OR v_fi > cardinality(f_rows);
        IF v_take THEN
            WHILE v_si <= cardinality(s_rows) AND s_keys[v_si] = ANY(v_seen) LOOP
                v_si := v_si + 1;
            END LOOP;
            CONTINUE WHEN v_si > cardinality(s_rows);
            r := s_rows[v_si];
            FOR i IN v_fi .. cardinality(f_rows) LOOP  -- the same chunk later in the mode's list: its branch columns too
                IF (f_rows[i]).id = r.id THEN
                    r.bm25_rank := (f_rows[i]).bm25_rank;
                    r.bm25_score := (f_rows[i]).bm25_score;
                    r.vector_rank := (f_rows[i]).vector_rank;
                    r.vector_score := (f_rows[i]).vector_score;
                    r.section_score := (f_rows[i]).section_score;
                    EXIT;
                END IF;
            END LOOP;
            v_seen := v_seen || s_keys[v_si];
            v_seen_s := v_seen_s || s_keys[v_si];
            v_si := v_si + 1;
        ELSE
            WHILE v_fi <= cardinality(f_rows) AND f_keys[v_fi] = ANY(v_seen_s) LOOP
                v_fi := v_fi + 1;
            END LOOP;
            CONTINUE WHEN v_fi > cardinality(f_rows);
            r := f_rows[v_fi];
            v_seen := v_seen || f_keys[v_fi];
            v_fi := v_fi + 1;
        END IF;
        v_n := v_n + 1;
        r.rank := v_n;
        RETURN NEXT r;
    END LOOP;
END
$$;

-- function: _search_hits sha256:7558eeb26998bc777cb58e22267ab074bed92da8be43fd8823d2136cbe4cf857
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
    b_of    INT[];
    b_all   rag.candidate[];
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
        SELECT array_agg(x.wording ORDER BY x.wording, (x.c).r), array_agg(x.c ORDER BY x.wording, (x.c).r)
        INTO b_of, b_all FROM rag._bm25(p_queries, p_k, p_book, p_levels, v_ids) x;
        RETURN QUERY  -- (from arrays: the planner sees a few rows and looks each one up)
        SELECT u.w, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               u.s, u.r, u.r, u.s, NULL::int, NULL::float8,
               NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
        FROM unnest(b_of, b_all) AS u(w, id, s, r, lvl, sf, pf)
        JOIN rag.hierarchical_content_nodes n ON n.id = u.id
        ORDER BY u.w, u.r;
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
                   NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
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

-- function: _sentences sha256:d24e231120346a5218b20e82aba21c22e7d14c35836ce257b5dd85999767bdf7
-- rag._sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag._sentences(
    p_model  TEXT,
    p_vector vector,
    p_k      INT,
    p_book   TEXT,
    p_ids    INT[]
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
AS $$
/*
Returns at most p_k paragraphs, best first: those cited by the 2 x p_k chapter-summary
sentences (rag.sentences) nearest to p_vector, each scored by its best citing sentence's
similarity (sentence_score, sentence_rank; ties by its own similarity), by its chunk nearest the
query. The sentences come from the halfvec HNSW index (rag._knn_sentences), or exactly within
p_ids's subtree. Cost: one HNSW scan of 2 x p_k sentences, a lookup per paragraph.
*/
BEGIN
    IF p_ids IS NULL THEN
        PERFORM rag._set_hnsw(2 * p_k);
    END IF;
    RETURN QUERY
    WITH s AS (
        SELECT k.cited_source_file AS f, k.cited_paragraphs AS ps, k.distance AS d
        FROM rag._knn_sentences(p_model, p_vector, 2 * p_k, p_book) k WHERE p_ids IS NULL
        UNION ALL
        SELECT * FROM (
            SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> p_vector)::float8
            FROM rag.sentences st
            WHERE p_ids IS NOT NULL AND st.embedding_model = p_model AND (p_book IS NULL OR st.book = p_book)
              AND st.cited_source_file IN (SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY(p_ids))
            ORDER BY st.embedding <=> p_vector LIMIT 2 * p_k) exact
    ), cited AS (
        SELECT s.f, c.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS c(n) GROUP BY s.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (
        SELECT c.*, para.sim FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, n.kind,
                   CASE WHEN n.embedding_model = p_model THEN 1 - (n.embedding <=> p_vector) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (p_ids IS NULL OR n.id = ANY(p_ids))
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, (row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id))::int AS r FROM one
    )
    SELECT t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
           t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
           t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
           NULL::json, NULL::json, NULL::json, t.kind
    FROM top t WHERE t.r <= p_k ORDER BY t.r;
END
$$;

-- function: _two_stage sha256:58a345d9085f81e674aac57186d955fa134d97214d44a9e18f3b3a55f1fcd7ef
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
               x.final, x.r, x.br, x.bs, x.vr, x.vs, x.sc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
        FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
        ORDER BY x.r;
    END LOOP;
END
$$;

-- function: cites sha256:27764444c0befae88d97d21ee7fab1c7c256c59f1454c050375c60f740251b5a
-- rag.cites: what one chunk cites (a summary's anchors, a paragraph's end-note calls), as JSON.
CREATE OR REPLACE FUNCTION rag.cites(
    p_source_file TEXT,
    p_chunk_index INT
) RETURNS JSON
LANGUAGE sql STABLE
AS $$
/*
Returns [{source_file, paragraphs}] for the chunk (p_source_file, p_chunk_index), one object per
cited file in path order: a chapter summary's chunk cites paragraphs of its section's source.md
(paragraphs sorted, [§12–14] expanded), a part or book summary's chunk cites child summaries
whole (paragraphs null), a source paragraph the end notes it calls, "(_A_)", whole (paragraphs
null). '[]' for a chunk that cites nothing. rag.search fills its `cites` column with it; the MCP
get_node tool shows it per chunk. Rows themselves:
rag.get_citations. A SQL function the caller's statement inlines.
Cost: one index scan of rag.citations (its primary key order) per call.
*/
    SELECT coalesce((
        SELECT json_agg(json_build_object('source_file', c.f, 'paragraphs', c.p) ORDER BY c.f)
        FROM (SELECT ct.cited_source_file AS f,
                     array_agg(ct.cited_paragraph ORDER BY ct.cited_paragraph)
                         FILTER (WHERE ct.cited_paragraph IS NOT NULL) AS p
              FROM rag.citations ct
              WHERE ct.source_file = p_source_file AND ct.chunk_index = p_chunk_index
              GROUP BY ct.cited_source_file) c), '[]'::json);
$$;

-- function: get_citations sha256:6559a0853431298a8fa0a2efb903c108196272e5e8ea309d02e132f9d446389a
-- rag.get_citations: what a chunk cites: a summary's paragraphs, a paragraph's end notes.
CREATE OR REPLACE FUNCTION rag.get_citations(
    p_source_file TEXT,
    p_chunk_index INT DEFAULT NULL
) RETURNS TABLE (
    citing_chunk_index  INT,
    id                  INT,
    source_file         TEXT,
    chunk_index         INT,
    paragraph           INT,
    level               INT,
    node_type           TEXT,
    heading_path        TEXT,
    parent_source_file  TEXT,
    content             TEXT,
    content_token_count INT,
    book                TEXT,
    node_order          INT
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the rows cited by the anchors ([§12–14], docs/anchors.md) of one summary chunk, or of
every chunk of the summary when p_chunk_index is NULL: for a chapter summary, the chunks of the
cited paragraphs of its source.md (every chunk of a paragraph split in several); for a part or
book summary, every row of each cited child summary; for a paragraph (level 0) that calls end
notes, every row of each note. Ordered by citing chunk, then reading
order; a row cited twice by one chunk appears once. citing_chunk_index says which chunk of
p_source_file cites the row.
Parameters:
  p_source_file  the citing node (a summary, or a source.md). Required; unknown -> error.
  p_chunk_index  one chunk of it, 0..chunk_count-1, or NULL for all (default).
Edge cases: a summary without anchors, a paragraph calling no note -> no rows.
Cost: index lookups on rag.citations and (source_file, paragraph); < 1 ms for a chapter.
*/
DECLARE
    v_chunks INT;
BEGIN
    SELECT count(*) INTO v_chunks FROM rag.hierarchical_content_nodes n WHERE n.source_file = p_source_file;
    IF v_chunks = 0 THEN
        RAISE EXCEPTION 'no node "%"; use a source_file from a search hit or the outline', p_source_file
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_chunk_index IS NOT NULL AND (p_chunk_index < 0 OR p_chunk_index >= v_chunks) THEN
        RAISE EXCEPTION 'chunk_index must be between 0 and % for %, got %', v_chunks - 1, p_source_file, p_chunk_index
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT DISTINCT ON (c.chunk_index, n.node_order, n.chunk_index)
           c.chunk_index, n.id, n.source_file, n.chunk_index, n.paragraph, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order
    FROM rag.citations c
    JOIN rag.hierarchical_content_nodes n
      ON n.source_file = c.cited_source_file AND (c.cited_paragraph IS NULL OR n.paragraph = c.cited_paragraph)
    WHERE c.source_file = p_source_file AND (p_chunk_index IS NULL OR c.chunk_index = p_chunk_index)
    ORDER BY c.chunk_index, n.node_order, n.chunk_index;
END
$$;

-- function: outline sha256:098a86c1d2b2ef4d4bd3288e65164937e12cf31dc0236a90468e908e5a06dda3
-- rag.outline: a book's table of contents: one row per node, in document order.
CREATE OR REPLACE FUNCTION rag.outline(
    p_book TEXT
) RETURNS TABLE (
    source_file        TEXT,
    parent_source_file TEXT,
    level              INT,
    node_type          TEXT,
    heading_path       TEXT,
    node_order           INT,
    chunk_count        INT,
    tokens             INT,
    embedded           BOOLEAN,
    depth              INT,
    author_summaries   INT[]
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns every node (file) of p_book in document order (preorder of the summary tree: the book
summary, then each front-matter or part summary followed by what it covers), with its size in
chunks and tokens, whether it carries vectors, its depth in the tree (0 the book, 1 a part or
front matter, 2 a chapter, 3 a chapter's section…; a source.md one below its summary), read from
its folder, since levels stop at 3, and the paragraphs (§N) that are the author's own summaries
(kind 'author_summary'; NULL when none). Unknown book: error naming the known books.
Cost: one index scan over the book's rows, grouped by file.
*/
BEGIN
    PERFORM rag._check_search_args(NULL, 1, p_book, NULL, false);
    IF p_book IS NULL THEN
        RAISE EXCEPTION 'book is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT n.source_file, min(n.parent_source_file), min(n.level), min(n.node_type), min(n.heading_path),
           min(n.node_order), count(*)::int, sum(coalesce(n.content_token_count, 0))::int,
           bool_or(n.embedding IS NOT NULL),
           cardinality(string_to_array(n.source_file, '/')) - 3 + (min(n.node_type) = 'source')::int,
           array_agg(DISTINCT n.paragraph ORDER BY n.paragraph) FILTER (WHERE n.kind = 'author_summary')
    FROM rag.hierarchical_content_nodes n
    WHERE n.book = p_book
    GROUP BY n.source_file
    ORDER BY min(n.node_order), n.source_file;
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

GRANT EXECUTE ON FUNCTION rag.outline(text) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search(text, vector, text, int, text, int[], text, text[], text, jsonb) TO bookrag_reader;
GRANT EXECUTE ON FUNCTION rag.search_phrasings(text, vector, text[], vector[], int, text, int[], text, text[], text, text, text) TO bookrag_reader;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_types', '3b469e1a067e84ac0397e06eeae1a0d2b5a77c64f869f84db7be8f5f5412e231', '0030_books_as_they_are'),
    ('_dress', '55b479b200dbb5a35edc5847a9dbd0b5be5b5382bee896580fde588ded07feff', '0030_books_as_they_are'),
    ('_hybrid', 'be716531101fcd06103f7b1495d7af435ca7c40b5bc133069b4d2a741d178497', '0030_books_as_they_are'),
    ('_interleave', '60c3c19bcf5233725bfd16f029d8280ce39cfb37b1f79fb0029cb88780e9dbe3', '0030_books_as_they_are'),
    ('_search_hits', '7558eeb26998bc777cb58e22267ab074bed92da8be43fd8823d2136cbe4cf857', '0030_books_as_they_are'),
    ('_sentences', 'd24e231120346a5218b20e82aba21c22e7d14c35836ce257b5dd85999767bdf7', '0030_books_as_they_are'),
    ('_two_stage', '58a345d9085f81e674aac57186d955fa134d97214d44a9e18f3b3a55f1fcd7ef', '0030_books_as_they_are'),
    ('cites', '27764444c0befae88d97d21ee7fab1c7c256c59f1454c050375c60f740251b5a', '0030_books_as_they_are'),
    ('get_citations', '6559a0853431298a8fa0a2efb903c108196272e5e8ea309d02e132f9d446389a', '0030_books_as_they_are'),
    ('outline', '098a86c1d2b2ef4d4bd3288e65164937e12cf31dc0236a90468e908e5a06dda3', '0030_books_as_they_are'),
    ('search', 'cf34255699cf4e766a7fc13d213e86949a12fce677531a668062b9f44a5831c0', '0030_books_as_they_are'),
    ('search_phrasings', 'ec1b896713bfe223b209ba47543501cbe4ae21573b96124b57dd95e1bfb8988b', '0030_books_as_they_are')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
