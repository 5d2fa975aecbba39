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
