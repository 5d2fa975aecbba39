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
