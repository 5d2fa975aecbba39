-- 0039_pin_search_path: every plpgsql function names its own search_path (pg_catalog, public): a client whose session or role sets another path still searches (issue 43)
-- depends: 0038_check_quotes

-- function: _bm25 sha256:e4db3d55e4df095901650718b052893a2d781cef381b39741917e414abc75e0f
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
SET search_path = pg_catalog, public
AS $$
/*
Returns, for each p_queries[wording], the p_n rows best matching it (pg_search BM25, French
stemming, any term: |||; never parsed) as rag.candidate: s the score, r 1..p_n (ties by id, the
cut included); filters p_book, p_levels, p_ids, p_parents (NULL for none). Rows by wording, then r.
Cost: one statement, one top-N scan per wording; planned at each call, the limit and filters
written in, so pg_search pushes both into its scan (decision 37).
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

-- function: _check_quote sha256:c09c59b85609b0dd7c78ec1a14af6e4e54966a200d6653a017553935895d275f
-- rag._check_quote: one quote checked against the book (rag.check_quotes checks a batch).
CREATE OR REPLACE FUNCTION rag._check_quote(
    p_quote       TEXT,
    p_source_file TEXT DEFAULT NULL,
    p_paragraph   INT DEFAULT NULL,
    p_book        TEXT DEFAULT NULL
) RETURNS TABLE (
    verdict        TEXT,
    source_file    TEXT,
    paragraph      INT,
    paragraph_last INT,
    book_words     TEXT,
    differences    TEXT[],
    note           TEXT
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns one row: the verdict on p_quote cited at p_source_file §p_paragraph (either or both may be
NULL; p_book, a book slug, narrows the search when no file is cited), and where its words are.
The verdicts, the first that holds, and the rules: rag.check_quotes's header.
Steps: the cited paragraph (and it joined with its neighbour, for a quote across two); the
paragraphs rag._bm25 ranks first for the quote's words (20, level 0: the book; those of the cited
file first, nearest first), each verified word for word, alone then with a neighbour, the first
that holds the words ending the search; every paragraph of the cited file (what BM25 may miss);
the same BM25 look-up over the summaries (levels 1-3, 10 of them); then the alignment
(rag._quote_align) with the cited paragraph, else the 3 best-ranked paragraphs.
Cost: about 1 ms when the cited paragraph holds the words; one BM25 scan and one paragraph read
per candidate tried when it does not.
*/
DECLARE
    v_pieces  TEXT[] := rag._quote_pieces(p_quote);
    v_words   TEXT[];
    v_query   TEXT;
    v_sf      TEXT := p_source_file;
    v_p       INT := p_paragraph;
    v_level   INT;
    v_last    INT;
    v_notes   TEXT[] := '{}';
    v_cand_sf TEXT[];
    v_cand_p  INT[];
    v_max     INT;
    v_text    TEXT;
    r         RECORD;
    a         RECORD;
    v_books   TEXT[];
    v_ids     INT[];
BEGIN
    v_words := string_to_array(array_to_string(v_pieces, ' '), ' ');
    v_query := array_to_string(v_pieces, ' ');
    IF cardinality(v_pieces) = 0 THEN
        RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::int, NULL::int, NULL::text, NULL::text[],
            'the quote has no word to check'::text;
        RETURN;
    END IF;

    -- the citation: a loaded file, a paragraph it has
    IF v_sf IS NOT NULL THEN
        SELECT min(n.level), max(n.paragraph) INTO v_level, v_last
        FROM rag.hierarchical_content_nodes n WHERE n.source_file = v_sf;
        IF v_level IS NULL THEN
            v_notes := v_notes || format('no file %s is loaded (use the source_file a tool printed); the words were looked for everywhere', v_sf);
            v_sf := NULL;
            v_p := NULL;
        ELSIF v_p IS NOT NULL AND (v_p < 1 OR v_last IS NULL OR v_p > v_last) THEN
            v_notes := v_notes || format('%s has paragraphs §1–§%s: there is no §%s', v_sf, coalesce(v_last, 0), v_p);
            v_p := NULL;
        END IF;
    ELSIF v_p IS NOT NULL THEN
        v_notes := v_notes || format('§%s without its source_file names no place', v_p);
        v_p := NULL;
    END IF;
    IF p_book IS NOT NULL AND v_sf IS NULL AND NOT EXISTS (SELECT 1 FROM rag.books b WHERE b.book = p_book) THEN
        v_notes := v_notes || format('no book %s is loaded; the words were looked for in every book', p_book);
    END IF;

    -- 1. the cited paragraph holds the words (alone, or it and a neighbour across their break)
    IF v_sf IS NOT NULL AND v_level = 0 AND v_p IS NOT NULL THEN
        IF rag._quote_in(rag._quote_words(rag._paragraph_text(v_sf, v_p, v_p)), v_pieces) THEN
            RETURN QUERY SELECT 'exact'::text, v_sf, v_p, v_p, NULL::text, NULL::text[],
                nullif(array_to_string(v_notes, '; '), '');
            RETURN;
        END IF;
        FOR r IN SELECT x.a, x.b FROM (VALUES (v_p, v_p + 1), (v_p - 1, v_p)) AS x(a, b)
                 WHERE x.a >= 1 AND x.b <= v_last LOOP
            IF rag._quote_in(rag._quote_words(rag._paragraph_text(v_sf, r.a, r.b)), v_pieces)
               AND NOT rag._quote_in(rag._quote_words(rag._paragraph_text(v_sf, r.b, r.b)), v_pieces)
               AND NOT rag._quote_in(rag._quote_words(rag._paragraph_text(v_sf, r.a, r.a)), v_pieces) THEN
                RETURN QUERY SELECT 'exact'::text, v_sf, r.a, r.b, NULL::text, NULL::text[],
                    array_to_string(v_notes || format('the quote runs across two paragraphs, §%s–§%s', r.a, r.b), '; ');
                RETURN;
            END IF;
        END LOOP;
    END IF;

    -- 2. elsewhere: the paragraphs BM25 ranks first for the quote's words (those of the cited file
    -- first, nearest first), each alone, then each with a neighbour; then every paragraph of the cited file
    v_books := CASE WHEN p_book IS NOT NULL AND v_sf IS NULL THEN ARRAY[p_book, NULL] ELSE ARRAY[NULL] END;
    FOR i IN 1 .. cardinality(v_books) LOOP
        SELECT array_agg((x.c).id ORDER BY (x.c).r) INTO v_ids
        FROM rag._bm25(ARRAY[v_query], 20, v_books[i], ARRAY[0]) x;
        SELECT array_agg(z.sf ORDER BY z.o), array_agg(z.p ORDER BY z.o) INTO v_cand_sf, v_cand_p
        FROM (SELECT n.source_file AS sf, n.paragraph AS p,
                     min(CASE WHEN n.source_file = v_sf THEN abs(n.paragraph - coalesce(v_p, 0)) - 1000000 ELSE u.o END) AS o
              FROM unnest(v_ids) WITH ORDINALITY AS u(id, o)
              JOIN rag.hierarchical_content_nodes n ON n.id = u.id
              WHERE n.paragraph IS NOT NULL AND NOT coalesce(n.source_file = v_sf AND n.paragraph = v_p, false)
              GROUP BY n.source_file, n.paragraph) z;
        FOR j IN 1 .. coalesce(cardinality(v_cand_sf), 0) LOOP
            IF rag._quote_in(rag._quote_words(rag._paragraph_text(v_cand_sf[j], v_cand_p[j], v_cand_p[j])), v_pieces) THEN
                RETURN QUERY SELECT 'elsewhere'::text, v_cand_sf[j], v_cand_p[j], v_cand_p[j], NULL::text, NULL::text[],
                    nullif(array_to_string(v_notes, '; '), '');
                RETURN;
            END IF;
        END LOOP;
        FOR j IN 1 .. coalesce(cardinality(v_cand_sf), 0) LOOP
            FOR r IN SELECT x.a, x.b FROM (VALUES (v_cand_p[j], v_cand_p[j] + 1), (v_cand_p[j] - 1, v_cand_p[j])) AS x(a, b)
                     WHERE x.a >= 1 LOOP
                IF rag._quote_in(rag._quote_words(rag._paragraph_text(v_cand_sf[j], r.a, r.b)), v_pieces)
                   AND NOT rag._quote_in(rag._quote_words(rag._paragraph_text(v_cand_sf[j], r.a, r.a)), v_pieces)
                   AND NOT rag._quote_in(rag._quote_words(rag._paragraph_text(v_cand_sf[j], r.b, r.b)), v_pieces) THEN
                    RETURN QUERY SELECT 'elsewhere'::text, v_cand_sf[j], r.a, r.b, NULL::text, NULL::text[],
                        array_to_string(v_notes || format('the quote runs across two paragraphs, §%s–§%s', r.a, r.b), '; ');
                    RETURN;
                END IF;
            END LOOP;
        END LOOP;
        EXIT WHEN v_cand_sf IS NOT NULL;  -- the named book has candidates: the words are not in it
    END LOOP;
    IF v_sf IS NOT NULL AND v_level = 0 THEN  -- what BM25 may miss (a quote of common words): the cited file, read whole
        SELECT z.a, CASE WHEN rag._quote_in(z.w, v_pieces) THEN z.a ELSE z.a + 1 END AS b INTO r
        FROM (SELECT pw.paragraph AS a, pw.w, lead(pw.w) OVER (ORDER BY pw.paragraph) AS w2,
                     lead(pw.paragraph) OVER (ORDER BY pw.paragraph) AS p2
              FROM (SELECT n.paragraph, rag._quote_words(string_agg(n.content, ' ' ORDER BY n.chunk_index)) AS w
                    FROM rag.hierarchical_content_nodes n
                    WHERE n.source_file = v_sf AND n.paragraph IS NOT NULL GROUP BY n.paragraph) pw) z
        WHERE rag._quote_in(z.w, v_pieces)
           OR (z.p2 = z.a + 1 AND rag._quote_in(z.w || ' ' || z.w2, v_pieces) AND NOT rag._quote_in(z.w2, v_pieces))
        ORDER BY NOT rag._quote_in(z.w, v_pieces), abs(z.a - coalesce(v_p, 0)), z.a
        LIMIT 1;
        IF FOUND THEN
            RETURN QUERY SELECT 'elsewhere'::text, v_sf, r.a, r.b, NULL::text, NULL::text[],
                nullif(array_to_string(v_notes || CASE WHEN r.a < r.b
                    THEN format('the quote runs across two paragraphs, §%s–§%s', r.a, r.b) END, '; '), '');
            RETURN;
        END IF;
    END IF;

    -- 3. a summary's words (levels 1-3: the project's reading aids, never the book); the cited one first
    SELECT array_agg((x.c).id ORDER BY (x.c).r) INTO v_ids
    FROM rag._bm25(ARRAY[v_query], 10, NULL, ARRAY[1, 2, 3]) x;
    FOR r IN
        SELECT n.source_file AS sf, n.paragraph AS p, n.level
        FROM unnest(v_ids) WITH ORDINALITY AS u(id, o)
        JOIN rag.hierarchical_content_nodes n ON n.id = u.id
        WHERE n.paragraph IS NOT NULL
        ORDER BY coalesce(n.source_file = v_sf AND n.paragraph = v_p, false) DESC, u.o
    LOOP
        IF rag._quote_in(rag._quote_words(rag._paragraph_text(r.sf, r.p, r.p)), v_pieces) THEN
            RETURN QUERY SELECT 'summary'::text, r.sf::text, r.p::int, r.p::int, NULL::text, NULL::text[],
                array_to_string(v_notes || format('these are the words of a summary (level %s) written for this project, '
                    'not the book''s: quote the book''s paragraphs its anchors cite instead', r.level), '; ');
            RETURN;
        END IF;
    END LOOP;

    -- 4. close: nearly the words of the cited paragraph, else of the best-ranked ones
    v_max := 1 + cardinality(v_words) / 10;
    IF cardinality(v_pieces) = 1 AND cardinality(v_words) >= 4 THEN
        FOR r IN
            SELECT t.sf, t.p FROM (
                SELECT v_sf AS sf, v_p AS p, 0 AS o WHERE v_sf IS NOT NULL AND v_level = 0 AND v_p IS NOT NULL
                UNION ALL
                SELECT c.sf, c.p, c.o FROM unnest(v_cand_sf[1:3], v_cand_p[1:3]) WITH ORDINALITY AS c(sf, p, o)) t
            ORDER BY t.o
        LOOP
            v_text := rag._paragraph_text(r.sf, r.p, r.p);
            SELECT * INTO a FROM rag._quote_align(v_words, string_to_array(rag._quote_words(v_text), ' '), v_max);
            IF FOUND THEN
                RETURN QUERY SELECT 'close'::text, r.sf::text, r.p::int, r.p::int,
                    rag._quote_span_text(v_text, a.first_word, a.last_word), a.differences,
                    nullif(array_to_string(v_notes || CASE WHEN r.sf IS DISTINCT FROM v_sf OR r.p IS DISTINCT FROM v_p
                        THEN 'nearly the words of another paragraph than the one cited'::text END, '; '), '');
                RETURN;
            END IF;
        END LOOP;
    END IF;

    RETURN QUERY SELECT 'not found'::text, NULL::text, NULL::int, NULL::int, NULL::text, NULL::text[],
        array_to_string(v_notes || CASE WHEN cardinality(v_pieces) > 1
            THEN 'the pieces between its ellipses do not stand, in that order, in one paragraph'::text
            ELSE 'neither these words nor nearly these are in a paragraph of the books or a summary'::text END, '; ');
END
$$;

-- function: _check_search_args sha256:22601199b19c62c6d9d1df243837d78df17a366c6cfd908acdc3863a94f961bd
-- Validate the arguments shared by every search function; raise a clear error on bad input.
CREATE OR REPLACE FUNCTION rag._check_search_args(
    p_query     TEXT,
    p_k         INT,
    p_book      TEXT DEFAULT NULL,
    p_levels    INT[] DEFAULT NULL,
    p_query_required BOOLEAN DEFAULT true
) RETURNS VOID
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Contract: returns nothing when the arguments are usable, raises invalid_parameter_value (22023)
otherwise, with a message naming the value and the limit:
  - p_query: required unless p_query_required is false; empty or whitespace-only is an error;
    longer than 10,000 characters is an error. Operators, quotes and punctuation are not
    errors: BM25 tokenizes the string, it never parses a query language.
  - p_k: between 1 and 1000.
  - p_book: NULL (all books) or a book present in rag.books.
  - p_levels: NULL or a non-empty array of values within 0..3.
*/
DECLARE
    v_known TEXT;
BEGIN
    IF p_query_required AND (p_query IS NULL OR btrim(p_query, E' \t\r\n') = '') THEN
        RAISE EXCEPTION 'query is empty: give at least one word to search for'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query IS NOT NULL AND length(p_query) > 10000 THEN
        RAISE EXCEPTION 'query is % characters long; the limit is 10000', length(p_query)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_k IS NULL OR p_k < 1 OR p_k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, got %', coalesce(p_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_book IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rag.books b WHERE b.book = p_book) THEN
        SELECT string_agg(b.book, ', ' ORDER BY b.book) INTO v_known FROM rag.books b;
        RAISE EXCEPTION 'unknown book "%"; known books: %', p_book, coalesce(v_known, '(none loaded)')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_levels IS NOT NULL AND cardinality(p_levels) = 0 THEN
        RAISE EXCEPTION 'levels is empty: omit it to search every level, or give some of 0..3'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_levels IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_levels) l WHERE l IS NULL OR l NOT BETWEEN 0 AND 3) THEN
        RAISE EXCEPTION 'levels must be within 0..3, got %', p_levels
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _corpus_model sha256:02f79d3932e30f73b2af33b4c6a0a592417a2ec73afcf471564394a8e270517d
-- The corpus embedding model and its dimension, checked against a query embedding.
CREATE OR REPLACE FUNCTION rag._corpus_model(
    p_query_embedding vector,
    OUT model TEXT,
    OUT dimension INT
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the single model registered in rag.embedding_models (model NULL when no vector was
ever loaded: the kNN branch is then empty). Raises invalid_parameter_value when
p_query_embedding's length differs from the model's dimension, or when several models are
registered (the loader keeps one; two models' vectors are never compared).
*/
DECLARE
    v_count INT;
BEGIN
    SELECT count(*) INTO v_count FROM rag.embedding_models;
    IF v_count > 1 THEN
        RAISE EXCEPTION 'several embedding models are registered (%); reload the corpus with one model',
            (SELECT string_agg(m.model, ', ') FROM rag.embedding_models m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.model, m.dimension INTO model, dimension FROM rag.embedding_models m;
    IF model IS NOT NULL AND p_query_embedding IS NOT NULL AND vector_dims(p_query_embedding) <> dimension THEN
        RAISE EXCEPTION 'query embedding has % dimensions; the corpus model "%" has %',
            vector_dims(p_query_embedding), model, dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- function: _ensure_vector_index sha256:ec8642e547387020b30a22887455902457de7e8e21da913c4a5f6841f4a44763
-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public
AS $$
/*
Registers (p_model, p_dimension) and creates, if missing, the partial HNSW cosine indexes of its
rows: chunks on embedding::vector(p_dimension) (hcn_hnsw_…), sentences on
embedding::halfvec(p_dimension) (sent_halfvec_…; a component beyond 65504 fails the build,
naming it); drops the former sent_hnsw_… index; writes the model's scans
(rag._install_model_scans). Returns the chunks' index name. Another dimension for a registered
model is an error. Cost: O(rows) to build (100k 384-d rows: 140 s), instant when they exist.
*/
DECLARE
    v_dim   INT;
    v_tag   TEXT := substr(md5(p_model), 1, 12);  -- the model's suffix in its index names
    v_index TEXT := 'hcn_hnsw_' || v_tag;
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL AND v_dim <> p_dimension THEN
        RAISE EXCEPTION 'model "%" is registered with dimension %, not %', p_model, v_dim, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_dim IS NULL THEN
        INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES (p_model, p_dimension, v_index);
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.hierarchical_content_nodes '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
        v_index, p_dimension, p_model);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.sentences '
        'USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) WHERE embedding_model = %L',
        'sent_halfvec_' || v_tag, p_dimension, p_model);
    -- the old index dropped after the build, so that searches (which the build's SHARE lock lets
    -- run) wait for the DROP's exclusive lock only from here to the commit
    IF to_regclass(format('rag.%I', 'sent_hnsw_' || v_tag)) IS NOT NULL THEN  -- (no notice when absent)
        EXECUTE format('DROP INDEX rag.%I', 'sent_hnsw_' || v_tag);
    END IF;
    PERFORM rag._install_model_scans(p_model, p_dimension);
    RETURN v_index;
END
$$;

-- function: _hybrid sha256:c245e1b354fccecbc3458b80487080b37193c7bbd3dcb3d533d2cd8440cbe171
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
SET search_path = pg_catalog, public
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

-- function: _install_model_scans sha256:c63f7a9a0d931a749bc63cca8244386130363416ed2e5a272d07217293a6515f
-- rag._install_model_scans: write the corpus model's kNN scans as inlinable SQL functions (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_scans(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public
AS $$
/*
Writes rag._knn and rag._knn_sentences for p_model (rag._scan_sql's text as inlinable SQL
functions, so callers' static statements cache the index scan; no ranking in them), keeping
their identity and privileges; returns p_model. Run at each load (rag._ensure_vector_index) and
by `bookrag migrate`. A model with a $ keeps the stand-ins (NOTICE). Cost: milliseconds.
*/
BEGIN
    IF strpos(p_model, '$') > 0 THEN
        RAISE NOTICE 'model "%" has a $ in its name: its kNN scans stay planned per call', p_model;
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn(p_model TEXT, p_vector vector, p_n INT, p_book TEXT DEFAULT NULL, '
                   'p_levels INT[] DEFAULT NULL, p_ids INT[] DEFAULT NULL) RETURNS SETOF rag.candidate '
                   'LANGUAGE sql STABLE AS %L', rag._scan_sql('nodes', p_model, p_dimension));
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn_sentences(p_model TEXT, p_vector vector, p_n INT, '
                   'p_book TEXT DEFAULT NULL) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], '
                   'distance FLOAT8) LANGUAGE sql STABLE AS %L', rag._scan_sql('sentences', p_model, p_dimension));
    RETURN p_model;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_scans(TEXT, INT) FROM bookrag_reader;

-- function: _interleave sha256:34e9cb9f753289ea61a11accf5fc9b2131164be246739db5390dc19fee2b2464
-- rag._interleave: a mode's list and the sentence branch's merged into the places the fusion settings give the branch.
CREATE OR REPLACE FUNCTION rag._interleave(
    p_rows      rag.search_hit[],
    p_sentences rag.search_hit[],
    p_after     INT,
    p_every     INT,
    p_k         INT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, public
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

-- function: _knn sha256:6ecc3ac8da130ade968b4f1cec5ff86c66ad2db32242574e27a5942f6fb94cc5
-- rag._knn: the kNN branch's candidates (pgvector HNSW); as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL,
    p_levels INT[] DEFAULT NULL,
    p_ids    INT[] DEFAULT NULL
) RETURNS SETOF rag.candidate
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_n rows of p_model nearest to p_vector (rag.candidate: s the cosine similarity),
filtered by p_book, p_levels, p_ids. This file's version EXECUTEs rag._scan_sql('nodes', …);
rag._install_model_scans replaces it with that text as inlinable SQL for the corpus model.
The caller sets ef_search (rag._set_hnsw). Cost: one HNSW scan.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('nodes', p_model, v_dim) USING p_model, p_vector, p_n, p_book, p_levels, p_ids;
    END IF;
END
$$;

-- function: _knn_sentences sha256:d555a4fbad1ebd4f09ea5a6d74f2d3ef63fa7b89aad2f404fec7670ec77b8df6
-- rag._knn_sentences: the summary sentences nearest to a vector; as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn_sentences(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL
) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], distance FLOAT8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_n sentences of p_model nearest to p_vector (halfvec HNSW index), as the file and
paragraphs they cite and the full-precision distance. Replaced as rag._knn is.
Cost: one HNSW scan.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('sentences', p_model, v_dim) USING p_model, p_vector, p_n, p_book;
    END IF;
END
$$;

-- function: _quote_align sha256:1defe391d3927329ec1ccbda03a45a9963ed775621cfd3d4d041e4fbb9991893
-- rag._quote_align: the span of a paragraph nearest a quote, word for word, and what differs.
CREATE OR REPLACE FUNCTION rag._quote_align(
    p_quote TEXT[],
    p_words TEXT[],
    p_max   INT
) RETURNS TABLE (distance INT, first_word INT, last_word INT, differences TEXT[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public
AS $$
/*
Returns at most one row: the span of p_words (a paragraph's words, rag._quote_words split at its
spaces) whose words are fewest edits away from the whole of p_quote (the quote's words), when
that is at most p_max edits. An edit is a word changed, a word the quote adds, a word of the book
it leaves out, or two neighbouring words in the other order (each counts one: an optimal string
alignment distance over words, the span's start and end free). first_word and last_word number
the span's words in p_words (1-based); differences says each edit in the quote's reading order,
e.g. « libre » where the book has « franc ». No row when no span is that near.
Where to look: the quote is cut into 2*p_max + 1 pieces; when the quote is within p_max edits of
a span, one piece at least stands in it unchanged (an edit spoils two pieces at most), so the
alignment runs only on the windows around each piece's first occurrence in p_words.
Cost: (quote words) x (window words) steps per window, about 1 ms for a 40-word quote.
*/
DECLARE
    m       INT := coalesce(cardinality(p_quote), 0);
    n       INT := coalesce(cardinality(p_words), 0);
    k       INT;
    padded  TEXT := ' ' || array_to_string(p_words, ' ') || ' ';
    s0      INT;
    s1      INT;
    pos     INT;
    w       INT;
    lows    INT[] := '{}';
    highs   INT[] := '{}';
    win     RECORD;
    t       TEXT[];
    l       INT;
    d       INT[];
    c       INT;
    v       INT;
    i       INT;
    j       INT;
    jb      INT;
    best    INT := NULL;
    edits   TEXT[];
BEGIN
    IF m = 0 OR n = 0 OR p_max < 0 THEN
        RETURN;
    END IF;
    k := least(m, 2 * p_max + 1);
    FOR s IN 0 .. k - 1 LOOP
        s0 := 1 + (s * m) / k;
        s1 := ((s + 1) * m) / k;
        pos := strpos(padded, ' ' || array_to_string(p_quote[s0:s1], ' ') || ' ');
        IF pos > 0 THEN
            w := pos - length(replace(substr(padded, 1, pos), ' ', ''));  -- the piece's first word in p_words
            lows := lows || greatest(1, w - (s0 - 1) - p_max);
            highs := highs || least(n, w - (s0 - 1) + m - 1 + p_max);
        END IF;
    END LOOP;
    -- windows overlapping one another are aligned once, as one
    FOR win IN
        SELECT min(lo) AS lo, max(hi) AS hi FROM (
            SELECT lo, hi, sum(CASE WHEN lo <= prev_hi + 1 THEN 0 ELSE 1 END) OVER (ORDER BY lo, hi) AS grp
            FROM (SELECT lo, hi, max(hi) OVER (ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_hi
                  FROM unnest(lows, highs) AS u(lo, hi)) a) b
        GROUP BY grp ORDER BY 1
    LOOP
        t := p_words[win.lo:win.hi];
        l := win.hi - win.lo + 1;
        d := array_fill(0, ARRAY[(m + 1) * (l + 1)]);  -- d[i*(l+1) + j + 1]: quote words 1..i against the span ending at t[j]
        FOR i IN 1 .. m LOOP
            d[i * (l + 1) + 1] := i;
        END LOOP;
        FOR i IN 1 .. m LOOP
            FOR j IN 1 .. l LOOP
                c := CASE WHEN p_quote[i] = t[j] THEN 0 ELSE 1 END;
                v := least(d[(i - 1) * (l + 1) + j] + c, d[(i - 1) * (l + 1) + j + 1] + 1, d[i * (l + 1) + j] + 1);
                IF c = 1 AND i > 1 AND j > 1 AND p_quote[i] = t[j - 1] AND p_quote[i - 1] = t[j] THEN
                    v := least(v, d[(i - 2) * (l + 1) + j - 1] + 1);
                END IF;
                d[i * (l + 1) + j + 1] := v;
            END LOOP;
        END LOOP;
        jb := NULL;
        FOR j IN 1 .. l LOOP
            IF jb IS NULL OR d[m * (l + 1) + j + 1] < d[m * (l + 1) + jb + 1] THEN
                jb := j;
            END IF;
        END LOOP;
        v := d[m * (l + 1) + jb + 1];
        IF v > p_max OR (best IS NOT NULL AND v >= best) THEN
            CONTINUE;
        END IF;
        best := v;
        -- the edits, walked back from the span's end
        edits := '{}';
        i := m;
        j := jb;
        WHILE i > 0 LOOP
            IF j > 0 AND p_quote[i] = t[j] AND d[i * (l + 1) + j + 1] = d[(i - 1) * (l + 1) + j] THEN
                i := i - 1;
                j := j - 1;
            ELSIF i > 1 AND j > 1 AND p_quote[i] <> t[j] AND p_quote[i] = t[j - 1] AND p_quote[i - 1] = t[j]
                  AND d[i * (l + 1) + j + 1] = d[(i - 2) * (l + 1) + j - 1] + 1 THEN
                edits := format('« %s %s » in the other order: the book has « %s %s »',
                                p_quote[i - 1], p_quote[i], t[j - 1], t[j]) || edits;
                i := i - 2;
                j := j - 2;
            ELSIF j > 0 AND d[i * (l + 1) + j + 1] = d[(i - 1) * (l + 1) + j] + 1 THEN
                edits := format('« %s » where the book has « %s »', p_quote[i], t[j]) || edits;
                i := i - 1;
                j := j - 1;
            ELSIF d[i * (l + 1) + j + 1] = d[(i - 1) * (l + 1) + j + 1] + 1 THEN
                edits := format('« %s » is not in the book', p_quote[i]) || edits;
                i := i - 1;
            ELSE
                edits := format('the book has « %s » here', t[j]) || edits;
                j := j - 1;
            END IF;
        END LOOP;
        distance := v;
        first_word := win.lo + j;
        last_word := win.lo - 1 + jb;
        differences := edits;
    END LOOP;
    IF best IS NOT NULL THEN
        RETURN NEXT;
    END IF;
END
$$;

-- function: _quote_pieces sha256:e6ecf8beac65442de94c2fd4da6040a08cf6785ce8a0de6393b21552c69ef329
-- rag._quote_pieces: a quote cut at its ellipses, each piece as the words it is checked by.
CREATE OR REPLACE FUNCTION rag._quote_pieces(
    p_quote TEXT
) RETURNS TEXT[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public
AS $$
/*
Returns the pieces of p_quote between its ellipses (…, ..., [...], […], (...), (…)), each through
rag._quote_words, empty pieces left out: '{}' for a quote without a word. A quote's ellipsis
stands for words left out; the pieces must then stand in that order in one paragraph
(rag._quote_in).
Cost: one split and one rag._quote_words per piece.
*/
BEGIN
    RETURN coalesce((
        SELECT array_agg(w ORDER BY i)
        FROM regexp_split_to_table(p_quote, '\[\s*(?:…|\.{3,})\s*\]|\(\s*(?:…|\.{3,})\s*\)|…|\.{3,}')
             WITH ORDINALITY AS s(piece, i)
        CROSS JOIN LATERAL rag._quote_words(s.piece) AS w
        WHERE w <> ''), '{}');
END
$$;

-- function: _quote_span_text sha256:acfcf70b79a03cfac934c576e0b0f58354285beddadfbe41686cc728ef817eb1
-- rag._quote_span_text: a text's own words (case, punctuation, italics) for a span of its checked words.
CREATE OR REPLACE FUNCTION rag._quote_span_text(
    p_text  TEXT,
    p_first INT,
    p_last  INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public
AS $$
/*
Returns the whitespace-separated tokens of p_text that hold its words p_first..p_last (numbered
as in rag._quote_words(p_text), 1-based), joined by one space: the book's own spelling of the
span a quote was aligned with (rag._quote_align). NULL when the span holds no word.
Cost: one rag._quote_words per token of p_text.
*/
BEGIN
    RETURN (SELECT string_agg(b.tok, ' ' ORDER BY b.i)
    FROM (SELECT a.tok, a.i, a.nw, sum(a.nw) OVER (ORDER BY a.i) AS upto
          FROM (SELECT t.tok, t.i,
                       coalesce(cardinality(string_to_array(nullif(rag._quote_words(t.tok), ''), ' ')), 0) AS nw
                FROM regexp_split_to_table(p_text, '\s+') WITH ORDINALITY AS t(tok, i)) a) b
    WHERE b.nw > 0 AND b.upto - b.nw + 1 <= p_last AND b.upto >= p_first);
END
$$;

-- function: _scan_sql sha256:379ed72fa1fc9a6e4d49725d68cf72941ab164dfde022e44349b6ae2e7d24653
-- rag._scan_sql: the text of a kNN scan over one model's HNSW index (rag._knn, rag._knn_sentences).
CREATE OR REPLACE FUNCTION rag._scan_sql(
    p_scan      TEXT,
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the SELECT of one kNN scan for p_model of p_dimension, both as literals (the partial
HNSW index's expression and predicate, which a parameter cannot match):
  'nodes'      rag.candidate rows: $3 nearest to $2; $1 the expected model (else no row),
               $4 book, $5 levels, $6 ids, each NULL for none
  'sentences'  (cited file, cited paragraphs, distance) of the $3 sentences nearest to $2; $4 book
Raises invalid_parameter_value for another scan, a model with a $, a dimension out of 1..2000.
*/
BEGIN
    IF strpos(p_model, '$') > 0 OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model "%" (dimension %) cannot be written into a scan: no $ in its name, dimension 1..2000',
            p_model, p_dimension USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scan = 'nodes' THEN
        RETURN format(
            'SELECT y.id, 1 - y.d, (row_number() OVER (ORDER BY y.d, y.id))::int, y.lvl, y.sf, y.pf FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d, n.level AS lvl, '
            'n.source_file AS sf, n.parent_source_file AS pf FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL AND $1 = %2$L '
            'AND ($4::text IS NULL OR n.book = $4) AND ($5::int[] IS NULL OR n.level = ANY($5)) '
            'AND ($6::int[] IS NULL OR n.id = ANY($6)) '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $3) y', p_dimension, p_model);
    ELSIF p_scan = 'sentences' THEN
        RETURN format(
            'SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> $2)::float8 '
            'FROM rag.sentences st WHERE st.embedding_model = %2$L AND $1 = %2$L AND ($4::text IS NULL OR st.book = $4) '
            'ORDER BY st.embedding::halfvec(%1$s) <=> $2::halfvec(%1$s) LIMIT $3', p_dimension, p_model);
    END IF;
    RAISE EXCEPTION 'unknown scan "%"', p_scan USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- function: _search_hits sha256:a118a3ab9836939c0c8bdd467ce10886efc4fdf6ca29fe22aaa06ba62d032b40
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
SET search_path = pg_catalog, public
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
Cost: the mode's scans per wording; BM25's (rag._bm25) and the sentence branch's in one statement each.
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
    v_sent  BOOLEAN;
    s_of    INT[];
    s_all   rag.search_hit[];
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
    v_sent := p.sentence_every > 0 AND p.sentence_after < p_k AND v_model IS NOT NULL AND 0 = ANY(coalesce(p_levels, ARRAY[0]));
    IF v_sent THEN
        SELECT array_agg(s.wording ORDER BY s.wording, (s.hit).rank), array_agg(s.hit ORDER BY s.wording, (s.hit).rank)
        INTO s_of, s_all FROM rag._sentences(v_model, p_vectors, p_k, p_book, v_ids) s;
    END IF;
    FOR w IN 1..v_n LOOP
        f_rows := ARRAY(SELECT f_all[j] FROM generate_subscripts(f_of, 1) j WHERE f_of[j] = w ORDER BY j);
        IF v_mode = 'hybrid' OR (p_mode = 'auto' AND cardinality(f_rows) = 0) THEN
            -- 'auto' when two-stage found no paragraph (words only in summaries, no query vector):
            -- the hybrid list, summaries included, rather than nothing
            f_rows := ARRAY(SELECT h FROM rag._hybrid(p_queries[w], p_vectors[w], v_model, p_k, p_book, p_levels, v_ids, p) h
                            ORDER BY h.rank);
        END IF;
        IF NOT v_sent OR p_vectors[w] IS NULL THEN
            RETURN QUERY SELECT w, h FROM unnest(f_rows) h;
        ELSE
            RETURN QUERY SELECT w, i FROM rag._interleave(f_rows, ARRAY(SELECT s_all[j] FROM generate_subscripts(s_of, 1) j WHERE s_of[j] = w ORDER BY j),
                                                          p.sentence_after, p.sentence_every, p_k) i;
        END IF;
    END LOOP;
END
$$;

-- function: _sentences sha256:93b916f178a338072d4f47e371b3e24242cbb49b26a32f282dec3e7bb392d46d
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

-- function: _settings sha256:7eb128f8c564f55a8c06b4c71c5cfb4f230dddce04cbcf162d0ed944ad8058a2
-- rag._settings: the tuning of a search (names, defaults and bounds, defined here only).
CREATE OR REPLACE FUNCTION rag._settings(
    p_tuning JSONB DEFAULT NULL
) RETURNS rag.search_settings
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the settings a search runs with: the defaults, overridden by p_tuning's named values
(NULL or '{}' = the defaults; `SELECT * FROM rag._settings()` shows them).
  fusion 'convex' | 'rrf'; normalisation 'zscore' | 'minmax'   (rag._fuse)
  bm25_weight, vector_weight 0.5, 0.5 (finite, >= 0, not both 0); rrf_k 60 (>= 1)
  chapter_weight 0.4 (0..1), hybrid_pool 40 (1..1000)            (rag._hybrid)
  sections 5 (1..100), section_weight 0.3 (0..1), pool 100, vector_pool 40 (1..1000) (rag._two_stage)
  sentence_after 1, sentence_every 3 (0..1000; every 0 = off)    (rag._interleave)
Raises invalid_parameter_value naming the setting: unknown, of the wrong type, out of bounds.
*/
DECLARE
    s      rag.search_settings := ROW('convex', 'zscore', 0.5, 0.5, 60, 0.4, 40, 5, 0.3, 100, 40, 1, 3);
    v_bad  TEXT;
BEGIN
    IF p_tuning IS NULL OR p_tuning = '{}' THEN
        RETURN s;
    END IF;
    IF jsonb_typeof(p_tuning) <> 'object' THEN
        RAISE EXCEPTION 'tuning must be a JSON object of named settings, got %', p_tuning
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT string_agg(format('"%s"', k), ', ' ORDER BY k) INTO v_bad
    FROM jsonb_object_keys(p_tuning) k
    WHERE k NOT IN (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'unknown tuning setting %; the settings are %', v_bad,
            (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a
             WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        s := jsonb_populate_record(s, p_tuning);
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION 'tuning %: %', p_tuning, SQLERRM USING ERRCODE = 'invalid_parameter_value';
    END;
    IF s.fusion IS NULL OR s.fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got "%"', s.fusion USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.normalisation IS NULL OR s.normalisation NOT IN ('minmax', 'zscore') THEN
        RAISE EXCEPTION 'normalisation must be ''minmax'' or ''zscore'', got "%"', s.normalisation
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.bm25_weight >= 0 AND s.bm25_weight < 'Infinity' AND s.vector_weight >= 0
                    AND s.vector_weight < 'Infinity', false) THEN
        RAISE EXCEPTION 'branch weights must be finite and >= 0, got bm25 % and vector %', s.bm25_weight, s.vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.bm25_weight = 0 AND s.vector_weight = 0 THEN
        RAISE EXCEPTION 'branch weights are both 0: give at least one branch a positive weight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.rrf_k >= 1, false) THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', s.rrf_k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.chapter_weight BETWEEN 0 AND 1 AND s.section_weight BETWEEN 0 AND 1, false) THEN
        RAISE EXCEPTION 'chapter_weight and section_weight must be within 0..1, got % and %', s.chapter_weight,
            s.section_weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sections BETWEEN 1 AND 100, false) THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', s.sections USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.hybrid_pool BETWEEN 1 AND 1000 AND s.pool BETWEEN 1 AND 1000 AND s.vector_pool BETWEEN 1 AND 1000, false) THEN
        RAISE EXCEPTION 'hybrid_pool, pool and vector_pool must be between 1 and 1000, got %, % and %', s.hybrid_pool,
            s.pool, s.vector_pool USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sentence_after BETWEEN 0 AND 1000 AND s.sentence_every BETWEEN 0 AND 1000, false) THEN
        RAISE EXCEPTION 'sentence_after and sentence_every must be within 0..1000, got % and %',
            s.sentence_after, s.sentence_every USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN s;
END
$$;

-- function: _subtree_ids sha256:d23cb087ca2c161abf096aa64d1a006a9d16f2a8c9c59291d2c2efbf30950ba6
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

-- function: _two_stage sha256:74ae309eb75f569e5d19a26af48580870a7f92aa8708658520b8e0ffb6c676ea
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

-- function: build_context sha256:a12fea9743d0c7c4fddd5373ad0c1192d2d2c88ecaa3efea2345b4e3da27f9d2
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
SET search_path = pg_catalog, public
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

-- function: check_quotes sha256:4a3f371f76b3ec43bea156a4626e6fee15b888620c6bb97ce30bc9184e401c6e
-- rag.check_quotes: check a batch of quotes (an answer's) against the book they cite.
CREATE OR REPLACE FUNCTION rag.check_quotes(
    p_quotes JSONB
) RETURNS TABLE (
    ord               INT,
    quote             TEXT,
    verdict           TEXT,
    source_file       TEXT,
    paragraph         INT,
    paragraph_last    INT,
    book              TEXT,
    heading_path      TEXT,
    node_type         TEXT,
    level             INT,
    book_words        TEXT,
    differences       TEXT[],
    note              TEXT,
    cited_source_file TEXT,
    cited_paragraph   INT
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns one row per quote of p_quotes, in its order (ord 1..n), with its verdict and where its
words are. Read-only; the reader role may call it. One call checks a whole answer.
Parameters: p_quotes  a JSON array (1 to 50 items) of {"quote": text, "source_file": text,
  "paragraph": int, "book": text}, all but quote optional (or of bare strings: a quote without a
  citation): the citation the quote was given (a source_file and its §N as the tools print them;
  or a book slug alone, to look in that book first).
Verdicts (exactly one; the first that holds):
  exact      the words are in the cited paragraph (or run from it into the next: paragraph and
             paragraph_last, and the note says so). Only a citation naming a book paragraph
             (level 0, with its §N) can be exact.
  elsewhere  the words are verbatim in the book, but not in the cited paragraph, or no paragraph
             was cited: source_file, paragraph (paragraph_last) say where they are; cite that.
             The cited file's paragraphs are read first (nearest first), then the paragraphs
             BM25 ranks first for the quote's words (pg_search, 20 of them), each verified.
  summary    the words are in a summary (levels 1-3, written for this project): never the book's;
             source_file and paragraph are the summary's.
  close      nearly the words of the cited paragraph (else of one of the 3 paragraphs ranked first):
             at most 1 + words/10 edits (a word changed, dropped, added, or two neighbours swapped);
             book_words is the book's own text of that span, differences each edit.
  not found  none of these; note says why.
Words, not bytes (rag._quote_words, one place): case, Unicode composition, œ/oe and æ/ae,
apostrophes and quotation marks of every kind (' ’ " “ ” « » ‹ ›), punctuation, hyphens, line
breaks and spacing, italics markers (_…_, *…*) and end-note calls ([^2]) do not make a quote
wrong; a changed, dropped or added word does, and accents are part of a word. A quote's ellipses
(…, ..., [...], […], (...)) stand for words left out: the pieces must appear in that order in one
paragraph (or two consecutive ones).
A citation that names no loaded file, or a paragraph its file does not have, is checked as if
uncited, and note says what was wrong with it.
Errors (invalid_parameter_value, one sentence naming the quote): not an array; no quote or more
than 50; an item that is not a string or an object with a "quote" string, or with another field;
a quote over 2,000 characters, with no word, or holding a control character; a paragraph that is
not a whole number.
Cost (bench/bench_verify.py): one paragraph read for a quote its cited paragraph holds (p50 1-3 ms
on the two books), one BM25 scan and a paragraph read per candidate tried for one found elsewhere
(p50 10-20 ms).
*/
DECLARE
    c_max_quotes CONSTANT INT := 50;
    c_max_chars  CONSTANT INT := 2000;
    e       RECORD;
    v_q     TEXT;
    v_pos   INT;
BEGIN
    IF p_quotes IS NULL OR jsonb_typeof(p_quotes) <> 'array' THEN
        RAISE EXCEPTION 'quotes must be a JSON array of {"quote", "source_file", "paragraph"} objects, got %',
            coalesce(left(p_quotes::text, 80), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_array_length(p_quotes) = 0 THEN
        RAISE EXCEPTION 'no quote to check: give at least one' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_array_length(p_quotes) > c_max_quotes THEN
        RAISE EXCEPTION '% quotes in one call; the limit is %: check them in several calls',
            jsonb_array_length(p_quotes), c_max_quotes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR e IN SELECT x.v, x.i::int AS i FROM jsonb_array_elements(p_quotes) WITH ORDINALITY AS x(v, i) LOOP
        IF jsonb_typeof(e.v) = 'object' THEN
            IF jsonb_typeof(e.v -> 'quote') IS DISTINCT FROM 'string' THEN
                RAISE EXCEPTION 'quote %: give an object with a "quote" string, got %', e.i, left(e.v::text, 80)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF EXISTS (SELECT 1 FROM jsonb_object_keys(e.v) k WHERE k NOT IN ('quote', 'source_file', 'paragraph', 'book')) THEN
                RAISE EXCEPTION 'quote %: unknown field %; the fields are quote, source_file, paragraph, book', e.i,
                    (SELECT string_agg(format('"%s"', k), ', ') FROM jsonb_object_keys(e.v) k
                     WHERE k NOT IN ('quote', 'source_file', 'paragraph', 'book'))
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(e.v -> 'paragraph') NOT IN ('number', 'null')
               OR (jsonb_typeof(e.v -> 'paragraph') = 'number'
                   AND ((e.v ->> 'paragraph')::numeric <> trunc((e.v ->> 'paragraph')::numeric)
                        OR abs((e.v ->> 'paragraph')::numeric) > 2147483647)) THEN
                RAISE EXCEPTION 'quote %: paragraph must be a whole number (the §N of the citation), got %', e.i, e.v -> 'paragraph'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(e.v -> 'source_file') NOT IN ('string', 'null') OR jsonb_typeof(e.v -> 'book') NOT IN ('string', 'null') THEN
                RAISE EXCEPTION 'quote %: source_file and book must be strings', e.i USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_q := e.v ->> 'quote';
        ELSIF jsonb_typeof(e.v) = 'string' THEN
            v_q := e.v #>> '{}';
        ELSE
            RAISE EXCEPTION 'quote %: give an object with a "quote" string, got %', e.i, left(e.v::text, 80)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF length(v_q) > c_max_chars THEN
            RAISE EXCEPTION 'quote % is % characters long; the limit is %: quote a passage, not a chapter',
                e.i, length(v_q), c_max_chars USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_pos := regexp_instr(v_q, '[\x01-\x08\x0B\x0C\x0E-\x1F\x7F]');
        IF v_pos > 0 THEN
            RAISE EXCEPTION 'quote % holds a control character (U+%) at character %; remove it', e.i,
                lpad(upper(to_hex(ascii(substr(v_q, v_pos, 1)))), 4, '0'), v_pos USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF rag._quote_words(v_q) = '' THEN
            RAISE EXCEPTION 'quote % is empty (no word to check): give the words the answer quotes', e.i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;

    RETURN QUERY
    SELECT q.i::int, q.quote, c.verdict, c.source_file, c.paragraph, c.paragraph_last,
           m.book, m.heading_path, m.node_type, m.level, c.book_words, c.differences, c.note,
           q.sf, q.p
    FROM (SELECT x.i, CASE WHEN jsonb_typeof(x.v) = 'string' THEN x.v #>> '{}' ELSE x.v ->> 'quote' END AS quote,
                 nullif(btrim(x.v ->> 'source_file'), '') AS sf, (x.v ->> 'paragraph')::numeric::int AS p,
                 nullif(btrim(x.v ->> 'book'), '') AS bk
          FROM jsonb_array_elements(p_quotes) WITH ORDINALITY AS x(v, i)) q
    CROSS JOIN LATERAL rag._check_quote(q.quote, q.sf, q.p, q.bk) c
    LEFT JOIN LATERAL (SELECT n.book, n.heading_path, n.node_type, n.level FROM rag.hierarchical_content_nodes n
                       WHERE n.source_file = c.source_file ORDER BY n.chunk_index LIMIT 1) m ON true
    ORDER BY q.i;
END
$$;

-- function: get_children sha256:108ba1439a5e774f01fbdb805344c9a105cacba36f4abaab40fe1a4df338f531
-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
"Load the children" of p_source_file: its child nodes in document order, each whole, while the
running total of their sizes stays within p_budget (0..1,000,000 tokens, default 4000); the
first that does not fit and every one after it are left out, so the result reads as one
contiguous stretch of the book. Rows (rag.context_row): an included child's rows in chunk order,
role 'child', with their paragraph (§N) and used_tokens the running total; a child left out,
one row, role 'omitted', no content, its size in content_token_count. A leaf or unknown file:
no rows. Cost: one index range scan on parent_source_file plus the children's rows.
*/
BEGIN
    IF p_budget IS NULL OR p_budget < 0 OR p_budget > 1000000 THEN
        RAISE EXCEPTION 'budget must be between 0 and 1000000 tokens, got %', coalesce(p_budget::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH kids AS (
        SELECT n.source_file AS f, min(n.node_order) AS pos, min(n.level) AS lvl, min(n.node_type) AS nt,
               min(n.heading_path) AS hp, min(n.book) AS bk, sum(coalesce(n.content_token_count, 0))::int AS tokens
        FROM rag.hierarchical_content_nodes n
        WHERE n.parent_source_file = p_source_file
        GROUP BY n.source_file
    ), cut AS (
        SELECT k.*, sum(k.tokens) OVER (ORDER BY k.pos, k.f) AS running
        FROM kids k
    ), marked AS (
        SELECT c.*, bool_and(c.running <= p_budget) OVER (ORDER BY c.pos, c.f) AS fits
        FROM cut c
    )
    SELECT u.source_file, u.chunk_index, u.level, u.node_type, u.heading_path, u.content, u.content_token_count,
           u.book, u.node_order, u.paragraph, u.role, NULL::int,
           CASE WHEN u.role = 'child' THEN (sum(coalesce(u.content_token_count, 0)) FILTER (WHERE u.role = 'child')
                OVER (ORDER BY u.pos, u.source_file, u.chunk_index))::int END
    FROM (
        SELECT m.pos, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
               n.content_token_count, n.book, n.node_order, n.paragraph,
               'child'::text AS role
        FROM marked m JOIN rag.hierarchical_content_nodes n ON n.source_file = m.f
        WHERE m.fits
        UNION ALL
        SELECT m.pos, m.f, NULL::int, m.lvl, m.nt, m.hp, NULL::text, m.tokens, m.bk, m.pos, NULL::int, 'omitted'
        FROM marked m
        WHERE NOT m.fits
    ) u
    ORDER BY u.pos, u.source_file, u.chunk_index;
END
$$;

-- function: get_citations sha256:ebf28c76d0e41297886be288691384302abcf458b82e612e095b6c1b0c3dc725
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
SET search_path = pg_catalog, public
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

-- function: outline sha256:0fecf3621f63877db055470f5cf9c5754e609b842d305952e1881d1663dc055b
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
SET search_path = pg_catalog, public
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

-- function: pack_context sha256:391ede51cd5e929fa84297f467255799277639d9c46df0178bb82c6c8a7b6820
-- rag.pack_context: given hits in rank order, the reading-order context that fits a token budget.
CREATE OR REPLACE FUNCTION rag.pack_context(
    p_hit_ids INT[],
    p_budget  INT DEFAULT 3000,
    p_expand  TEXT[] DEFAULT '{parent}'
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
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

-- function: search_phrasings sha256:2beff6cda3ecf402c7efc2c3ebe27dbe2e29b39074c619081e3531c3fe1899d8
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_bm25', 'e4db3d55e4df095901650718b052893a2d781cef381b39741917e414abc75e0f', '0039_pin_search_path'),
    ('_check_quote', 'c09c59b85609b0dd7c78ec1a14af6e4e54966a200d6653a017553935895d275f', '0039_pin_search_path'),
    ('_check_search_args', '22601199b19c62c6d9d1df243837d78df17a366c6cfd908acdc3863a94f961bd', '0039_pin_search_path'),
    ('_corpus_model', '02f79d3932e30f73b2af33b4c6a0a592417a2ec73afcf471564394a8e270517d', '0039_pin_search_path'),
    ('_ensure_vector_index', 'ec8642e547387020b30a22887455902457de7e8e21da913c4a5f6841f4a44763', '0039_pin_search_path'),
    ('_hybrid', 'c245e1b354fccecbc3458b80487080b37193c7bbd3dcb3d533d2cd8440cbe171', '0039_pin_search_path'),
    ('_install_model_scans', 'c63f7a9a0d931a749bc63cca8244386130363416ed2e5a272d07217293a6515f', '0039_pin_search_path'),
    ('_interleave', '34e9cb9f753289ea61a11accf5fc9b2131164be246739db5390dc19fee2b2464', '0039_pin_search_path'),
    ('_knn', '6ecc3ac8da130ade968b4f1cec5ff86c66ad2db32242574e27a5942f6fb94cc5', '0039_pin_search_path'),
    ('_knn_sentences', 'd555a4fbad1ebd4f09ea5a6d74f2d3ef63fa7b89aad2f404fec7670ec77b8df6', '0039_pin_search_path'),
    ('_quote_align', '1defe391d3927329ec1ccbda03a45a9963ed775621cfd3d4d041e4fbb9991893', '0039_pin_search_path'),
    ('_quote_pieces', 'e6ecf8beac65442de94c2fd4da6040a08cf6785ce8a0de6393b21552c69ef329', '0039_pin_search_path'),
    ('_quote_span_text', 'acfcf70b79a03cfac934c576e0b0f58354285beddadfbe41686cc728ef817eb1', '0039_pin_search_path'),
    ('_scan_sql', '379ed72fa1fc9a6e4d49725d68cf72941ab164dfde022e44349b6ae2e7d24653', '0039_pin_search_path'),
    ('_search_hits', 'a118a3ab9836939c0c8bdd467ce10886efc4fdf6ca29fe22aaa06ba62d032b40', '0039_pin_search_path'),
    ('_sentences', '93b916f178a338072d4f47e371b3e24242cbb49b26a32f282dec3e7bb392d46d', '0039_pin_search_path'),
    ('_settings', '7eb128f8c564f55a8c06b4c71c5cfb4f230dddce04cbcf162d0ed944ad8058a2', '0039_pin_search_path'),
    ('_subtree_ids', 'd23cb087ca2c161abf096aa64d1a006a9d16f2a8c9c59291d2c2efbf30950ba6', '0039_pin_search_path'),
    ('_two_stage', '74ae309eb75f569e5d19a26af48580870a7f92aa8708658520b8e0ffb6c676ea', '0039_pin_search_path'),
    ('build_context', 'a12fea9743d0c7c4fddd5373ad0c1192d2d2c88ecaa3efea2345b4e3da27f9d2', '0039_pin_search_path'),
    ('check_quotes', '4a3f371f76b3ec43bea156a4626e6fee15b888620c6bb97ce30bc9184e401c6e', '0039_pin_search_path'),
    ('get_children', '108ba1439a5e774f01fbdb805344c9a105cacba36f4abaab40fe1a4df338f531', '0039_pin_search_path'),
    ('get_citations', 'ebf28c76d0e41297886be288691384302abcf458b82e612e095b6c1b0c3dc725', '0039_pin_search_path'),
    ('outline', '0fecf3621f63877db055470f5cf9c5754e609b842d305952e1881d1663dc055b', '0039_pin_search_path'),
    ('pack_context', '391ede51cd5e929fa84297f467255799277639d9c46df0178bb82c6c8a7b6820', '0039_pin_search_path'),
    ('search_phrasings', '2beff6cda3ecf402c7efc2c3ebe27dbe2e29b39074c619081e3531c3fe1899d8', '0039_pin_search_path')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
