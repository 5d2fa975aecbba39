"""`bookrag ask`, word for word, on the fixture corpus: offline (the cited passages) and with an
LLM (the local OpenAI-compatible test server), whose prompt numbers the same passages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bookrag.cli import main
from tests.fakes import FakeOpenAI

QUESTION = "Qui paie l'entretien des routes ?"
HEADING = "Petit traité des échanges > Première partie"
PART = "corpus/traite-des-echanges/premiere-partie"
ROUTES = f"{PART}/chapitre-02-les-routes"
#: Each passage's scholarly citation (bookrag.cite), printed under its line.
CITE = "    cite: bookrag, *Petit traité des échanges* (2026), 1re partie"
#: Each passage's page in the reading room (BOOKRAG_READING_ROOM_URL's default), under its citation.
ROOM = "    http://127.0.0.1:8765/books/traite-des-echanges/premiere-partie"
#: The three passages of the context, in reading order: (citation line, what a summary cites). The
#: default search (auto: two-stage) ranks the routes chapter's two paragraphs; their chapter
#: summary comes in as their parent.
PASSAGES = [
    (
        f"[1] {HEADING} > Chapitre II (Les routes) (résumé) — {ROUTES}/summary.md §1, chunk 0  (context, level 1)\n"
        f"{CITE}, ch. II, « Les routes », résumé, § 1\n{ROOM}/chapitre-02-les-routes#summary-1",
        f"    cites the book: {ROUTES}/source.md §1, §2",
    ),
    (
        f"[2] {HEADING} > Chapitre II (Les routes) — {ROUTES}/source.md §1, chunk 0  (hit, level 0)\n"
        f"{CITE}, ch. II, « Les routes », § 1\n{ROOM}/chapitre-02-les-routes?hl=1#p1",
        None,
    ),
    (
        f"[3] {HEADING} > Chapitre II (Les routes) — {ROUTES}/source.md §2, chunk 1  (hit, level 0)\n"
        f"{CITE}, ch. II, « Les routes », § 2\n{ROOM}/chapitre-02-les-routes?hl=2#p2",
        None,
    ),
]
BAKER = f"{PART}/chapitre-01-le-boulanger"
#: The same question in mode hybrid (summaries among the hits): the part summary comes in as the
#: parent of the routes summary, whose hit is rendered with what its anchors cite.
HYBRID_PASSAGES = [
    (
        f"[1] {HEADING} (résumé) — {PART}/summary.md §1, chunk 0  (context, level 2)\n{CITE}, résumé, § 1\n{ROOM}#summary-1",
        f"    cites the book: {BAKER}/summary.md §1; {ROUTES}/summary.md §1",
    ),
    (
        f"[2] {HEADING} (résumé) — {PART}/summary.md §2, chunk 1  (context, level 2)\n{CITE}, résumé, § 2\n{ROOM}#summary-2",
        f"    cites the book: {ROUTES}/summary.md §1",
    ),
    (
        f"[3] {HEADING} > Chapitre II (Les routes) (résumé) — {ROUTES}/summary.md §1, chunk 0  (hit, level 1)\n"
        f"{CITE}, ch. II, « Les routes », résumé, § 1\n{ROOM}/chapitre-02-les-routes#summary-1",
        f"    cites the book: {ROUTES}/source.md §1, §2",
    ),
    (
        f"[4] {HEADING} > Chapitre II (Les routes) — {ROUTES}/source.md §2, chunk 1  (hit, level 0)\n"
        f"{CITE}, ch. II, « Les routes », § 2\n{ROOM}/chapitre-02-les-routes?hl=2#p2",
        None,
    ),
]
PART_1 = (
    "La première partie montre que la production et le transport forment une seule chaîne : le boulanger "
    "ne nourrit le village que si les routes laissent passer la farine."
)
PART_2 = "Elle conclut qu'un péage sur le pont renchérit le pain autant qu'une mauvaise récolte."
BAKER_SUMMARY = (
    "Le chapitre sur le boulanger soutient que la division du travail enrichit le village : le boulanger "
    "se spécialise, et chacun mange un meilleur pain pour moins d'effort."
)
ROUTES_SUMMARY = (
    "Le chapitre sur les routes montre que tout obstacle au transport agit comme une taxe : le réverbère "
    "du pont et le péage renchérissent la farine que paie le consommateur."
)
ROUTES_1 = (
    "La charrette du meunier met deux heures pour traverser la colline quand le chemin est sec, et une "
    "journée entière après la pluie. Chaque ornière ajoute quelques sous au prix du sac."
)
ROUTES_2 = (
    "Le conseil du village a voulu installer un péage sur le pont pour payer le réverbère. Les marchands "
    "ont aussitôt augmenté leurs prix du montant exact du péage."
)

#: How `ask` begins without an LLM: the question, then why the answer is the passages themselves.
OFFLINE = [
    f"Question : {QUESTION}",
    "",
    "(No LLM configured: the answer is the cited passages, in reading order; set BOOKRAG_LLM_MODEL and "
    "OPENAI_BASE_URL for a written answer.)",
    "",
]


@pytest.fixture
def loaded(corpus_url, corpus_home, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    for name in ("BOOKRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def llm(monkeypatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        monkeypatch.setenv("BOOKRAG_LLM_MODEL", "fake-chat")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def test_ask_offline_quotes_the_passages_and_what_they_cite(loaded, capsys):
    (c1, s1), (c2, _), (c3, _) = PASSAGES
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 0
    assert capsys.readouterr() == (
        "\n".join(
            [
                *OFFLINE,
                c1,
                f"    {ROUTES_SUMMARY}",
                s1,
                f"      §1 « {ROUTES_1} »",
                c2,
                f"    {ROUTES_1}",
                c3,
                f"    {ROUTES_2}",
            ]
        )
        + "\n",
        "",
    )


def test_ask_in_mode_hybrid_renders_summary_hits_and_what_they_cite(loaded, capsys):
    (c1, s1), (c2, s2), (c3, s3), (c4, _) = HYBRID_PASSAGES
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400", "--mode", "hybrid"]) == 0
    assert capsys.readouterr() == (
        "\n".join(
            [
                *OFFLINE,
                c1,
                f"    {PART_1}",
                s1,
                f"      §1 « {BAKER_SUMMARY} »",
                c2,
                f"    {PART_2}",
                s2,
                f"      §1 « {ROUTES_SUMMARY} »",
                c3,
                f"    {ROUTES_SUMMARY}",
                s3,
                f"      §1 « {ROUTES_1} »",
                c4,
                f"    {ROUTES_2}",
            ]
        )
        + "\n",
        "",
    )


#: What the LLM is asked first, and answers: the question in the author's own words.
PHRASINGS_ASKED = "Tu aides un moteur de recherche à trouver"
NO_PHRASINGS = '{"keywords": "", "passage": ""}'


def test_ask_with_an_llm_prints_its_answer_over_the_citations(loaded, llm, capsys):
    llm.reply(NO_PHRASINGS, match=PHRASINGS_ASKED)
    llm.reply(
        "Les marchands reportent le péage sur leurs prix [3], comme chaque ornière [2].",
        match="Réponds à la question",
    )
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 0
    assert capsys.readouterr() == (
        "\n".join(
            [
                "(the LLM's reply held no usable keywords or passage; the question is searched alone)",
                "",
                f"Question : {QUESTION}",
                "",
                "Les marchands reportent le péage sur leurs prix [3], comme chaque ornière [2].",
                "",
                *[line for passage in PASSAGES for line in passage if line],
            ]
        )
        + "\n",
        "",
    )
    [asked, request] = llm.answered
    assert PHRASINGS_ASKED in asked.prompt and f"Question : {QUESTION}" in asked.prompt
    assert "Petit traité des échanges" in asked.prompt  # the books searched, from rag.list_books
    assert (request.model, request.body["temperature"], request.headers["authorization"]) == (
        "fake-chat",
        0,
        "Bearer test",
    )
    assert request.prompt.endswith(
        "\n\n".join(
            [
                f"Question : {QUESTION}",
                "Extraits :",
                f"[1] ({CITE[10:]}, ch. II, « Les routes », résumé, § 1)\n{ROUTES_SUMMARY}\n"
                f"(passages du livre résumés ici : {ROUTES}/source.md §1, §2)",
                f"[2] ({CITE[10:]}, ch. II, « Les routes », § 1)\n{ROUTES_1}",
                f"[3] ({CITE[10:]}, ch. II, « Les routes », § 2)\n{ROUTES_2}",
            ]
        )
    )


def test_a_failing_llm_is_one_sentence(loaded, llm, capsys):
    llm.fail(404, times=None)
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 1
    assert capsys.readouterr() == (
        "",
        f"error: model 'fake-chat' not found at {llm.base_url}/ (404): check BOOKRAG_LLM_MODEL "
        "(and OPENAI_BASE_URL)\n",
    )


def test_ask_with_an_llm_searches_with_the_phrasings_it_writes(loaded, llm, capsys):
    """The LLM first rewrites the question in the author's words; they are printed, searched with
    the question (rag.search_phrasings) and the answer is written over the fused hits' context."""
    llm.reply(
        'Voici : {"keywords": "péage pont réverbère marchands prix", '
        '"passage": "Le péage du pont, les marchands le reportent sur le prix de chaque sac."}',
        match=PHRASINGS_ASKED,
    )
    llm.reply("Le péage passe dans les prix [2].", match="Réponds à la question")
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        "Phrasings : péage pont réverbère marchands prix",
        "Phrasings : Le péage du pont, les marchands le reportent sur le prix de chaque sac.",
        "",
        f"Question : {QUESTION}",
    ]
    assert "Le péage passe dans les prix [2]." in out
    assert any(
        line.startswith("[") and f"{ROUTES}/source.md §2" in line for line in out
    )  # the péage paragraph
    [_, request] = llm.answered
    assert ROUTES_2 in request.prompt


def test_a_phrasings_reply_that_is_not_json_falls_back_to_the_question(loaded, llm, capsys):
    llm.reply("Je ne sais pas.", match=PHRASINGS_ASKED)
    llm.reply("Réponse [1].", match="Réponds à la question")
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "(the LLM's reply held no usable keywords or passage; the question is searched alone)"
    assert [line for line in out if line.startswith("[")] == [
        c.split("\n")[0] for c, _ in PASSAGES
    ]  # the question's own context


def test_phrasings_given_as_a_list_are_joined_and_null_ones_dropped(loaded, llm, capsys):
    llm.reply('{"keywords": ["péage", "pont", "marchands"], "passage": null}', match=PHRASINGS_ASKED)
    llm.reply("Réponse [1].", match="Réponds à la question")
    assert main(["ask", QUESTION, "--k", "2", "--budget", "400"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["Phrasings : péage pont marchands", "", f"Question : {QUESTION}"]
