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
