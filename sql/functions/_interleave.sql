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
