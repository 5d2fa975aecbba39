-- 0014_default_mode_auto: the default mode is auto: two-stage for paragraph searches, hybrid when the filters ask for summaries (decision 23)
-- depends: 0013_two_stage_one_search

-- function: _search_hits sha256:70b241b726184e6a63470bc49639ed825951518818a3a641b142b99a8584d11b
-- rag._search_hits: the mode dispatcher behind rag.search (the mode list is defined and checked here).
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT,
    p_k               INT,
    p_book            TEXT,
    p_levels          INT[],
    p_node_type       TEXT,
    p_within          TEXT,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8,
    p_chapter_weight  FLOAT8,
    p_cite_weight     FLOAT8,
    p_sentence_after  INT,
    p_sentence_every  INT,
    p_expand          TEXT[],
    p_query_model     TEXT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Checks rag.search's arguments and runs the search named by p_mode, returning its rows
(rag.search_hit, best first), unchanged except in 'hybrid' and 'two-stage':
  'auto'       the default (since migration 0014, decision 23): 'two-stage' when the filters
               allow paragraphs (no levels filter or levels {0}, no node_type or 'source'),
               'hybrid' otherwise (levels naming a summary level, node_type 'summary'), so the
               default ranks paragraphs inside the best sections and still finds summaries
               when asked for them; and 'hybrid' too when two-stage finds no paragraph (the
               words are only in summaries and there is no query vector: a corpus without
               vectors), so the default never answers nothing where hybrid answers. Two-stage
               is never below hybrid on any set, tuning or held-out half, and ahead on the mean
               (recall@5 / MRR@10 held-out: Bastiat 0.500 / 0.582 against 0.500 / 0.572,
               Tocqueville 0.615 / 0.712 against 0.600 / 0.659, PIAF paragraphs 0.917 / 0.812
               against 0.890 / 0.738), at about 1.3 times hybrid's time. Chapter and cite
               weights only act when it runs hybrid.
  'hybrid'     rag.search_hybrid (both branches fused over every level), with the sentence
               branch's paragraphs (rag.search_sentences) in the places p_sentence_after
               and p_sentence_every give them (rag._fusion_settings), interleaved: place
               p (1..k) is the sentence branch's when p > sentence_after and
               (p - sentence_after - 1) is a multiple of sentence_every, the fused list's
               otherwise; each place takes its list's next row whose paragraph (any of its
               chunks) is not placed yet (a fused row: not placed by the branch, so two chunks
               of one long paragraph in the fused list both stay), so a paragraph both lists
               hold takes the better of its two places; when one list runs out, the other
               fills the remaining places.
               The merged list is ranked again 1..k (a placed row's score is its sentence
               score, and it keeps the fused row's branch columns when the fused list holds
               the same chunk; rank, not score, orders the list). Not applied when the filters
               exclude paragraphs (levels without 0, node_type 'summary') or without a
               query vector.
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only, so levels {0} and node_type
               'source' are the only filters it takes, and change nothing), merged
               with the sentence branch as 'hybrid' is (its list in place of the fused one).
               Measured on the tuning halves (recall@5 / MRR@10, Bastiat 0.571 / 0.864 ->
               0.571 / 0.881, Tocqueville 0.556 / 0.718 -> 0.667 / 0.741; PIAF, without
               sentences, unchanged): decision 21. p_sentence_every 0 gives the sections-only list.
Any other mode is an error naming it (the list: auto, hybrid, two-stage, bm25, vector); so is
a word of p_expand other than 'parent' and 'cited', and a p_query_model that is not the corpus
model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid and two-stage add rag.search_sentences and
the merge (about 1.1 ms per search on the two books, 3.1 ms at 100k rows: bench/bench_search.py,
migration 0011).
*/
DECLARE
    v_mode  TEXT := p_mode;    -- the mode run ('auto' resolved)
    v_model TEXT;
    st      RECORD;
    f_rows  rag.search_hit[];  -- the mode's list (hybrid's or two-stage's), best first, and each row's key
    f_keys  TEXT[];
    s_rows  rag.search_hit[];  -- the sentence branch's paragraphs, best first, and their keys
    s_keys  TEXT[];
    v_fi    INT := 1;
    v_si    INT := 1;
    v_n     INT := 0;
    v_seen  TEXT[] := '{}';    -- the keys placed so far, and those the sentence branch placed
    v_seen_s TEXT[] := '{}';
    v_take  BOOLEAN;
    r       rag.search_hit;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) AND coalesce(p_node_type, 'source') = 'source'
                       THEN 'two-stage' ELSE 'hybrid' END;
    END IF;
    IF v_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        -- it returns paragraphs only: the filters that say so are accepted (and change nothing)
        PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
        IF NOT coalesce(p_levels <@ ARRAY[0], true) OR coalesce(p_node_type, 'source') <> 'source' THEN
            RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0} and no node_type but source, got levels %, node_type %',
                coalesce(p_levels::text, 'NULL'), coalesce(p_node_type, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query_model IS NOT NULL AND p_query_embedding IS NOT NULL THEN
        SELECT m.model INTO v_model FROM rag._corpus_model(NULL) m;
        IF v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF v_mode IN ('hybrid', 'two-stage') THEN
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        -- The mode's own list, best first (the fusion settings above are checked in both modes,
        -- though two-stage does not use chapter_weight and cite_weight).
        IF v_mode = 'hybrid' THEN
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                     p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                     p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                     p_cite_weight => p_cite_weight) b;
        ELSE
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
                     p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
                     p_vector_weight => p_vector_weight) b;
            IF f_rows IS NULL AND p_mode = 'auto' THEN
                -- no paragraph of the best sections matches (words found only in summaries, and no
                -- query vector): 'auto' gives the hybrid list, summaries included, rather than nothing
                SELECT array_agg(b ORDER BY b.rank) INTO f_rows
                FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                         p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                         p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                         p_cite_weight => p_cite_weight) b;
            END IF;
        END IF;
        IF st.sentence_every = 0 OR st.sentence_after >= p_k OR p_query_embedding IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) OR p_node_type = 'summary' THEN
            RETURN QUERY SELECT * FROM unnest(f_rows);
            RETURN;
        END IF;
        -- Merge: the greedy interleave of evaluation/experiments/sentence_anchors/slots.py. Two
        -- chunks of one paragraph in the mode's list both stay. At most k + 2k rows, so the loop
        -- and its ANY() are cheap.
        -- Each row's key: a paragraph's is its file and number (its chunks are one paragraph);
        -- other rows keep their id.
        SELECT array_agg(CASE WHEN b.level = 0 THEN b.source_file || '#' || b.paragraph ELSE b.id::text END
                         ORDER BY b.rank)
        INTO f_keys FROM unnest(f_rows) b;
        SELECT array_agg(s ORDER BY s.rank), array_agg(s.source_file || '#' || s.paragraph ORDER BY s.rank)
        INTO s_rows, s_keys
        FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s;
        f_rows := coalesce(f_rows, '{}');
        s_rows := coalesce(s_rows, '{}');
        WHILE v_n < p_k AND (v_fi <= cardinality(f_rows) OR v_si <= cardinality(s_rows)) LOOP
            v_take := (v_si <= cardinality(s_rows) AND v_n >= st.sentence_after
                       AND (v_n - st.sentence_after) % st.sentence_every = 0)
                      OR v_fi > cardinality(f_rows);
            IF v_take THEN
                WHILE v_si <= cardinality(s_rows) AND s_keys[v_si] = ANY(v_seen) LOOP
                    v_si := v_si + 1;
                END LOOP;
                CONTINUE WHEN v_si > cardinality(s_rows);
                r := s_rows[v_si];
                FOR i IN v_fi .. cardinality(f_rows) LOOP  -- the same chunk later in the fused list: its branch columns too
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
    ELSE
        RETURN QUERY SELECT * FROM rag.search_branch(p_query, p_query_embedding, v_mode, p_k, p_book, p_levels, p_node_type,
                                                     p_within);
    END IF;
END
$$;

-- function: build_context sha256:f77f26b2822b061f47eedadf535e5ec8ac9eb7d2911505fa1a90b9b60d3faeb2
-- rag.build_context: search + parent expansion + deduplication within a token budget, ordered for reading.
CREATE OR REPLACE FUNCTION rag.build_context(
    p_query           TEXT,
    p_query_embedding vector,
    p_budget          INT DEFAULT 3000,
    p_k               INT DEFAULT 8,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_expand          BOOLEAN DEFAULT true,
    p_mode            TEXT DEFAULT 'auto',
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
Builds the context an LLM reads to answer p_query: the p_k hits of rag.search (p_mode
'auto' | 'hybrid' | 'two-stage' | 'bm25' | 'vector', checked there) packed by rag.pack_context: each hit
with its parent node's rows (when p_expand), whole units while they fit, never more than
p_budget tokens, in reading order (book, node_order, chunk_index), each row with its citation
(source_file, chunk_index, heading_path, level), its role ('hit' or 'parent'), the rank of the
hit that brought it, and the running token total.
It is exactly
  rag.pack_context(ARRAY(SELECT id FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book,
                   p_levels, p_node_type, p_within) ORDER BY rank), p_budget, p_expand)
with the default fusion settings; write that composition to pass rag.search's other arguments
(fusion, weights, the sentence branch's places): `bookrag search --budget`, `bookrag ask` and
`bookrag eval` do.
Parameters:
  p_query, p_query_embedding  as in rag.search (embedding NULL: BM25 only).
  p_budget   tokens, 1..1,000,000 (default 3000; checked by rag.pack_context).
  p_k        hits considered, 1..1000 (default 8; checked by rag.search).
  p_book, p_levels, p_node_type  search filters (levels or node_type asking for summaries: 'auto'
             runs hybrid; 'two-stage' refuses them).
  p_expand   add each hit's parent node (default true).
  p_mode     which search ranks the hits (default 'auto', as rag.search: since migration 0014
             the paragraphs of the best sections, each with its chapter summary as parent).
  p_within   NULL or a source_file: hits only from that node's subtree (parents may lie above it).
Cost: one search plus rag.pack_context (two indexed lookups per hit); p50 11.1 ms on the two books,
26.1 ms at 100k rows with the default mode (bench/bench_search.py, migration 0014).
*/
BEGIN
    -- PL/pgSQL, not SQL: a SQL body is checked when created, and rag.search is created after it.
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;

-- function: search sha256:32bdab01d5281fccd19c758d6d52b473ee2d6102d89c6c8c259265e50da66dc5
-- rag.search: one entry point for every search mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT DEFAULT 'auto',
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_chapter_weight  FLOAT8 DEFAULT NULL,
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_sentence_after  INT DEFAULT NULL,
    p_sentence_every  INT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Runs the search named by p_mode (rag._search_hits checks every argument and dispatches) and
returns its rows (rag.search_hit, best first) with cites, parent and cited filled:
  'auto'       the default: 'two-stage' when the filters allow paragraphs (none, levels {0},
               node_type 'source'), 'hybrid' when they ask for summaries or when two-stage
               finds no paragraph (decision 23)
  'hybrid'     rag.search_hybrid (both branches fused, every level), with places for the
               sentence branch (rag.search_sentences; see rag._search_hits)
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only: levels {0} and node_type
               'source' are the only filters it takes), with
               the same places for the sentence branch
Any other mode is an error naming it. The CLI, rag.build_context and the MCP server call this
function, so the list above is the product's one list of modes.
Parameters: as in the function called; p_within restricts every mode to a node's subtree;
p_fusion, p_normalisation, p_bm25_weight, p_vector_weight (NULL = rag._fusion_settings()) are
used by 'hybrid' and 'two-stage', p_sentence_after and p_sentence_every by both,
p_chapter_weight and p_cite_weight by 'hybrid' (checked in both: rag._fusion_settings).
  p_expand       what to attach to each hit, any of:
                   'parent'  the hit's parent node rows (rag.get_node of parent_source_file), as JSON;
                   'cited'   the rows a summary hit's anchors cite (rag.get_citations), as JSON.
                 NULL or '{}' = nothing; any other word is an error naming it. cites (what a
                 summary hit's anchors cite, compactly) is always filled.
  p_query_model  the model p_query_embedding was made with; when given and not the corpus model
                 the call is refused (a vector of another model with the same length would
                 otherwise be compared silently). NULL = not checked.
Cost: the called function's, plus one indexed lookup per summary hit for cites and per hit for
each expansion. A SQL function without settings, so the caller's statement inlines it (one plan,
cached with a prepared statement) and an expansion not asked for is never run.
*/
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           CASE WHEN h.level = 0 THEN '[]'::json ELSE rag.cites(h.source_file, h.chunk_index) END,
           CASE WHEN 'parent' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(p) ORDER BY p.chunk_index), '[]'::json)
                FROM rag.get_node(h.parent_source_file) p) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_node_type, p_within, p_fusion,
                          p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                          p_sentence_after, p_sentence_every, p_expand, p_query_model) h
    ORDER BY h.rank;
$$;

-- function: search_two_stage sha256:81b3180500dc430233b336103dd47f3fc28c3280872160ddbd51bac632d131d5
-- rag.search_two_stage: the best sections by their summaries and paragraphs, then their best paragraphs, from one hybrid search.
CREATE OR REPLACE FUNCTION rag.search_two_stage(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_sections        INT DEFAULT 5,
    p_section_weight  FLOAT8 DEFAULT 0.3,
    p_pool            INT DEFAULT 100,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2), both stages over one hybrid search:
  rag.search_hybrid over every level (k = greatest(p_pool, p_k, 10 x p_sections) rows, each
  branch's pool raised to that k by rag.search_hybrid; no chapter term); rows of levels 2-3
  (parts, the book) are left out.
  1. Sections: each section (a level-1 summary's own file, a paragraph's parent) gets the best
     fused score of its rows among those, so a section is found by its summary's words or by
     its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best).
  2. Paragraphs: the level-0 rows among those whose parent is a kept section, their fused
     scores min-max normalised over them; when they are fewer than p_k, a second hybrid search
     over the kept sections' paragraphs (k and pool greatest(p_pool, p_k)) gives them instead.
     A section kept for its summary's score contributes only those of its paragraphs that are
     among the rows read (unless the second search runs).
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best (fewer only when fewer
  of the kept sections' paragraphs match), with their branch ranks and section_score.
  Until migration 0013 stage 2 always ran that second search (and until 0012 stage 1 read the
  summaries alone); reading the first search's rows gives the same quality within one question
  of the smallest tuning half at about half the cost (decision 22; recall@5 / MRR@10 with the
  sentence branch merged by rag.search, tuning halves: Bastiat 0.619 / 0.881 both, Tocqueville
  0.667 / 0.741 -> 0.651 / 0.742, PIAF 0.908 / 0.804 -> 0.912 / 0.808; mean of the held-out
  halves 0.688 -> 0.690).
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           candidates per branch, at least (default 100); rows read as said above (at most 1000).
  p_within         NULL or a source_file: only rows inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   (NULL = rag._fusion_settings()); its chapter term is not used here (the
                   sections already rank the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), no section is found and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: one rag.search_hybrid reading its greatest(p_pool, p_k, 10 x p_sections) best rows (100
by default, content included), then two small statements over them in memory; a second
hybrid search when the first holds fewer than p_k of the kept sections' paragraphs (k 10: 5 of
the books' 177 evalset questions; 56 of an evenly spread 500 of PIAF's 3,835, whose articles
have about 4 paragraphs each). With parent expansion through rag.search, about 1.3 times
hybrid's time on the books and 2 times at 100k synthetic rows (bench/bench_search.py,
"default+parent" against "hybrid+parent", migration 0014: rag.search's default runs it).
*/
DECLARE
    v_rows   rag.search_hit[];
    v_files  TEXT[];
    v_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, NULL, NULL);
    IF p_sections IS NULL OR p_sections < 1 OR p_sections > 100 THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', coalesce(p_sections::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The one search both stages read (every level: a levels filter costs the BM25 scan more
    -- than the few part and book rows it would keep out).
    SELECT array_agg(h ORDER BY h.rank) INTO v_rows
    FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_pool, p_k, p_sections * 10)),
                           p_book => p_book, p_pool => p_pool, p_bm25_weight => p_bm25_weight,
                           p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                           p_normalisation => p_normalisation, p_chapter_weight => 0, p_within => p_within) h;

    -- Stage 1: the sections, best first, and their normalised scores.
    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score
                  FROM unnest(v_rows) h WHERE h.level <= 1) h
            WHERE h.section IS NOT NULL
            GROUP BY h.section
            ORDER BY best DESC, h.section
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool,
                                                      p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                                      p_fusion => p_fusion, p_normalisation => p_normalisation,
                                                      p_chapter_weight => 0, p_within => p_within);
        RETURN;
    END IF;

    -- Stage 2: the kept sections' paragraphs among the same rows; when those rows hold fewer
    -- than p_k of them, a search inside the kept sections (stage 2 until migration 0013), so a
    -- list is never shorter than the sections allow.
    IF (SELECT count(*) FROM unnest(v_rows) h WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)) < p_k THEN
        SELECT array_agg(h ORDER BY h.rank) INTO v_rows
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool, p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                               p_fusion => p_fusion, p_normalisation => p_normalisation,
                               p_chapter_weight => 0, p_within => p_within) h;
    END IF;
    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM unnest(v_rows) h
        WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)
    ), scored AS (
        SELECT p.*, (1 - p_section_weight) * p.norm + p_section_weight * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.f = p.parent_source_file
    )
    SELECT x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8,
           NULL::json, NULL::json, NULL::json
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_search_hits', '70b241b726184e6a63470bc49639ed825951518818a3a641b142b99a8584d11b', '0014_default_mode_auto'),
    ('build_context', 'f77f26b2822b061f47eedadf535e5ec8ac9eb7d2911505fa1a90b9b60d3faeb2', '0014_default_mode_auto'),
    ('search', '32bdab01d5281fccd19c758d6d52b473ee2d6102d89c6c8c259265e50da66dc5', '0014_default_mode_auto'),
    ('search_two_stage', '81b3180500dc430233b336103dd47f3fc28c3280872160ddbd51bac632d131d5', '0014_default_mode_auto')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
