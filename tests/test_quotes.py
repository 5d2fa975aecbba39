"""bookrag.quotes: an answer's quotes and citations read from its text (no database: the
scholarly forms are given as rag.books and the nodes would give them)."""

from __future__ import annotations

import pytest

from bookrag.errors import BookragError
from bookrag.quotes import Claim, parse_answer

SF = "corpus/bastiat-sophismes-economiques/premiere-serie/chapitre-07-petition-des-fabricants-de-chandelles/source.md"
SCHOLARLY = (
    "Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « Pétition des fabricants de chandelles »"
)
PREFIXES = {SCHOLARLY: SF}
URL = "http://127.0.0.1:8765/books/bastiat-sophismes-economiques/premiere-serie/chapitre-07-petition-des-fabricants-de-chandelles"


def test_each_citation_form_the_tools_print_is_read_back():
    answer = (
        f"Bastiat écrit : « Nous subissons l'intolérable concurrence d'un rival étranger » ({SCHOLARLY}, § 6).\n"
        f'Puis “ce rival, qui n\'est autre que le soleil” ({SF} §6), et "la perfide Albion" ({URL}?hl=6#p6).\n'
        "Enfin « une loi qui ordonne la fermeture de toutes fenêtres » (Bastiat, Sophismes économiques (1848), "
        "1re série, ch. VII, « Pétition des fabricants de chandelles », § 7)."
    )
    claims = parse_answer(answer, PREFIXES)
    assert [(c.quote, c.source_file, c.paragraph) for c in claims] == [
        ("Nous subissons l'intolérable concurrence d'un rival étranger", SF, 6),
        ("ce rival, qui n'est autre que le soleil", SF, 6),
        ("la perfide Albion", SF, 6),
        ("une loi qui ordonne la fermeture de toutes fenêtres", SF, 7),  # asterisks dropped
    ]
    # the chapter title between guillemets inside a citation is not a quote
    assert all("Pétition" not in c.quote for c in claims)


def test_the_citation_before_a_quote_counts_when_none_follows_and_terms_are_not_quotes():
    answer = (
        f"Selon {SF} §4, le « marché national » est en cause : « vous voulez réserver le marché national ».\n\n"
        "« Une phrase sans citation du tout » ici."
    )
    assert parse_answer(answer, PREFIXES) == [
        Claim("vous voulez réserver le marché national", SF, 4, None, f"{SF} §4", answer.index("».\n")),
        Claim("Une phrase sans citation du tout", end=answer.rindex("»")),
    ]


def test_numbered_passages_are_citations_when_the_caller_says_what_they_are():
    claims = parse_answer("Il dit « nous venons vous offrir une admirable occasion » [2].", {}, {2: (SF, 5)})
    assert [(c.source_file, c.paragraph) for c in claims] == [(SF, 5)]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            "Il écrit « la perfide Albion sans fin.\nEt la suite.",
            "the answer opens a quotation with « at line 1, character 10 and never closes it",
        ),
        (
            "Il écrit la perfide Albion » ici.",
            "the answer closes a quotation with » at line 1, character 28 that it never opened",
        ),
        ('Il écrit "la perfide Albion ici.', 'the answer opens a quotation with " at line 1, character 10'),
        (
            "Il écrit\n« la \x07perfide Albion »",
            "the answer holds a control character (U+0007) at line 2, character 6; remove it",
        ),
        ("x" * 100_001, "the answer is 100,001 characters long; the limit is 100,000"),
    ],
)
def test_an_answer_that_cannot_be_read_is_one_sentence(answer, message):
    with pytest.raises(BookragError) as err:
        parse_answer(answer, PREFIXES)
    assert str(err.value).startswith(message)
