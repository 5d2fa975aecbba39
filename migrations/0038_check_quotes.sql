-- 0038_check_quotes: rag.check_quotes: a batch of quotes checked against the paragraphs they cite (issue 45)
-- depends: 0037_paragraphs_view

-- function: _check_quote sha256:1e9805f41c9b8f7b408cd0b8e6d41d5e2205514a3c6d3ab35f5eb588491666e9
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

-- function: _paragraph_text sha256:4e7727ebd498e1a197ccc8f83a178de115ea11ba78e9491f95a136a1e2bcb919
-- rag._paragraph_text: the text of paragraphs first..last of a node, its chunks joined.
CREATE OR REPLACE FUNCTION rag._paragraph_text(
    p_source_file TEXT,
    p_first       INT,
    p_last        INT
) RETURNS TEXT
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
/*
Returns the content of p_source_file's paragraphs p_first..p_last (§N, the numbers the tools
print: hierarchical_content_nodes.paragraph), in reading order, chunks joined by one space (a
long paragraph is several chunks, cut between sentences); NULL when none of them exists.
Cost: one index range scan on (source_file, paragraph).
*/
    SELECT string_agg(n.content, ' ' ORDER BY n.paragraph, n.chunk_index)
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file = p_source_file AND n.paragraph BETWEEN p_first AND p_last;
$$;

-- function: _quote_align sha256:84bc0a607c21c449b55257e66df9ec5e1876e125a6daca5ad2534ca948be3529
-- rag._quote_align: the span of a paragraph nearest a quote, word for word, and what differs.
CREATE OR REPLACE FUNCTION rag._quote_align(
    p_quote TEXT[],
    p_words TEXT[],
    p_max   INT
) RETURNS TABLE (distance INT, first_word INT, last_word INT, differences TEXT[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
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

-- function: _quote_in sha256:131544630f3bd4d3e4cea2fc4f03831374d986be3f52a354731af74bbd3d5e1a
-- rag._quote_in: whether a quote's pieces stand, in order, in a text's words.
CREATE OR REPLACE FUNCTION rag._quote_in(
    p_words  TEXT,
    p_pieces TEXT[]
) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
/*
Returns true when every piece of p_pieces (a quote cut at its ellipses, each piece as
rag._quote_words gives it) stands in p_words (rag._quote_words of a paragraph) as whole words,
the pieces in that order, any words between them; false when one does not or p_pieces is empty.
The words hold letters, digits and single spaces only, so they are written into the pattern as
they are.
Cost: one strpos for a quote without an ellipsis, one regular expression otherwise.
*/
    SELECT CASE
        WHEN p_words IS NULL OR coalesce(cardinality(p_pieces), 0) = 0 THEN false
        WHEN cardinality(p_pieces) = 1 THEN strpos(' ' || p_words || ' ', ' ' || p_pieces[1] || ' ') > 0
        ELSE (' ' || p_words || ' ') ~ (' ' || array_to_string(p_pieces, ' (?:.* )?') || ' ')
    END;
$$;

-- function: _quote_pieces sha256:88133bfae70920af5a840ff46a9f0376f5b232b0889100cf549b994beb7d33c7
-- rag._quote_pieces: a quote cut at its ellipses, each piece as the words it is checked by.
CREATE OR REPLACE FUNCTION rag._quote_pieces(
    p_quote TEXT
) RETURNS TEXT[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
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

-- function: _quote_span_text sha256:fcb8c0163f0a6cf3e67267052bfa8ca16bb6f27a9a317102b6c645cdaafaaceb
-- rag._quote_span_text: a text's own words (case, punctuation, italics) for a span of its checked words.
CREATE OR REPLACE FUNCTION rag._quote_span_text(
    p_text  TEXT,
    p_first INT,
    p_last  INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
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

-- function: _quote_words sha256:386539c8f276a5f079d9dbeb6d92bb412a5f5b16a7cedb20296d8c67192bd237
-- rag._quote_words: a text as the words a quote is checked by (the "words, not bytes" rule, here only).
CREATE OR REPLACE FUNCTION rag._quote_words(
    p_text TEXT
) RETURNS TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
/*
Returns p_text's words, lower-case, separated by one space ('' for a text without a word). What
does not change a word is dropped here, so that a quote and the book compare word for word:
  - Unicode composition (NFC: a letter typed with a combining accent is the precomposed one);
  - case ("La protection" quotes "la protection");
  - the ligatures œ and æ (written oe, ae: the corpus has both spellings);
  - every character that is not a letter or a digit: apostrophes (' ’ ʼ), quotation marks
    (" “ ” « » ‹ › „), dashes and hyphens, punctuation, the corpus's italics markers (_…_, and
    Markdown's *…*), line breaks and any spacing;
  - end-note calls ([^2]) and the summaries' anchors ([§12–14]), markers of the corpus, not words.
Accents are part of a word ("été" is not "ete"), and so is every letter: a changed, dropped or
added word changes the result. Letters and digits are Unicode's (collation pg_c_utf8, PostgreSQL
17), whatever the database's own locale.
Cost: a few regular-expression passes over the text (about 0.1 ms for a 3 KB paragraph).
*/
    SELECT btrim(regexp_replace(
        replace(replace(lower(normalize(regexp_replace(p_text, '\[[\^§][^]]*\]', ' ', 'g'), NFC) COLLATE pg_c_utf8),
                        'œ', 'oe'), 'æ', 'ae'),
        '[^[:alnum:]]+', ' ', 'g') COLLATE pg_c_utf8);
$$;

-- function: check_quotes sha256:8c9e291a3852ebad6bc678808c5b6aac3cf79490813adb2898bb161a8ef74ae9
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

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_check_quote', '1e9805f41c9b8f7b408cd0b8e6d41d5e2205514a3c6d3ab35f5eb588491666e9', '0038_check_quotes'),
    ('_paragraph_text', '4e7727ebd498e1a197ccc8f83a178de115ea11ba78e9491f95a136a1e2bcb919', '0038_check_quotes'),
    ('_quote_align', '84bc0a607c21c449b55257e66df9ec5e1876e125a6daca5ad2534ca948be3529', '0038_check_quotes'),
    ('_quote_in', '131544630f3bd4d3e4cea2fc4f03831374d986be3f52a354731af74bbd3d5e1a', '0038_check_quotes'),
    ('_quote_pieces', '88133bfae70920af5a840ff46a9f0376f5b232b0889100cf549b994beb7d33c7', '0038_check_quotes'),
    ('_quote_span_text', 'fcb8c0163f0a6cf3e67267052bfa8ca16bb6f27a9a317102b6c645cdaafaaceb', '0038_check_quotes'),
    ('_quote_words', '386539c8f276a5f079d9dbeb6d92bb412a5f5b16a7cedb20296d8c67192bd237', '0038_check_quotes'),
    ('check_quotes', '8c9e291a3852ebad6bc678808c5b6aac3cf79490813adb2898bb161a8ef74ae9', '0038_check_quotes')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
