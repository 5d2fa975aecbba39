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
