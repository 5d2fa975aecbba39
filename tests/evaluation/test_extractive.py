"""evaluation.extractive: the extractive provider's chapter summaries scored against the team's,
on the fixture book (its five team-written chapter summaries); the metrics on summaries written
for the test; the tuning split; the grid's choice on the tuning half."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from evaluation import extractive
from loader import summarize
from loader.anchors import strip_anchors
from loader.chunking import split_sentences
from loader.manifest import book_tree, find_book
from loader.summarize import CENTROID_ONLY, EXTRACTIVE_WEIGHTS, ExtractiveWeights
from tests.conftest import BOOK, FIXTURES, make_home, settings_for

TEAM = (
    "Bastiat soutient que la protection déplace le travail [§1]. Le fer renchérit pour le laboureur [§2–3]."
    "\n\nLes forgerons n'y gagnent rien [§4]."
)


def test_the_metrics():
    same = extractive.scores(TEAM, TEAM)
    assert same == {"word_recall": 1.0, "thesis_recall": 1.0, "cites_shared": 1.0, "thesis_cited": 1.0}
    other = extractive.scores(TEAM, "Le fer du laboureur coûte plus cher [§3]. Les comètes passent [§9].")
    words = {"bastiat", "soutient", "protection", "déplace", "travail", "fer", "renchérit", "laboureur"}
    words |= {"forgerons", "gagnent"}
    assert other["word_recall"] == pytest.approx(2 / len(words))  # fer, laboureur
    assert other["thesis_recall"] == 0.0  # nothing of the first sentence
    assert other["cites_shared"] == 0.5 and other["thesis_cited"] == 0.0
    assert extractive.first_sentence(TEAM) == "Bastiat soutient que la protection déplace le travail [§1]."


def test_cases_and_halves_on_the_fixture_book(tmp_path):
    settings = settings_for(make_home(tmp_path), None)
    cases = extractive.cases(settings, BOOK)
    assert [c.node.split("/")[-2] for c in cases] == [
        "avant-propos",
        "chapitre-01-le-boulanger",
        "chapitre-02-les-routes",
        "chapitre-01-la-monnaie",
        "chapitre-02-l-impot",
    ]
    assert all(c.inputs and c.team for c in cases)
    tree = {n.source_file: n for n in book_tree(find_book(settings.corpus, BOOK))}
    assert [c.title for c in cases] == [summarize.own_title(tree[c.node]) for c in cases]
    assert cases[1].title == tree[cases[1].node].title != ""  # a chapter's own title
    for c in cases:
        assert c.tuning == (hashlib.sha256(c.node.encode()).digest()[0] % 2 == 0)
    assert extractive.held_out("bastiat-002") == (hashlib.sha256(b"bastiat-002").digest()[0] % 2 == 1)
    means = extractive.evaluate(cases, EXTRACTIVE_WEIGHTS)
    assert set(means) == set(extractive.METRICS) and all(0.0 <= v <= 1.0 for v in means.values())
    assert means["word_recall"] > 0 and means["cites_shared"] > 0


def test_the_provider_keeps_the_thesis_ahead_of_a_digression():
    """Issue 46's failure: the thesis opens the section, a middle digression repeats its own
    words. Decision 32 summarises it by the digression; the provider's weights put the thesis
    first and keep at most one sentence of the digression, in the same budget."""
    before = extractive.thesis_section_summary(CENTROID_ONLY)
    assert before == split_sentences(extractive.DIGRESSION)[1:]
    assert not extractive.keeps_the_thesis(CENTROID_ONLY)
    after = extractive.thesis_section_summary(EXTRACTIVE_WEIGHTS)
    assert after[0] == split_sentences(extractive.THESIS_SECTION[0])[0]
    assert extractive.keeps_the_thesis(EXTRACTIVE_WEIGHTS)


def test_answers_held_counts_a_summary_holding_the_answer(tmp_path):
    """A question counts when its chapter's extractive summary holds one of its answers, anchors
    aside; not when no answer is in it. The fixture's one synthesis question is found."""
    home = make_home(tmp_path)
    shutil.copytree(FIXTURES / "evals", home / "evals")
    settings = settings_for(home, None)
    cases = extractive.cases(settings, BOOK)
    asked = extractive.questions(settings, [BOOK], cases)
    assert [(q.id, q.case.node.split("/")[-2]) for q in asked] == [("traite-3", "chapitre-02-l-impot")]
    case = asked[0].case
    summary = strip_anchors(case.summary(EXTRACTIVE_WEIGHTS))
    held = summary.split(". ")[0]  # a sentence the summary holds, without its anchor
    assert extractive.answers_held([extractive.Question("q", case, (held,))], EXTRACTIVE_WEIGHTS) == 1.0
    missing = extractive.Question("q", case, ("Les comètes traversent le ciel des astronomes.",))
    assert extractive.answers_held([missing], EXTRACTIVE_WEIGHTS) == 0.0
    assert extractive.questions(settings_for(make_home(tmp_path / "bare"), None), [BOOK], cases) == []


def test_the_grid_takes_the_best_on_the_tuning_half(tmp_path, monkeypatch, capsys):
    home = make_home(tmp_path)
    shutil.copytree(FIXTURES / "evals", home / "evals")
    settings = settings_for(home, None)
    cases = extractive.cases(settings, BOOK)
    asked = extractive.questions(settings, [BOOK], cases)
    monkeypatch.setattr(extractive, "GRID", {"opening": (0.0, 0.3), "redundancy": (0.0, 0.6)})
    best, means = extractive.grid_search(cases, asked)
    weightings = [ExtractiveWeights(opening=o, redundancy=r) for o in (0.0, 0.3) for r in (0.0, 0.6)]
    allowed = [w for w in weightings if extractive.keeps_the_thesis(w)]
    assert ExtractiveWeights() not in allowed and allowed  # centrality alone may not be taken
    tried = [
        {**extractive.evaluate(cases, w), "answers_held": extractive.answers_held(asked, w)} for w in allowed
    ]
    assert best in allowed
    assert extractive.objective(means) == max(extractive.objective(t) for t in tried)
    assert isinstance(best, ExtractiveWeights) and (best.opening, best.redundancy) in {
        (o, r) for o in (0.0, 0.3) for r in (0.0, 0.6)
    }
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    out = tmp_path / "out.json"
    extractive.main(["--book", BOOK, "--grid", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "| decision 0032 (centroid only) |" in printed and "held-out half:" in printed
    assert "holds an answer sentence" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["tuning"] + data["held_out"] == len(cases)
    assert data["weights"]["decision 0032 (centroid only)"] == {**vars(CENTROID_ONLY)}
    assert set(data["answers_held"]["decision 0032 (centroid only)"]) == {
        f"{b} · {half}" for b in (BOOK, "both books") for half in ("tuning", "held-out")
    }


def test_synthesis_rewrites_copies_never_the_checkout(home, pg_url):
    """--synthesis on the fixture book: the team's tree and the provider's, each in a copy loaded
    into a scratch database, its one synthesis question asked in mode auto; the home is untouched."""
    from loader import frontmatter

    shutil.copytree(FIXTURES / "evals", home / "evals")
    summary = home / "corpus" / BOOK / "premiere-partie" / "chapitre-02-les-routes" / "summary.md"
    before = summary.read_bytes()
    out = extractive.synthesis(
        settings_for(home, pg_url), [BOOK], [("team", None), ("provider", EXTRACTIVE_WEIGHTS)]
    )
    assert out["questions"] == {BOOK: {"held_out": int(extractive.held_out("traite-3")), "all": 1}}
    for label in ("team", "provider"):
        for how in ("auto", "summaries"):
            found = out[label][f"{label} · {how} · {BOOK} · all"]["synthesis"]
            assert 0.0 <= found["mrr@10"] <= 1.0 and found["recall@10"] in (0.0, 1.0)
            assert out[label][f"{label} · {how} · both · all"]["synthesis"] == found
        assert set(out[label]["answer_rank"]["summaries"]) == {"traite-3"}
    assert summary.read_bytes() == before and frontmatter.read(summary)[0]["generator"] == "team"
