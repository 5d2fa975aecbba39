"""`bookrag verify FILE|-` (issue 45): one line per quote of a Markdown draft, exit status 1 unless
every quote is exact; and `bookrag ask` with an LLM (the local stand-in) checks its own answer,
asks once for a mended one, and marks what still fails."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from bookrag.cli import main
from tests.fakes import FakeOpenAI

C = "corpus/traite-des-echanges/premiere-partie"
BAKER = f"{C}/chapitre-01-le-boulanger/source.md"
ROADS = f"{C}/chapitre-02-les-routes/source.md"
ROUTES_CITE = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, « Les routes »"
BAKER_CITE = "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. I, « Le boulanger »"
DRAFT = f"""# Brouillon

Le boulanger se lève tôt : « Avant l’aube, le boulanger pétrit la pâte » ({BAKER_CITE}, § 1).
Le péage : « Les marchands ont aussitôt augmenté leurs prix » ({ROADS} §3).
"""


@pytest.fixture
def loaded(corpus_url, corpus_home, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", corpus_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    for name in ("BOOKRAG_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "BOOKRAG_READING_ROOM_URL"):
        monkeypatch.delenv(name, raising=False)


def test_verify_prints_a_line_per_quote_and_fails_unless_all_are_exact(loaded, tmp_path, capsys):
    draft = tmp_path / "draft.md"
    draft.write_text(DRAFT, encoding="utf-8")
    assert main(["verify", str(draft)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f" 1. exact      « Avant l’aube, le boulanger pétrit la pâte »  {BAKER_CITE}, § 1",
        f" 2. elsewhere  « Les marchands ont aussitôt augmenté leurs prix »  cited {ROADS} §3; "
        f"the words are at: {ROUTES_CITE}, § 2 ({ROADS} §2)",
        "1 of 2 quotes exact",
    ]
    draft.write_text(DRAFT.replace(f"{ROADS} §3", f"{ROADS} §2"), encoding="utf-8")
    assert main(["verify", str(draft)]) == 0
    assert capsys.readouterr().out.endswith("2 of 2 quotes exact\n")


def test_verify_reads_standard_input_and_writes_json(loaded, monkeypatch, capsys):
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("« Une route droite et bien entretenue vaut donc une bonne récolte »")
    )
    assert main(["verify", "-", "--json"]) == 1  # not cited: the words are found, elsewhere
    (line,) = capsys.readouterr().out.splitlines()
    row = json.loads(line)
    assert (row["verdict"], row["source_file"], row["paragraph"]) == ("elsewhere", ROADS, 3)
    assert (
        row["url"]
        == "http://127.0.0.1:8765/books/traite-des-echanges/premiere-partie/chapitre-02-les-routes?hl=3#p3"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Pas de citation ici.", "holds no quote to check"),
        (
            "Il dit « la perfide Albion sans fin.",
            "the answer opens a quotation with « at line 1, character 8",
        ),
    ],
)
def test_verify_refuses_in_one_sentence(loaded, tmp_path, capsys, text, message):
    draft = tmp_path / "d.md"
    draft.write_text(text, encoding="utf-8")
    assert main(["verify", str(draft)]) == 1
    assert message in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "missing.md")]) == 1
    assert "no file " in capsys.readouterr().err


@pytest.fixture
def llm(monkeypatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        monkeypatch.setenv("BOOKRAG_LLM_MODEL", "fake-chat")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


QUESTION = "Pourquoi le péage du pont a-t-il renchéri les marchandises ?"
WRONG = "Les marchands « ont aussitôt doublé leurs prix du montant exact du péage » [{n}]."
MENDED = "Les marchands « ont aussitôt augmenté leurs prix du montant exact du péage » [{n}]."


def _routes_2(request) -> int:
    """The number of the passage holding the roads' §2 in the prompt the LLM was sent."""
    import re

    for m in re.finditer(r"(?m)^\[(\d+)\] \(.*\)\n(.*)$", request.prompt):
        if m.group(2).startswith("Le conseil du village"):
            return int(m.group(1))
    raise AssertionError(request.prompt)


def test_ask_checks_its_answer_and_mends_a_wrong_quote_once(loaded, llm, capsys):
    llm.reply('{"keywords": "", "passage": ""}', match="Tu aides un moteur de recherche")
    llm.reply(lambda r: WRONG.format(n=_routes_2(r)), match="Réponds à la question")
    llm.reply(lambda r: MENDED.format(n=_routes_2(r)), match="Corrige ta réponse")
    assert main(["ask", QUESTION, "--k", "3", "--budget", "600"]) == 0
    out = capsys.readouterr().out
    mend = next(r for r in llm.answered if "Corrige ta réponse" in r.prompt)
    assert "« ont aussitôt doublé leurs prix du montant exact du péage »: not the book's words" in mend.prompt
    assert "says « ont aussitôt augmenté leurs prix du montant exact du péage. »" in mend.prompt
    assert MENDED.format(n=_routes_2(mend)) in out
    assert "(Quotes checked against the book after one mending of 1: 1 of 1 exact.)" in out
    assert "quote check:" not in out


def test_ask_marks_what_is_still_wrong_after_one_mending(loaded, llm, capsys):
    llm.reply('{"keywords": "", "passage": ""}', match="Tu aides un moteur de recherche")
    llm.reply(lambda r: WRONG.format(n=_routes_2(r)), times=2)
    assert main(["ask", QUESTION, "--k", "3", "--budget", "600"]) == 0
    out = capsys.readouterr().out
    assert "« ont aussitôt doublé leurs prix du montant exact du péage » [quote check: close" in out
    assert "» [quote check: close, at " + ROUTES_CITE + ", § 2]" in out
    assert "(Quotes checked against the book after one mending of 1: 0 of 1 exact.)" in out
    assert len([r for r in llm.answered if "Corrige ta réponse" in r.prompt]) == 1  # asked once only


def test_ask_says_when_its_answer_cannot_be_checked(loaded, llm, capsys):
    llm.reply('{"keywords": "", "passage": ""}', match="Tu aides un moteur de recherche")
    llm.reply("Les marchands « ont aussitôt augmenté leurs prix [2].", match="Réponds à la question")
    assert main(["ask", QUESTION, "--k", "3", "--budget", "600"]) == 0
    out = capsys.readouterr().out
    assert (
        "(Quotes not checked: the answer opens a quotation with « at line 1, character 15 and never closes it"
        in out
    )
    assert not [r for r in llm.answered if "Corrige ta réponse" in r.prompt]
