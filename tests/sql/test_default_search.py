"""The default search's generated function (rag._install_model_search, migration 0015): the same
rows as the general functions, used only where it applies, generated at load and after
migrations, out of the reader's reach."""

from __future__ import annotations

import re

import psycopg
import pytest

from bookrag import db
from bookrag.functions import FUNCTIONS_DIR
from bookrag.migrate import apply_migrations, regenerate_model_searches

QUERIES = ("la monnaie et l'impôt", "Qui confectionne la nourriture quotidienne à l'aurore ?",
           "le péage du pont et le prix du pain", "les routes et les ornières", "boulanger")
DEFAULT = "SELECT * FROM rag.search(%s, %s, p_k => %s, p_expand => '{parent}')"


NAME = "_default_search"  # rag._install_model_search writes the corpus model's search into it
STAND_IN = (FUNCTIONS_DIR / "_default_search.sql").read_text()


def generated_for(conn: psycopg.Connection) -> bool | None:
    """Whether the installed rag._default_search is a model's generated search (its model check)."""
    src = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = 'rag._default_search(text,vector,integer)'::regprocedure").fetchone()[0]
    m = re.search(r"bool_and\(m\.model = '([^']*)'\)", src)
    return m.group(1) if m else None


def test_the_generated_search_gives_the_general_functions_rows(corpus, e5):
    """Every column (parents' JSON included) equal to the general path's, which an explicit
    setting selects (p_fusion 'convex' is the default value, so the search is the same), at k
    small enough for the rows read to hold k paragraphs of the kept sections and at k too large
    for that (two-stage's second search); and the generated function answered each time (it
    returns nothing only when no section is found)."""
    name = NAME
    answered = 0
    for q in QUERIES:
        v = e5.query(q)
        for k in (1, 2, 3, 5, 8, 10, 40, 100):  # 40 and 100: fewer paragraphs in the kept sections, the second search
            fast = corpus.execute(DEFAULT, (q, v, k)).fetchall()
            general = corpus.execute(DEFAULT.replace("'{parent}'", "'{parent}', p_fusion => 'convex'"), (q, v, k)).fetchall()
            assert fast == general, (q, k)
            assert fast, (q, k)
            answered += corpus.execute(f"SELECT count(*) > 0 FROM rag.{name}(%s, %s, %s)", (q, v, k)).fetchone()[0]
    assert answered == len(QUERIES) * 8


def test_the_generated_search_reads_two_stage_s_default_pools(corpus):
    """The fixture corpus holds fewer embedded rows than either kNN pool, so the comparison above
    cannot see a pool drift: the generated statements must read what rag.search_two_stage's
    defaults read (BM25 top p_pool, kNN top p_vector_pool with ef_search that pool, at least 40
    as rag._set_hnsw sets it). Fails when the template or a default changes alone."""
    args = corpus.execute("SELECT pg_get_function_arguments('rag.search_two_stage'::regproc)").fetchone()[0]
    defaults = dict(re.findall(r"(p_pool|p_vector_pool) integer DEFAULT (\d+)", args))
    assert set(defaults) == {"p_pool", "p_vector_pool"}, args
    src, config = corpus.execute("SELECT prosrc, proconfig FROM pg_proc WHERE proname = %s", (NAME,)).fetchone()
    assert f"ORDER BY pdb.score(n.id) DESC LIMIT {defaults['p_pool']}) x" in src
    assert re.search(rf"<=> p_query_embedding::vector\(\d+\) LIMIT {defaults['p_vector_pool']}\) y", src)
    assert f"hnsw.ef_search={max(40, int(defaults['p_vector_pool']))}" in config


def test_the_default_runs_it_only_without_filters_or_settings(corpus, e5):
    """Replaced by a function that fails, the generated search is what the plain default (and
    explicit two-stage, and levels {0}) runs; a book, within, a setting, a summary filter, k > 100
    or no query vector take the general functions."""
    name = NAME
    q, v = QUERIES[0], e5.query(QUERIES[0])
    with corpus.transaction(force_rollback=True):
        corpus.execute(f"""CREATE OR REPLACE FUNCTION rag.{name}(p_query TEXT, p_query_embedding vector, p_k INT)
                           RETURNS SETOF rag.search_hit LANGUAGE plpgsql STABLE AS $$
                           BEGIN RAISE EXCEPTION 'generated search called'; END $$""")
        for call in ("rag.search(%s, %s)", "rag.search(%s, %s, 'two-stage', 5)",
                     "rag.search(%s, %s, p_levels => '{0}')", "rag.build_context(%s, %s, 500, 3)"):
            with pytest.raises(psycopg.errors.RaiseException, match="generated search called"):
                with corpus.transaction():  # a savepoint: the error does not end the outer transaction
                    corpus.execute(f"SELECT * FROM {call}", (q, v))
        book = corpus.execute("SELECT book FROM rag.books LIMIT 1").fetchone()[0]
        chapter = corpus.execute("SELECT parent_source_file FROM rag.hierarchical_content_nodes "
                                 "WHERE level = 0 LIMIT 1").fetchone()[0]
        for call, args in (("rag.search(%s, %s, p_book => %s)", (book,)),
                           ("rag.search(%s, %s, p_within => %s)", (chapter,)),
                           ("rag.search(%s, %s, p_sentence_every => 3)", ()),
                           ("rag.search(%s, %s, p_normalisation => 'zscore')", ()),
                           ("rag.search(%s, %s, p_chapter_weight => 0.4)", ()),
                           ("rag.search(%s, %s, p_cite_weight => 0)", ()),
                           ("rag.search(%s, %s, p_levels => '{1}')", ()),
                           ("rag.search(%s, %s, p_k => 101)", ()),
                           ("rag.search(%s, %s, 'hybrid')", ())):
            assert corpus.execute(f"SELECT count(*) FROM {call}", (q, v, *args)).fetchone()[0] > 0, call
        assert corpus.execute("SELECT count(*) FROM rag.search(%s, NULL)", (q,)).fetchone()[0] > 0


def test_its_errors_are_the_general_functions(corpus, e5):
    """A bad query or vector gets the message it got before the generated search existed."""
    v = e5.query(QUERIES[0])
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="dimension"):
        corpus.execute("SELECT * FROM rag.search('monnaie', '[1,2,3]'::vector)")
    corpus.rollback()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="query"):
        corpus.execute("SELECT * FROM rag.search(%s, %s)", ("x" * 10_001, v))
    corpus.rollback()


def test_registering_a_model_and_migrating_generate_it(conn):
    """Before any model, rag._default_search is its file's stand-in; rag._ensure_vector_index (the
    loader's call) writes the model's search into it, readable by the reader role and not by
    PUBLIC; `bookrag migrate`'s regeneration writes it again over the stand-in."""
    signature = "rag._default_search(text,vector,integer)"
    assert generated_for(conn) is None
    conn.execute("SELECT rag._ensure_vector_index('test/model', 3)")
    conn.commit()
    assert generated_for(conn) == "test/model"
    assert conn.execute("SELECT has_function_privilege('bookrag_reader', %s, 'EXECUTE'), "
                        "has_function_privilege('public', %s, 'EXECUTE')", (signature, signature)).fetchone() == (True, False)
    conn.execute(STAND_IN)
    conn.commit()
    assert generated_for(conn) is None
    regenerate_model_searches(conn)
    assert generated_for(conn) == "test/model"
    assert conn.execute("SELECT has_function_privilege('bookrag_reader', %s, 'EXECUTE'), "
                        "has_function_privilege('public', %s, 'EXECUTE')", (signature, signature)).fetchone() == (True, False)
    # an empty corpus: no row from it, so the default answers from the general functions (nothing)
    assert conn.execute("SELECT count(*) FROM rag.search('x', '[1,0,0]'::vector)").fetchone()[0] == 0


def test_another_model_s_search_or_another_length_answers_nothing(corpus, e5):
    """The generated function checks, before reading anything, that the registered model is its
    own and the vector its length: generated for another model it returns no row and the default
    gives the general functions' rows; a vector of another length gets no row from it and the
    general functions' error (test_its_errors_are_the_general_functions)."""
    q, v = QUERIES[0], e5.query(QUERIES[0])
    general = corpus.execute(DEFAULT.replace("'{parent}'", "'{parent}', p_fusion => 'convex'"), (q, v, 5)).fetchall()
    assert corpus.execute(f"SELECT count(*) FROM rag.{NAME}(%s, %s, 5)", (q, v)).fetchone()[0] > 0
    assert corpus.execute(f"SELECT count(*) FROM rag.{NAME}(%s, '[1,2,3]'::vector, 5)", (q,)).fetchone()[0] == 0
    with corpus.transaction(force_rollback=True):
        corpus.execute("SELECT rag._install_model_search('other/model', 384)")
        assert generated_for(corpus) == "other/model"
        assert corpus.execute(f"SELECT count(*) FROM rag.{NAME}(%s, %s, 5)", (q, v)).fetchone()[0] == 0
        assert corpus.execute(DEFAULT, (q, v, 5)).fetchall() == general
    assert corpus.execute(DEFAULT, (q, v, 5)).fetchall() == general


def test_no_paragraph_in_the_kept_sections_hands_over_to_the_general_functions(corpus, e5):
    """Sections found by their summaries alone, none of their paragraphs found (no paragraph
    vector, words only in summaries): the generated function answers nothing and the default
    gives what the general functions give, hybrid's summaries ('auto''s fallback)."""
    name = NAME
    corpus.execute("UPDATE rag.hierarchical_content_nodes SET embedding = NULL, embedding_model = NULL WHERE level = 0")
    v = e5.query("pain")
    assert corpus.execute(f"SELECT count(*) FROM rag.{name}('pain', %s, 5)", (v,)).fetchone()[0] == 0
    fast = corpus.execute(DEFAULT, ("pain", v, 5)).fetchall()
    general = corpus.execute(DEFAULT.replace("'{parent}'", "'{parent}', p_fusion => 'convex'"), ("pain", v, 5)).fetchall()
    assert fast == general
    assert {r[3] for r in fast} & {1, 2, 3}  # summaries: hybrid's list, not the sentence branch's paragraphs alone


def test_migrate_regenerates_a_function_not_generated_for_the_model(pg_url):
    """`bookrag migrate` with nothing to apply still writes the registered model's search into
    rag._default_search when it holds the stand-in (or another model's); a model name with a $
    gets none and leaves the installed function as it was (the general functions serve it)."""
    with db.connect(pg_url, autocommit=True) as c:
        c.execute("SELECT rag._ensure_vector_index('test/model', 3)")
        c.execute(STAND_IN)
        assert generated_for(c) is None
    assert apply_migrations(pg_url) == []
    with db.connect(pg_url, autocommit=True) as c:
        assert generated_for(c) == "test/model"
        assert c.execute("SELECT rag._install_model_search('a$body$b', 3)").fetchone()[0] is None
        assert generated_for(c) == "test/model"


def test_migrate_installs_the_stand_in_again_when_it_was_dropped(pg_url):
    """rag._search_hits calls rag._default_search by name: dropped by hand, `bookrag migrate`
    (nothing to apply) installs its stand-in again, with the reader's EXECUTE and not PUBLIC's,
    and the default search answers again (nothing, in an empty corpus)."""
    signature = "rag._default_search(text,vector,integer)"
    with db.connect(pg_url, autocommit=True) as c:
        c.execute("DROP FUNCTION rag._default_search(text, vector, integer)")
        with pytest.raises(psycopg.errors.UndefinedFunction):
            c.execute("SELECT * FROM rag.search('x', '[1,0,0]'::vector)")
    assert apply_migrations(pg_url) == []
    with db.connect(pg_url, autocommit=True) as c:
        assert generated_for(c) is None
        assert c.execute("SELECT has_function_privilege('bookrag_reader', %s, 'EXECUTE'), "
                         "has_function_privilege('public', %s, 'EXECUTE')", (signature, signature)).fetchone() == (True, False)
        assert c.execute("SELECT count(*) FROM rag.search('x', '[1,0,0]'::vector)").fetchone()[0] == 0
