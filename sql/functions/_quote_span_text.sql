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
