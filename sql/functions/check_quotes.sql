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
