"""The MCP tool check_quotes (issue 45) through the SDK's own client, on the fixture corpus: an
answer's quotes or a list of them, each with its verdict and the citation of where its words are;
bad input is one sentence and the server keeps serving."""

from __future__ import annotations

import anyio

from tests.mcp_server.test_server import stdio_session

C = "corpus/traite-des-echanges/premiere-partie"
BAKER = f"{C}/chapitre-01-le-boulanger/source.md"
ROADS = f"{C}/chapitre-02-les-routes/source.md"
SCHOLARLY = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes »"
ROOM = "http://127.0.0.1:8765/books/traite-des-echanges/premiere-partie"

ANSWER = f"""Le péage se reporte sur les prix : « Les marchands ont aussitôt augmenté leurs prix du montant exact
du péage » ({SCHOLARLY}, § 2). La route vaut une récolte : “Une route droite et bien entretenue vaut donc une
bonne récolte” ({ROADS} §2). Le boulanger, lui, « pétrit la farine et allume son four » ({ROOM}/chapitre-01-le-boulanger?hl=1#p1).
Le résumé dit que « la division du travail enrichit le village » ({BAKER} §2).
"""


def run(corpus_url, corpus_home, calls):
    async def go():
        async with stdio_session(corpus_url, corpus_home) as session:
            return [await session.call_tool("check_quotes", args) for args in calls]

    return anyio.run(go)


def test_an_answers_quotes_get_a_verdict_and_the_citation_of_where_the_words_are(corpus_url, corpus_home):
    bad = [
        {"quotes": [{"quote": "x"}] * 51},
        {"quotes": [{"quote": "a" * 2001}]},
        {"quotes": [{"quote": "  "}]},
        {"quotes": [{"quote": "le boulanger\u0007 pétrit"}]},
        {"quotes": [{"quote": "le boulanger\u0000 pétrit"}]},
        {"answer": "Il écrit « la perfide Albion sans fin."},
        {"answer": "Aucune citation ici."},
        {},
    ]
    good = {"answer": ANSWER}
    listed = {
        "quotes": [
            {"quote": "Avant l’aube, le boulanger pétrit la pâte", "source_file": BAKER, "paragraph": 1},
            {
                "quote": "Avant l'aube, le boulanger pétrit la pâte",
                "source_file": f"{C}/chapitre-09-nulle-part/source.md",
                "paragraph": 3,
            },
            {"quote": "Une route droite et bien entretenue", "source_file": ROADS, "paragraph": 99},
        ]
    }
    results = run(corpus_url, corpus_home, [*bad, good, listed])
    messages = [r.content[0].text for r in results[: len(bad)]]
    assert all(r.is_error for r in results[: len(bad)]), messages
    for message, expected in zip(
        messages,
        [
            "51 quotes in one call; the limit is 50: check them in several calls",
            "quote 1 is 2001 characters long; the limit is 2000",
            "quote 1 is empty (no word to check)",
            "quote 1 holds a control character (U+0007) at character 13; remove it",
            "quote 1 holds a NUL character; remove it",
            "the answer opens a quotation with « at line 1, character 10 and never closes it",
            "the answer holds no quote to check",
            "give either quotes",
        ],
    ):
        assert expected in message, message

    answer, listed_result = results[len(bad)], results[len(bad) + 1]  # the server kept serving
    assert not answer.is_error, answer.content
    out = answer.structured_content
    got = [(r["verdict"], r["source_file"], r["paragraph"]) for r in out["results"]]
    assert got == [
        ("exact", ROADS, 2),
        ("elsewhere", ROADS, 3),  # cited §2: the words are in §3
        ("close", BAKER, 1),
        ("summary", BAKER.replace("source.md", "summary.md"), 1),
    ]
    first, moved, close, summary = out["results"]
    assert (
        first["scholarly"] == f"{SCHOLARLY}, § 2" and first["url"] == f"{ROOM}/chapitre-02-les-routes?hl=2#p2"
    )
    assert moved["scholarly"] == f"{SCHOLARLY}, § 3" and moved["cited_paragraph"] == 2
    assert close["book_words"] == "pétrit la pâte et allume son four"
    assert close["differences"] == ["« farine » where the book has « pâte »"]
    assert "summary" in summary["note"] and summary["scholarly"].endswith("résumé, § 1")
    assert (out["exact"], out["all_exact"]) == (1, False)

    assert not listed_result.is_error, listed_result.content
    rows = listed_result.structured_content["results"]
    assert [r["verdict"] for r in rows] == ["exact", "elsewhere", "elsewhere"]
    assert "chapitre-09-nulle-part/source.md is loaded" in rows[1]["note"] and rows[1]["paragraph"] == 1
    assert "there is no §99" in rows[2]["note"] and rows[2]["paragraph"] == 3


def test_the_prompt_and_the_instructions_end_by_checking_the_quotes(corpus_url, corpus_home):
    async def go():
        async with stdio_session(corpus_url, corpus_home) as session:
            walk = await session.get_prompt("answer_from_the_books", {"question": "Qui paie les routes ?"})
            return walk.messages[0].content.text

    from mcp_server.server import INSTRUCTIONS

    assert anyio.run(go).rstrip().endswith("Check your quotes (check_quotes) before you answer.")
    assert INSTRUCTIONS.endswith("Check your quotes (check_quotes) before you answer.")
