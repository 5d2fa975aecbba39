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
