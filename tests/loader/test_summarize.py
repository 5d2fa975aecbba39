"""The summarize stage (loader.summarize) through the real `openai` SDK client against a small
OpenAI-compatible server on 127.0.0.1 (tests/fakes), on a temporary copy of the fixture corpus;
and the offline extractive provider."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bookrag.errors import BookragError
from loader import frontmatter, summarize
from loader.anchors import check_body, check_file, find_anchors, strip_anchors, units_of
from loader.chunking import paragraphs, split_sentences
from loader.manifest import book_tree, find_book
from loader.summarize import EXTRACTIVE_WORDS, Item, LLMConfig, SummarizeReport, render_prompt, summarize_book
from loader.tokens import count_tokens
from tests.conftest import BOOK, make_home, settings_for
from tests.fakes import FakeOpenAI, summary_for
from tests.fakes.openai_server import subject_of

BASE = f"corpus/{BOOK}"
FRONT = f"{BASE}/avant-propos/summary.md"
P1C1 = f"{BASE}/premiere-partie/chapitre-01-le-boulanger/summary.md"
P1C2 = f"{BASE}/premiere-partie/chapitre-02-les-routes/summary.md"
P2C1 = f"{BASE}/deuxieme-partie/chapitre-01-la-monnaie/summary.md"
P2C2 = f"{BASE}/deuxieme-partie/chapitre-02-l-impot/summary.md"
P1 = f"{BASE}/premiere-partie/summary.md"
P2 = f"{BASE}/deuxieme-partie/summary.md"
ROOT = f"{BASE}/summary.md"
LEVEL1 = [FRONT, P1C1, P1C2, P2C1, P2C2]
ALL = LEVEL1 + [P1, P2, ROOT]  # the order the stage processes them in: level 1, 2, 3
PARENT = {FRONT: ROOT, P1C1: P1, P1C2: P1, P2C1: P2, P2C2: P2, P1: ROOT, P2: ROOT, ROOT: None}
LEVEL = {**{f: 1 for f in LEVEL1}, P1: 2, P2: 2, ROOT: 3}
TEMPLATE = {1: "section.md.j2", 2: "part.md.j2", 3: "book.md.j2"}
PROMPTS = Path(summarize.__file__).parent / "prompts"
MODEL = "fake-model"


# --- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as s:
        yield s


@pytest.fixture
def book_home(tmp_path: Path) -> Path:
    """A private copy of the fixture corpus (no sidecars needed here)."""
    return make_home(tmp_path)


def config(server: FakeOpenAI, **kw) -> LLMConfig:
    args = dict(
        model=MODEL,
        base_url=server.base_url,
        api_key="test",
        context_window=32_768,
        max_output_tokens=700,
        timeout=60.0,
        max_retries=2,
    )
    args.update(kw)
    return LLMConfig(**args)


def run(home: Path, server: FakeOpenAI | None, messages: list[str] | None = None, **kw) -> SummarizeReport:
    settings = settings_for(home, None)
    book = find_book(settings.corpus, BOOK)
    if server is not None:
        kw.setdefault("llm_config", config(server))
    else:
        kw.setdefault("provider", "extractive")
    return summarize_book(
        settings, book, progress=False, say=(messages if messages is not None else []).append, **kw
    )


def body(home: Path, rel: str) -> str:
    return frontmatter.read(home / rel)[1].strip()


def plain(home: Path, rel: str) -> str:
    """A summary's body without its anchors: what a level above is given."""
    return strip_anchors(body(home, rel))


def meta(home: Path, rel: str) -> dict:
    return frontmatter.read(home / rel)[0]


def source_paragraphs(home: Path, summary_rel: str) -> list[str]:
    return paragraphs(frontmatter.read(home / summary_rel.replace("summary.md", "source.md"))[1])


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file under the corpus, hidden ones included."""
    return {
        str(p.relative_to(home)): p.read_bytes() for p in sorted((home / "corpus").rglob("*")) if p.is_file()
    }


def leftovers(home: Path) -> list[Path]:
    return [p for p in (home / "corpus").rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]


def kind(prompt: str) -> str:
    if "Fusionne-les" in prompt:
        return "merge"
    if "Résume la section suivante" in prompt:
        return "1"
    if "Partie à résumer" in prompt:
        return "2"
    if "l'ouvrage entier" in prompt:
        return "3"
    raise AssertionError(f"unknown prompt: {prompt[:200]}")


def heading(rel: str) -> str:
    """The heading path a prompt names for a node (the subject the fake server answers about)."""
    meta_path = frontmatter.read(Path(__file__).parents[1] / "fixtures" / rel)[0]["heading_path"]
    if rel == ROOT:
        return "Petit traité des échanges"
    return meta_path.removesuffix(" (résumé)")


def requests_for(server: FakeOpenAI, rel: str) -> list:
    return [r for r in server.requests if subject_of(r.prompt) == heading(rel) and kind(r.prompt) != "merge"]


def positions(text: str, parts: list[str]) -> list[int]:
    found = [text.find(p) for p in parts]
    assert all(i >= 0 for i in found), [p[:60] for p, i in zip(parts, found) if i < 0]
    return found


MORE_BREAD = [
    "Le samedi, la file devant la boutique s'allonge jusqu'à la fontaine de la place. Chacun y échange les nouvelles du village en attendant son tour.",
    "Les enfants portent les miches encore chaudes dans des paniers d'osier. Ils reçoivent parfois un petit pain au lait pour leur peine.",
    "Le curé achète deux pains bis, l'aubergiste en prend douze pour ses voyageurs. Le forgeron paie avec des clous plutôt qu'avec des sous.",
    "Quand la farine manque après un été sec, Martin réduit ses fournées. Le prix du pain monte alors et les familles reviennent à la galette.",
    "Un voisin a voulu ouvrir un second four près du lavoir. Les deux boulangers se disputent désormais les clients de la grand-rue.",
    "Depuis cette concurrence, les miches sont plus grosses et la boutique ouvre plus tôt. Personne au village ne regrette le temps du four unique.",
]


def extend_bakery(home: Path) -> list[str]:
    """Six more paragraphs for the baker's chapter (about 250 words in all); its paragraphs."""
    src = home / P1C1.replace("summary.md", "source.md")
    src.write_text(
        src.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n\n".join(MORE_BREAD) + "\n",
        encoding="utf-8",
    )
    return source_paragraphs(home, P1C1)


def sha(obj: list[list[str]]) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False).encode()).hexdigest()


# --- 1. bottom-up: what is sent, level by level -------------------------------------------


def test_bottom_up_prompts_levels_and_order(book_home: Path, server: FakeOpenAI) -> None:
    report = run(book_home, server, force=True)
    assert report.generated == ALL and not report.failed
    assert len(server.requests) == 8 == report.requests
    assert [kind(p) for p in server.prompts] == ["1"] * 5 + ["2"] * 2 + ["3"]
    assert [subject_of(p) for p in server.prompts] == [heading(f) for f in ALL]
    for r in server.requests:
        assert r.path == "/v1/chat/completions" and r.model == MODEL and r.max_tokens == 700
        assert r.headers["authorization"] == "Bearer test"
        assert (
            r.body["temperature"] == 0
            and len(r.body["messages"]) == 1
            and r.body["messages"][0]["role"] == "user"
        )
    assert report.tokens_sent == sum(count_tokens(p) for p in server.prompts)

    # level 1: the section's own paragraphs, in order, numbered as loader.anchors numbers them,
    # and the book's theme variables
    for rel, prompt in zip(LEVEL1, server.prompts[:5]):
        paras = source_paragraphs(book_home, rel)
        assert len(paras) >= 2 and units_of(book_home, rel) == paras
        numbered = [f"\n§{k} {p}\n" for k, p in enumerate(paras, start=1)]
        assert positions(prompt, numbered) == sorted(positions(prompt, numbered))
        assert f"N'emploie que les numéros donnés (§1 à §{len(paras)})" in prompt
        assert "Chaque phrase du résumé, sans exception, se termine par une ancre" in prompt
        for text in (
            "Équipe bookrag",
            "« Petit traité des échanges »",
            "(2026)",
            "économie politique",
            "petit traité (essai contemporain)",
            "Angle d'analyse du lecteur : Comprendre les échanges d'un village : le pain, les routes, la monnaie, l'impôt.",
            "« bookrag soutient que… »",
        ):
            assert text in prompt, text
        others = [p for f in LEVEL1 if f != rel for p in source_paragraphs(book_home, f)]
        assert not any(p in prompt for p in others)  # only this section's text

    # level 2: the part's chapter summaries just generated (not the team's), in book order
    for part, chapters, prompt in (
        (P1, [P1C1, P1C2], server.prompts[5]),
        (P2, [P2C1, P2C2], server.prompts[6]),
    ):
        new = [body(book_home, c) for c in chapters]
        assert new == [server.requests[ALL.index(c)].answer for c in chapters]
        assert all(find_anchors(n) for n in new) and not any(n in prompt for n in new)
        new = [plain(book_home, c) for c in chapters]  # given without their anchors (they number paragraphs)
        assert positions(prompt, new) == sorted(positions(prompt, new))
        headings = [
            "## §1 — Chapitre I (",
            "## §2 — Chapitre II (",
        ]  # the sections, numbered as units_of numbers them
        assert positions(prompt, headings) == sorted(positions(prompt, headings))
        assert units_of(book_home, part) == chapters
        assert "N'emploie que les numéros donnés (§1 à §2)" in prompt
        assert (
            "Partie à résumer : Petit traité des échanges > " in prompt
            and "Angle d'analyse du lecteur" in prompt
        )
        assert "Le chapitre sur" not in prompt  # the team's old summaries are not what is sent
        assert not any(p in prompt for c in chapters for p in source_paragraphs(book_home, c))

    # level 3: the front matter's and the parts' new summaries, in book order
    book_prompt = server.prompts[7]
    ins = [plain(book_home, f) for f in (FRONT, P1, P2)]
    assert positions(book_prompt, ins) == sorted(positions(book_prompt, ins))
    headings = ["## §1 — Avant-propos", "## §2 — Première partie", "## §3 — Deuxième partie"]
    assert positions(book_prompt, headings) == sorted(positions(book_prompt, headings))
    assert units_of(book_home, ROOT) == [FRONT, P1, P2]
    assert not any(
        plain(book_home, c) in book_prompt for c in (P1C1, P1C2, P2C1, P2C2)
    )  # chapters reach it through their part


# --- 2. direct algorithm ------------------------------------------------------------------


def test_direct_algorithm_inputs(book_home: Path, server: FakeOpenAI) -> None:
    report = run(book_home, server, force=True, algorithm="direct")
    assert report.generated == ALL
    assert [kind(p) for p in server.prompts] == ["1"] * 5 + ["2"] * 2 + ["3"]
    for _part, chapters, prompt in (
        (P1, [P1C1, P1C2], server.prompts[5]),
        (P2, [P2C1, P2C2], server.prompts[6]),
    ):
        full = [p for c in chapters for p in source_paragraphs(book_home, c)]
        assert positions(prompt, full) == sorted(positions(prompt, full))  # the full source text, in order
        assert "Tu reçois le texte intégral de ses sections" in prompt
        assert not any(plain(book_home, c) in prompt for c in chapters)
        assert positions(prompt, ["## §1 — Chapitre I (", "## §2 — Chapitre II ("])  # numbered by section
    book_prompt = server.prompts[7]
    level1 = [plain(book_home, f) for f in LEVEL1]
    assert positions(book_prompt, level1) == sorted(positions(book_prompt, level1))  # every level-1 summary
    assert "Tu reçois les résumés de toutes les sections" in book_prompt
    assert plain(book_home, P1) not in book_prompt and plain(book_home, P2) not in book_prompt
    # each chapter is numbered by the book's child it lies under (its part), as the anchors cite them
    headings = [
        "## §1 — Avant-propos",
        "## §2 — Première partie > Chapitre I (",
        "## §2 — Première partie > Chapitre II (",
        "## §3 — Deuxième partie > Chapitre I (",
        "## §3 — Deuxième partie > Chapitre II (",
    ]
    assert positions(book_prompt, headings) == sorted(positions(book_prompt, headings))
    assert "N'emploie que les numéros donnés (§1 à §3)" in book_prompt
    assert [meta(book_home, f)["algorithm"] for f in ALL] == ["bottom-up"] * 5 + ["direct"] * 3
    # level 1 is the same in both algorithms: a bottom-up run afterwards only redoes levels 2-3
    server.reset()
    assert run(book_home, server).generated == [P1, P2, ROOT]


# --- 3. frontmatter -----------------------------------------------------------------------


def test_frontmatter_written(book_home: Path, server: FakeOpenAI) -> None:
    run(book_home, server, force=True)
    answers = {subject_of(r.prompt): r.answer for r in server.requests}
    for rel in ALL:
        m, text = frontmatter.read(book_home / rel)
        frontmatter.validate(m, rel)
        level = LEVEL[rel]
        assert text.strip() == answers[heading(rel)]  # the body is the server's answer
        assert text == answers[heading(rel)] + "\n"
        assert find_anchors(text) and not check_file(
            book_home, book_home / rel
        )  # anchored, as `bookrag check` wants
        tpl = TEMPLATE[level]
        fixture_meta = frontmatter.read(Path(__file__).parents[1] / "fixtures" / rel)[0]
        assert m == {
            "book": BOOK,
            "title": fixture_meta["title"],
            "heading_path": fixture_meta["heading_path"],
            "level": level,
            "node_type": "summary",
            "parent_source_file": PARENT[rel],
            "embed": True,
            "generator": "llm",
            "model": MODEL,
            "algorithm": "bottom-up",
            "prompt_template": tpl,
            "template_sha256": hashlib.sha256((PROMPTS / tpl).read_bytes()).hexdigest(),
            "inputs_sha256": m["inputs_sha256"],
        }
    # inputs_sha256 is the hash of the exact inputs, recomputed here from the files
    for rel in LEVEL1:
        assert meta(book_home, rel)["inputs_sha256"] == sha(
            [["", p] for p in source_paragraphs(book_home, rel)]
        )
    assert meta(book_home, P1)["inputs_sha256"] == sha(
        [
            ["Chapitre I (Le boulanger)", plain(book_home, P1C1)],
            ["Chapitre II (Les routes)", plain(book_home, P1C2)],
        ]
    )
    assert meta(book_home, ROOT)["inputs_sha256"] == sha(
        [
            ["Avant-propos", plain(book_home, FRONT)],
            ["Première partie", plain(book_home, P1)],
            ["Deuxième partie", plain(book_home, P2)],
        ]
    )
    assert meta(book_home, ROOT)["heading_path"] == "Petit traité des échanges (résumé)"
    assert (
        meta(book_home, P1C2)["heading_path"]
        == "Petit traité des échanges > Première partie > Chapitre II (Les routes) (résumé)"
    )
    assert not leftovers(book_home)


# --- 4. incrementality --------------------------------------------------------------------


def test_incremental(book_home: Path, server: FakeOpenAI) -> None:
    # the fixture's summaries are the team's: kept without force, nothing sent
    before = snapshot(book_home)
    report = run(book_home, server)
    assert report.kept_team == ALL and not report.generated and not server.requests
    assert snapshot(book_home) == before

    # --force replaces them all
    report = run(book_home, server, force=True)
    assert report.generated == ALL and len(server.requests) == 8
    assert all(meta(book_home, f)["generator"] == "llm" for f in ALL)

    # a second run: nothing to do, nothing sent
    server.reset()
    report = run(book_home, server)
    assert report.skipped == ALL and not report.generated and not server.requests

    # one chapter edited: that chapter, its part, the book; nothing else
    before = snapshot(book_home)
    src = book_home / P1C2.replace("summary.md", "source.md")
    src.write_text(
        src.read_text(encoding="utf-8")
        + "\nLe pont neuf a rendu la farine moins chère au marché du samedi.\n",
        encoding="utf-8",
    )
    server.reset()
    report = run(book_home, server)
    assert report.generated == [P1C2, P1, ROOT] and sorted(report.skipped) == sorted(
        [FRONT, P1C1, P2C1, P2C2, P2]
    )
    assert [subject_of(p) for p in server.prompts] == [heading(P1C2), heading(P1), heading(ROOT)]
    assert "Le pont neuf a rendu la farine" in server.prompts[0]
    after = snapshot(book_home)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {P1C2, P1, ROOT, P1C2.replace("summary.md", "source.md")}

    # another model: everything is regenerated, and says so
    server.reset()
    report = run(book_home, server, llm_config=config(server, model="autre-modele"))
    assert report.generated == ALL and len(server.requests) == 8
    assert {r.model for r in server.requests} == {"autre-modele"}
    assert all(meta(book_home, f)["model"] == "autre-modele" for f in ALL)

    # --force regenerates even current summaries
    server.reset()
    report = run(book_home, server, llm_config=config(server, model="autre-modele"), force=True)
    assert report.generated == ALL and len(server.requests) == 8


def test_template_change_regenerates_its_level_and_above(
    book_home: Path, server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(book_home, server, force=True)
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS, prompts)
    part = prompts / "part.md.j2"
    part.write_text(
        part.read_text(encoding="utf-8").replace("Règles :", "Règles (révisées) :"), encoding="utf-8"
    )
    monkeypatch.setattr(summarize, "PROMPTS", prompts)
    server.reset()
    report = run(book_home, server)
    assert report.generated == [P1, P2, ROOT]
    assert all("Règles (révisées) :" in p for p in server.prompts[:2])
    assert meta(book_home, P1)["template_sha256"] == hashlib.sha256(part.read_bytes()).hexdigest()


def test_levels_option(book_home: Path, server: FakeOpenAI) -> None:
    report = run(book_home, server, force=True, levels={1})
    assert report.generated == LEVEL1 and [kind(p) for p in server.prompts] == ["1"] * 5
    assert meta(book_home, P1)["generator"] == "team"


# --- 5. dry run ---------------------------------------------------------------------------


def test_dry_run_sends_nothing_and_counts_tokens(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    messages: list[str] = []
    report = run(book_home, server, messages, force=True, dry_run=True)
    assert not server.requests and report.requests == 0
    assert snapshot(book_home) == before
    assert report.generated == ALL
    settings = settings_for(book_home, None)
    book = find_book(settings.corpus, BOOK)
    nodes = {n.source_file: n for n in book_tree(book)}
    counts = {}
    for msg in messages:
        m = re.fullmatch(
            r"would generate (\S+) \(level (\d), [^)]+\): (\d+) prompt tokens( \(estimate: .*\))?", msg
        )
        assert m, msg
        counts[m.group(1)] = int(m.group(3))
    assert list(counts) == ALL
    for rel in LEVEL1:  # the very prompt the real run would send
        prompt = render_prompt(
            "section.md.j2",
            book,
            nodes[rel],
            [Item("", p) for p in source_paragraphs(book_home, rel)],
            "bottom-up",
        )
        assert counts[rel] == count_tokens(prompt)
    assert all(counts[f] > 100 for f in (P1, P2, ROOT))


def test_dry_run_on_a_book_without_summaries(book_home: Path, server: FakeOpenAI) -> None:
    """Levels 2-3 need summaries a dry run does not write: it must still plan the whole tree."""
    for rel in ALL:
        (book_home / rel).unlink()
    messages: list[str] = []
    report = run(book_home, server, messages, dry_run=True)
    assert report.generated == ALL and not server.requests
    assert not any((book_home / rel).exists() for rel in ALL)
    assert all("missing" in m for m in messages) and len(messages) == 8


def test_dry_run_foresees_the_parents(book_home: Path, server: FakeOpenAI) -> None:
    run(book_home, server, force=True)
    src = book_home / P2C2.replace("summary.md", "source.md")
    src.write_text(
        src.read_text(encoding="utf-8") + "\nLe moulin paie sa part pour entretenir le pont.\n",
        encoding="utf-8",
    )
    server.reset()
    dry = run(book_home, server, dry_run=True)
    assert dry.generated == [P2C2, P2, ROOT] and not server.requests
    real = run(book_home, server)
    assert real.generated == dry.generated and len(server.requests) == 3


# --- 6. oversized input: slices, then a merge ---------------------------------------------


def test_oversized_section_is_sliced_then_merged(book_home: Path, server: FakeOpenAI) -> None:
    paras = extend_bakery(book_home)
    assert len(paras) == 9
    settings = settings_for(book_home, None)
    book = find_book(settings.corpus, BOOK)
    nodes = {n.source_file: n for n in book_tree(book)}

    def tokens(rel: str, items: list[str], slice_: dict | None = None) -> int:
        return count_tokens(
            render_prompt(
                "section.md.j2", book, nodes[rel], [Item("", p) for p in items], "bottom-up", slice_
            )
        )

    # the window holds every other section whole, not the baker's chapter
    limit = max(tokens(rel, source_paragraphs(book_home, rel)) for rel in LEVEL1 if rel != P1C1)
    assert tokens(P1C1, paras) > limit
    messages: list[str] = []
    report = run(
        book_home,
        server,
        messages,
        force=True,
        llm_config=config(server, context_window=limit + 200, max_output_tokens=200),
    )
    assert report.generated == ALL and not report.failed
    for rel in LEVEL1:
        if rel != P1C1:
            assert len(requests_for(server, rel)) == 1

    mine = [r for r in server.requests if subject_of(r.prompt) == heading(P1C1)]
    slices, merge = mine[:-1], mine[-1]
    n = len(slices)
    assert 2 <= n < len(paras)
    assert [kind(r.prompt) for r in mine] == ["1"] * n + ["merge"]
    first = server.requests.index(mine[0])
    assert server.requests[first : first + n + 1] == mine  # consecutive: the slices in order, then the merge
    assert first == 1  # right after the front matter, before the other chapters
    # every paragraph in exactly one slice, the slices consecutive runs of paragraphs in text order
    where = [[k for k, r in enumerate(slices) if p in r.prompt] for p in paras]
    assert all(len(w) == 1 for w in where), where
    owner = [w[0] for w in where]
    assert owner == sorted(owner) and set(owner) == set(range(n))
    for k, r in enumerate(slices):
        assert f"Tu ne reçois que la partie {k + 1} sur {n} de cette section" in r.prompt
        assert count_tokens(r.prompt) <= limit
        group = [p for p, o in zip(paras, owner) if o == k]
        assert positions(r.prompt, group) == sorted(positions(r.prompt, group))
        # the slice keeps the section's numbering: its paragraphs carry their global §N, its summary cites them
        nums = [i + 1 for i, o in enumerate(owner) if o == k]
        assert all(f"\n§{i} {paras[i - 1]}\n" in r.prompt for i in nums)
        assert f"(paragraphes §{nums[0]} à §{nums[-1]} sur {len(paras)})" in r.prompt
        assert f"N'emploie que les numéros donnés (§{nums[0]} à §{nums[-1]})" in r.prompt
        cited = {u for a in find_anchors(r.answer) for u in a.units}
        assert cited and cited <= set(nums) and not check_body(r.answer, 1, len(paras), every_sentence=True)
        if k + 1 < n:  # greedy: the next paragraph would not have fitted
            nxt = paras[owner.index(k + 1)]
            assert tokens(P1C1, group + [nxt], {"index": k + 1, "count": n}) > limit
    # the merge: merge.md.j2 with the partial summaries, in order; its answer is the summary
    assert "Fusionne-les en un seul résumé" in merge.prompt
    assert (
        "résumés partiels consécutifs de : Petit traité des échanges > Première partie > Chapitre I (Le boulanger)"
        in merge.prompt
    )
    assert f"Voici, dans l'ordre, {n} résumés partiels" in merge.prompt
    assert "Longueur : 120 à 250 mots ; les ancres ne comptent pas." in merge.prompt
    assert f"paragraphes numérotés §1 à §{len(paras)} de l'ensemble. Garde-les telles quelles" in merge.prompt
    partials = [r.answer for r in slices]
    assert len(set(partials)) == n
    assert positions(merge.prompt, partials) == sorted(positions(merge.prompt, partials))
    labels = [f"## Résumé partiel {k}" for k in range(1, n + 1)]
    assert positions(merge.prompt, labels) == sorted(positions(merge.prompt, labels))
    assert not any(p in merge.prompt for p in paras)
    assert body(book_home, P1C1) == merge.answer
    assert not check_body(merge.answer, 1, len(paras), every_sentence=True)
    assert meta(book_home, P1C1)["prompt_template"] == "section.md.j2"  # the node's own template is recorded
    assert any(m.startswith(P1C1) and f"summarising {n} slices then merging" in m for m in messages)
    assert report.requests == len(server.requests)
    # the part is made from the merged summary
    assert plain(book_home, P1C1) in requests_for(server, P1)[0].prompt


def test_one_input_larger_than_the_window(book_home: Path, server: FakeOpenAI) -> None:
    with pytest.raises(BookragError, match=r"alone exceeds the model's window .*BOOKRAG_LLM_CONTEXT"):
        run(
            book_home,
            server,
            force=True,
            llm_config=config(server, context_window=300, max_output_tokens=200),
        )
    assert not server.requests


# --- 7. retries (the openai client's own) -------------------------------------------------


@pytest.mark.parametrize("status,times", [(429, 2), (500, 1)])
def test_transient_errors_are_retried(book_home: Path, server: FakeOpenAI, status: int, times: int) -> None:
    server.fail(status, times=times, match="Avant-propos")
    report = run(book_home, server, force=True, levels={1})
    assert report.generated == LEVEL1 and not report.failed
    mine = requests_for(server, FRONT)
    assert [r.status for r in mine] == [status] * times + [200]
    assert [r.headers["x-stainless-retry-count"] for r in mine] == [str(i) for i in range(times + 1)]
    assert len({json.dumps(r.body, sort_keys=True) for r in mine}) == 1  # the same request again
    assert body(book_home, FRONT) == mine[-1].answer
    assert len(server.requests) == 5 + times and report.requests == 5


def test_transient_error_outliving_retries_fails_the_node(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.fail(500, times=None, match="Avant-propos")
    report = run(book_home, server, force=True, llm_config=config(server, max_retries=1))
    assert report.failed == [FRONT, ROOT]
    assert report.generated == [P1C1, P1C2, P2C1, P2C2, P1, P2]
    assert len(requests_for(server, FRONT)) == 2 and not requests_for(server, ROOT)
    assert snapshot(book_home)[FRONT] == before[FRONT] and snapshot(book_home)[ROOT] == before[ROOT]


# --- 8. errors ----------------------------------------------------------------------------


def test_unauthorized_stops_with_a_clear_message(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.fail(401, times=None)
    with pytest.raises(BookragError) as err:
        run(book_home, server, force=True)
    assert (
        str(err.value) == f"the LLM endpoint {server.base_url}/ refused the API key (401): set OPENAI_API_KEY"
    )
    assert len(server.requests) == 1  # not retried
    assert snapshot(book_home) == before


def test_unknown_model_stops_naming_the_model(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.models = {MODEL}
    with pytest.raises(BookragError) as err:
        run(book_home, server, force=True, llm_config=config(server, model="absent-model"))
    assert (
        "'absent-model'" in str(err.value)
        and "404" in str(err.value)
        and "BOOKRAG_LLM_MODEL" in str(err.value)
    )
    assert len(server.requests) == 1 and server.requests[0].model == "absent-model"
    assert snapshot(book_home) == before


def test_timeout_fails_the_node_and_its_parents_only(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.hang(match="Chapitre II (Les routes)")
    messages: list[str] = []
    report = run(
        book_home, server, messages, force=True, llm_config=config(server, timeout=2.0, max_retries=1)
    )
    assert report.failed == [P1C2, P1, ROOT]
    assert report.generated == [FRONT, P1C1, P2C1, P2C2, P2]
    assert len(requests_for(server, P1C2)) == 2  # the first try and one retry, both timed out
    assert not requests_for(server, P1) and not requests_for(server, ROOT)  # parents not generated
    after = snapshot(book_home)
    for rel in (P1C2, P1, ROOT):
        assert after[rel] == before[rel]  # untouched
    assert after[P2] != before[P2]
    assert any(m.startswith(f"failed: {P1C2}") for m in messages)
    assert not leftovers(book_home)


def test_truncated_answer_is_not_written(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.truncate(match="Avant-propos")
    messages: list[str] = []
    report = run(book_home, server, messages, force=True)
    assert report.failed == [FRONT, ROOT] and len(report.generated) == 6
    assert snapshot(book_home)[FRONT] == before[FRONT]
    assert any("max_tokens=700" in m and "BOOKRAG_LLM_MAX_OUTPUT" in m for m in messages)


# --- 9. atomic writes and Ctrl-C ----------------------------------------------------------


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    # What a terminal gives Python: SIGINT raises KeyboardInterrupt. A test runner started as a
    # background job without job control inherits SIGINT ignored, and the Ctrl-C would vanish.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_during_the_second_generation(
    book_home: Path, server: FakeOpenAI, sigint_raises: None
) -> None:
    before = snapshot(book_home)
    main = threading.main_thread().ident

    def ctrl_c(_request) -> None:  # a real SIGINT, delivered to the main thread waiting for the answer
        signal.pthread_kill(main, signal.SIGINT)

    server.before_answer(ctrl_c, match="Chapitre I (Le boulanger)", hang=True)
    with pytest.raises(KeyboardInterrupt):
        run(book_home, server, force=True)
    assert len(server.requests) == 2
    m, text = frontmatter.read(book_home / FRONT)  # the first summary is in place, whole
    assert m["generator"] == "llm" and text == server.requests[0].answer + "\n"
    after = snapshot(book_home)
    assert after[P1C1] == before[P1C1]  # the second is unchanged
    assert {k for k in after if after[k] != before[k]} == {FRONT}
    assert not leftovers(book_home)


def test_ctrl_c_during_a_write_lets_it_finish_then_stops(
    book_home: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, sigint_raises: None
) -> None:
    before = snapshot(book_home)
    real = frontmatter.write_atomic

    def write_hit_by_ctrl_c(path: Path, text: str) -> None:
        signal.raise_signal(signal.SIGINT)
        real(path, text)

    monkeypatch.setattr(frontmatter, "write_atomic", write_hit_by_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run(book_home, server, force=True)
    assert len(server.requests) == 1  # stopped right after the first write
    assert (
        body(book_home, FRONT) == server.requests[0].answer and meta(book_home, FRONT)["generator"] == "llm"
    )
    after = snapshot(book_home)
    assert {k for k in after if after[k] != before[k]} == {FRONT}
    assert not leftovers(book_home)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_interrupted_rename_leaves_the_old_file(
    book_home: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(book_home)
    count_tokens("tiktoken's vocabulary is in its cache (seeding it renames a file)")

    def interrupted(src, dst) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(frontmatter.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(book_home, server, force=True)
    monkeypatch.undo()
    assert snapshot(book_home) == before and not leftovers(book_home)


# --- 10. the extractive provider ----------------------------------------------------------


def test_extractive_provider(tmp_path: Path) -> None:
    home = make_home(tmp_path / "a")
    paras = extend_bakery(home)  # long enough for the level-1 word budget to bind
    assert len(" ".join(paras).split()) > EXTRACTIVE_WORDS[1]
    assert run(home, None).kept_team == ALL  # team summaries kept here too
    assert run(home, None, force=True).generated == ALL
    assert run(home, None).skipped == ALL  # and current
    inputs = {f: frontmatter.read(home / f.replace("summary.md", "source.md"))[1] for f in LEVEL1}
    units = {f: paragraphs(inputs[f]) for f in LEVEL1}  # what §N means, per summary
    units[P1] = [plain(home, P1C1), plain(home, P1C2)]
    units[P2] = [plain(home, P2C1), plain(home, P2C2)]
    units[ROOT] = [plain(home, f) for f in (FRONT, P1, P2)]
    for rel in ALL:
        m, text = frontmatter.read(home / rel)
        frontmatter.validate(m, rel)
        assert m["generator"] == "extractive" and m["model"] == "extractive/thesis-tfidf-3"
        assert m["prompt_template"] == TEMPLATE[LEVEL[rel]] and len(m["inputs_sha256"]) == 64
        assert len(units_of(home, rel)) == len(units[rel])
        assert not check_file(home, home / rel), rel  # what `bookrag check` will say
        assert not check_body(text, 1, len(units[rel]), every_sentence=True), (
            rel
        )  # every sentence anchored, in range
        sentences = [s for p in paragraphs(text) for s in split_sentences(p)]
        assert sentences, rel
        for sentence in sentences:  # verbatim from the unit its anchor names
            [anchor] = find_anchors(sentence)
            [unit] = anchor.units
            assert not sentence[anchor.end :].strip(".!?…»”) "), sentence  # before the final punctuation
            assert strip_anchors(sentence) in units[rel][unit - 1], (rel, sentence)
        assert len(strip_anchors(text).split()) <= EXTRACTIVE_WORDS[LEVEL[rel]]
    assert len(strip_anchors(body(home, P1C1)).split()) < len(inputs[P1C1].split())  # the budget binds
    # deterministic: another copy gives byte-identical files
    other = make_home(tmp_path / "b")
    extend_bakery(other)
    assert run(other, None, force=True, levels={1}).generated == LEVEL1
    assert {f: (other / f).read_bytes() for f in LEVEL1} == {f: (home / f).read_bytes() for f in LEVEL1}


def test_extractive_provider_embeds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: adding a book costs one embedding pass (the sidecars'); the extractive provider
    ranks sentences lexically. Any call into the embedding module fails the run here."""
    import loader.embedding

    def refuse(*args, **kwargs):
        raise AssertionError("the extractive provider called the embedder")

    monkeypatch.setattr(loader.embedding, "get_embedder", refuse)
    monkeypatch.setattr(loader.embedding, "_local", refuse)
    home = make_home(tmp_path)
    extend_bakery(home)
    report = run(home, None, force=True)
    assert report.generated == ALL and not report.failed


def test_centrality_ranks_the_shared_subject_first() -> None:
    sentences = [
        "Le boulanger cuit le pain de la ville chaque matin avant l'aube.",  # the subject, in the words of most
        "Il en est ainsi, et cela pour nous tous, mais non pour eux.",  # function words only
        "Le pain du boulanger nourrit la ville, et le prix du pain règle la vie des ouvriers.",
        "Les comètes traversent le ciel nocturne sans se soucier des astronomes.",  # off the subject
        "Chaque matin, la ville attend le pain que le boulanger a cuit.",
    ]
    scores = summarize.centrality(sentences)
    assert scores[1] == 0.0  # nothing but function words: no subject at all
    ranked = sorted(range(len(sentences)), key=lambda i: -scores[i])
    assert set(ranked[:3]) == {0, 2, 4} and ranked[3:] == [3, 1]
    assert summarize.centrality(sentences) == scores  # deterministic
    assert summarize.centrality(list(reversed(sentences))) == pytest.approx(
        list(reversed(scores))
    )  # order-free
    assert summarize._terms("L'État, l'État ! Les États-Unis.") == pytest.approx(
        {"état": 1 + math.log(2), "états": 1.0, "unis": 1.0}
    )


def test_extractive_summary_picks_central_sentences_within_budget() -> None:
    """Twelve paragraphs on the baker and his bread (23 words), each with one stray sentence on
    something else (comets, rivers, music...; 11 or 13 words): the budget binds, the baker's
    sentences fill it first, and a stray one can only take the room they leave."""
    strays = [
        "Une comète passa ce soir-là au-dessus des toits sans que personne la remarquât.",
        "La rivière gelée craquait doucement sous les patins des écoliers du village voisin.",
        "Un violoniste ambulant jouait une gigue irlandaise devant la cathédrale endormie.",
        "Les hirondelles reviennent toujours au printemps vers les clochers de Normandie.",
    ]
    paras = [
        f"Le boulanger pétrit le pain du matin pour les ouvriers de la ville, au prix numéro {k} que règle "
        f"la concurrence des boulangers. {strays[k % 4]}"
        for k in range(12)
    ]
    text = summarize.extractive_summary([Item("", p, k) for k, p in enumerate(paras, start=1)], 1)
    kept = [strip_anchors(s) for p in paragraphs(text) for s in split_sentences(p)]
    bakers = [s for s in kept if "boulanger" in s]
    assert len(bakers) == EXTRACTIVE_WORDS[1] // 23 and len(kept) - len(bakers) <= 1, kept
    assert len(strip_anchors(text).split()) <= EXTRACTIVE_WORDS[1] < sum(len(p.split()) for p in paras)
    assert not check_body(text, 1, len(paras), every_sentence=True)


# --- templates --------------------------------------------------------------------------


def test_book_without_author_or_year(book_home: Path, server: FakeOpenAI) -> None:
    manifest = book_home / "corpus" / BOOK / "book.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace('author = "Équipe bookrag"\n', "").replace("year = 2026\n", ""), encoding="utf-8"
    )
    report = run(book_home, server, force=True)
    assert report.generated == ALL
    assert "« L'auteur soutient que… »" in server.prompts[0]
    assert not any("None" in p for p in server.prompts)


def test_fake_server_answers_deterministically() -> None:
    prompt = "Résume la section suivante : A > B.\n\nTexte de la section :\nun\n\ndeux\n"
    assert summary_for(prompt) == summary_for(prompt)
    assert summary_for(prompt).startswith("Résumé de A > B : 2 entrées")


# --- 11. anchors: checked, sent back, failed --------------------------------------------


def section_prompt(rel: str) -> str:
    """A string only the level-1 prompt of `rel` contains (a fake-server rule's match)."""
    return f"Résume la section suivante : {heading(rel)}.\n"


def all_tokens(server: FakeOpenAI) -> int:
    return sum(count_tokens(m["content"]) for r in server.requests for m in r.messages)


RETRY_TAIL_1_TO_3 = (
    "Réécris le résumé entier, avec les mêmes règles, en corrigeant ses ancres : chaque phrase, sans "
    "exception, se termine par une ancre [§N], [§N–M] (au plus 5 numéros) ou [§N, §M], placée avant le "
    "point final, avec les seuls numéros §1 à §3. Réponds par le résumé seul.\n"
)


@pytest.mark.parametrize(
    "reply,problem",
    [
        (
            "Le boulanger se lève tôt. Il nourrit trois maisons [§3].",
            "line 1: sentence without an anchor: 'Le boulanger se lève tôt.'",
        ),
        ("Le boulanger nourrit trois maisons [§4].", "line 1: anchor [§4] cites §4, beyond the last (§3)"),
        (
            "Le boulanger nourrit trois maisons [§0].",
            "line 1: malformed anchor [§0]: units are numbered from 1",
        ),
        (
            "Le boulanger pétrit la pâte [§1].\n\nIl nourrit trois maisons [§x].",
            "line 3: malformed anchor [§x]: expected [§N], [§N–M] or [§N, §M]",
        ),
        (
            "Le boulanger nourrit trois maisons [§].",
            "line 1: malformed anchor [§]: expected [§N], [§N–M] or [§N, §M]",
        ),
        (
            "Le boulanger nourrit trois maisons [§3–1].",
            "line 1: malformed anchor [§3–1]: the range 3–1 runs backwards",
        ),
        (
            "Le boulanger nourrit trois maisons [§1–6].",
            "line 1: anchor [§1–6] spans 6 units; at most 5 (cite the precise ones)",
        ),
    ],
)
def test_invalid_anchors_are_sent_back_with_the_problem(
    book_home: Path, server: FakeOpenAI, reply: str, problem: str
) -> None:
    server.reply(reply, times=1, match=section_prompt(P1C1))
    report = run(book_home, server, force=True, levels={1})
    assert report.generated == LEVEL1 and not report.failed and report.refused == 1
    first, retry = requests_for(server, P1C1)
    assert first.messages == [{"role": "user", "content": first.prompt}] and first.answer == reply
    # the retry: the same prompt, the refused reply, then what is wrong with it
    assert [m["role"] for m in retry.messages] == ["user", "assistant", "user"]
    assert retry.prompt == first.prompt and retry.messages[1]["content"] == reply
    assert retry.messages[2]["content"] == (
        "Ce résumé ne peut pas être enregistré : ses ancres ne respectent pas les règles.\n\n"
        f"Problèmes :\n- {problem}\n\n" + RETRY_TAIL_1_TO_3
    )
    assert body(book_home, P1C1) == retry.answer  # the valid reply is the one written
    assert report.requests == len(server.requests) == 6 and report.tokens_sent == all_tokens(server)
    assert "; 6 requests (1 sent back for invalid anchors), " in report.line()


def test_a_reply_that_never_becomes_valid_is_not_written(book_home: Path, server: FakeOpenAI) -> None:
    before = snapshot(book_home)
    server.reply("Le boulanger nourrit le village [§9].", times=None, match=section_prompt(P1C1))
    messages: list[str] = []
    report = run(book_home, server, messages, force=True)
    assert report.failed == [P1C1, P1, ROOT]  # the chapter, then what is made from it
    assert report.generated == [FRONT, P1C2, P2C1, P2C2, P2]
    tries = requests_for(server, P1C1)
    assert len(tries) == 3 and all(
        r.answer == "Le boulanger nourrit le village [§9]." for r in tries
    )  # 1 + anchor_retries
    assert all(
        "- line 1: anchor [§9] cites §9, beyond the last (§3)\n" in r.messages[2]["content"]
        for r in tries[1:]
    )
    assert not requests_for(server, P1) and not requests_for(server, ROOT)
    after = snapshot(book_home)
    assert all(after[f] == before[f] for f in (P1C1, P1, ROOT)) and after[P2] != before[P2]
    assert (
        f"failed: {P1C1}: the reply's anchors were still invalid after 3 attempts: line 1: anchor [§9] cites §9, beyond the last (§3)"
        in messages
    )
    assert report.line() == (
        f"5 generated, 0 up to date, 0 team-written kept, 3 failed; 8 requests (3 sent back for invalid anchors), "
        f"{all_tokens(server)} prompt tokens sent"
    )
    assert not leftovers(book_home)

    # without anchor retries, the first invalid reply fails the node
    server.reset()
    server.reply("Le boulanger nourrit le village.", times=None, match=section_prompt(P1C1))
    report = run(book_home, server, force=True, levels={1}, llm_config=config(server, anchor_retries=0))
    assert report.failed == [P1C1] and len(requests_for(server, P1C1)) == 1 and report.refused == 1
    assert snapshot(book_home)[P1C1] == before[P1C1]


def test_levels_2_and_3_need_anchors_on_their_children(book_home: Path, server: FakeOpenAI) -> None:
    part_prompt = f"Partie à résumer : {heading(P1)}.\n"
    server.reply("La première partie relie le four et la route.", times=1, match=part_prompt)
    # a thesis without an anchor is fine when other sentences cite the sections
    server.reply(
        "La première partie relie le four et la route. Le pain suit la farine [§1–2].",
        times=1,
        match=part_prompt,
    )
    server.reply("Le livre suit le pain [§4].", times=1, match="l'ouvrage entier")
    report = run(book_home, server, force=True)
    assert report.generated == ALL and report.refused == 2
    no_anchor, anchored = requests_for(server, P1)
    correction = anchored.messages[2]["content"]
    assert (
        "- no anchor at all: end the sentences with the numbers of the units they draw on ([§1] to [§2])\n"
        in correction
    )
    assert "chaque phrase qui s'appuie sur des éléments particuliers se termine" in correction
    assert "avec les seuls numéros §1 à §2." in correction
    assert (
        body(book_home, P1) == "La première partie relie le four et la route. Le pain suit la farine [§1–2]."
    )
    assert not check_file(book_home, book_home / P1)
    wrong, right = requests_for(server, ROOT)
    assert "- line 1: anchor [§4] cites §4, beyond the last (§3)\n" in right.messages[2]["content"]
    assert body(book_home, ROOT) == right.answer and not check_file(book_home, book_home / ROOT)


def test_a_slice_cites_only_its_own_paragraphs(book_home: Path, server: FakeOpenAI) -> None:
    paras = extend_bakery(book_home)
    settings = settings_for(book_home, None)
    book = find_book(settings.corpus, BOOK)
    nodes = {n.source_file: n for n in book_tree(book)}
    limit = max(
        count_tokens(
            render_prompt(
                "section.md.j2",
                book,
                nodes[rel],
                [Item("", p) for p in source_paragraphs(book_home, rel)],
                "bottom-up",
            )
        )
        for rel in LEVEL1
        if rel != P1C1
    )
    server.reply("Le boulanger ouvre plus tôt [§9].", times=1, match="Tu ne reçois que la partie 1 sur")
    report = run(
        book_home,
        server,
        force=True,
        levels={1},
        llm_config=config(server, context_window=limit + 200, max_output_tokens=200),
    )
    assert report.generated == LEVEL1 and report.refused == 1
    mine = [r for r in server.requests if subject_of(r.prompt) == heading(P1C1)]
    refused, retried = mine[0], mine[1]
    assert "Tu ne reçois que la partie 1 sur" in refused.prompt
    assert retried.prompt.startswith(
        refused.prompt.rstrip()
    )  # the window is tight: the correction follows the prompt
    last = int(re.search(r"\(paragraphes §1 à §(\d+) sur 9\)", refused.prompt).group(1))
    assert last < len(paras)
    correction = retried.messages[-1]["content"]
    assert (
        f"- §9 is not in the text given (§1–§{last})\n" in correction
        and f"avec les seuls numéros §1 à §{last}." in correction
    )
    assert {u for a in find_anchors(retried.answer) for u in a.units} <= set(range(1, last + 1))
    assert not check_file(book_home, book_home / P1C1)


def test_a_retry_without_room_for_the_refused_reply(book_home: Path, server: FakeOpenAI) -> None:
    settings = settings_for(book_home, None)
    book = find_book(settings.corpus, BOOK)
    nodes = {n.source_file: n for n in book_tree(book)}
    biggest = max(
        count_tokens(
            render_prompt(
                "section.md.j2",
                book,
                nodes[rel],
                [Item("", p) for p in source_paragraphs(book_home, rel)],
                "bottom-up",
            )
        )
        for rel in LEVEL1
    )
    long_reply = " ".join(
        f"Le boulanger cuit sa fournée numéro {k} avant le lever du jour." for k in range(60)
    )
    assert count_tokens(long_reply) > 300
    server.reply(long_reply, times=1, match=section_prompt(FRONT))
    report = run(
        book_home,
        server,
        force=True,
        levels={1},
        llm_config=config(server, context_window=biggest + 300 + 200, max_output_tokens=200),
    )
    assert report.generated == LEVEL1 and report.refused == 1
    refused, retried = requests_for(server, FRONT)
    [message] = retried.messages  # the reply does not fit: the correction follows the prompt in one message
    assert message["role"] == "user" and message["content"].startswith(
        refused.prompt.rstrip() + "\n\nCe résumé ne peut pas être enregistré"
    )
    assert "- … et 50 autres\n" in message["content"]  # ten problems listed, the rest counted
    assert (
        "- line 1: sentence without an anchor: 'Le boulanger cuit sa fournée numéro 0 avant le lever du jour.'\n"
        in message["content"]
    )


# --- the extractive provider's weights (decision 0040) ------------------------------------


def decision_32(inputs: list[Item], level: int) -> list[str]:
    """Decision 0032's selection, written out: centrality to the centroid of all, best first,
    skipping a sentence over the budget, stopping at 90 % of it; the chosen in text order."""
    found = [s for i in inputs for p in paragraphs(i.text) for s in split_sentences(p) if len(s.split()) >= 4]
    scores = summarize.centrality(found)
    chosen: list[int] = []
    used = 0
    for i in sorted(range(len(found)), key=lambda i: -scores[i]):
        n = len(found[i].split())
        if used + n > EXTRACTIVE_WORDS[level] and chosen:
            continue
        chosen.append(i)
        used += n
        if used >= EXTRACTIVE_WORDS[level] * 0.9:
            break
    return [found[i] for i in sorted(chosen)]


def kept(text: str) -> list[str]:
    return [strip_anchors(s) for p in paragraphs(text) for s in split_sentences(p)]


def test_centroid_only_weights_are_decision_32(home: Path) -> None:
    settings = settings_for(home, None)
    book = find_book(settings.corpus, BOOK)
    tree = book_tree(book)
    for node in (n for n in tree if n.node_type == "summary" and n.level == 1):
        inputs = summarize.job_inputs(home, tree, node, "bottom-up")
        assert kept(summarize.extractive_summary(inputs, 1, summarize.CENTROID_ONLY)) == decision_32(
            inputs, 1
        )


def test_centrality_against_the_rest_of_the_section() -> None:
    """A sentence whose words only its own paragraph repeats is central among all the sentences,
    not against the other paragraphs; the sentence the other paragraphs elaborate is."""
    sentences = [
        "La liberté du commerce enrichit les nations qui la pratiquent.",  # ¶0: the thesis
        "Les comètes, les comètes brillantes, traversent le ciel des astronomes.",  # ¶1: an aside…
        "Les astronomes observent les comètes brillantes dans le ciel nocturne.",  # ¶1: …its paragraph echoes it
        "Les astronomes comptent les comètes du ciel chaque nuit brillante.",  # ¶1
        "Le commerce libre enrichit les ouvriers des nations voisines.",  # ¶2
        "Les nations enrichies par la liberté du commerce paient mieux les ouvriers.",  # ¶3
    ]
    groups = [0, 1, 1, 1, 2, 3]
    everything = summarize.centrality(sentences)
    rest = summarize.centrality(sentences, groups)
    assert everything[1] > everything[0]  # among all, the comets' paragraph outweighs the thesis
    assert rest[0] > rest[1] and rest[0] == max(rest)  # against the rest of the section, the thesis leads
    assert summarize.centrality(sentences, groups) == rest  # deterministic


def test_asides() -> None:
    assert [
        summarize.is_aside(s)
        for s in (
            "Que gagne l'ouvrier à ce régime ?",
            "« Vous êtes dans la bonne voie », disent-ils.",
            "— Mais le soleil ? demanda-t-il.",
            "(Je reviendrai sur ce point.)",
            "Quelle folie !",
            "La protection déplace le travail, elle ne le crée pas.",
        )
    ] == [True, True, True, True, True, False]


def test_redundancy_leaves_out_a_sentence_said_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    said = "Le tarif protecteur renchérit le fer que le laboureur achète pour sa charrue."
    paras = [said, said.replace("achète", "paie"), "Les salaires des forgerons ne montent point pour autant."]
    inputs = [Item("", p, k) for k, p in enumerate(paras, start=1)]
    plain = summarize.ExtractiveWeights()
    assert len(kept(summarize.extractive_summary(inputs, 1, plain))) == 3  # within the budget, everything
    monkeypatch.setitem(EXTRACTIVE_WORDS, 1, 26)  # room for two sentences: the same thought twice, or two
    assert kept(summarize.extractive_summary(inputs, 1, plain)) == paras[:2]
    assert kept(summarize.extractive_summary(inputs, 1, summarize.ExtractiveWeights(redundancy=0.6))) == [
        paras[0],
        paras[2],
    ]


def test_the_title_term_picks_the_sentence_that_answers_the_heading() -> None:
    """Of a section whose central sentences describe, the title term keeps the one sentence that
    answers what the heading announces; without a title, or at weight 0, it changes nothing."""
    title = "Pourquoi les moeurs s'adoucissent à mesure que les conditions s'égalisent"
    paras = [
        "Les paysans de Bretagne vivaient dans des villages pauvres et isolés du monde.",
        "Les villages de Bretagne gardaient leurs coutumes et leurs fêtes des paysans.",
        "Les moeurs s'adoucissent parce que les conditions s'égalisent entre les hommes.",
        "Les fêtes des villages pauvres réunissaient les paysans de Bretagne chaque été.",
    ]
    inputs = [Item("", p, k) for k, p in enumerate(paras, start=1)]
    one = 16  # words: room for one sentence
    plain = summarize.ExtractiveWeights()
    titled = summarize.ExtractiveWeights(title=1.0)
    assert kept(summarize.extractive_summary(inputs, 1, plain, budget=one, title=title)) != [paras[2]]
    assert kept(summarize.extractive_summary(inputs, 1, titled, budget=one)) == kept(
        summarize.extractive_summary(inputs, 1, plain, budget=one)
    )  # no title: no term
    assert kept(summarize.extractive_summary(inputs, 1, titled, budget=one, title=title)) == [paras[2]]
    assert kept(summarize.extractive_summary(inputs, 2, titled, budget=one, title=title)) != [
        paras[2]
    ]  # level 1 only


def test_the_provider_writes_with_each_sections_own_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`summarize --provider extractive` hands the title term each summary's own title (level 1:
    the section's; a chapter titled only by its number, none)."""
    home = make_home(tmp_path)
    tree = book_tree(find_book(settings_for(home, None).corpus, BOOK))
    seen: dict[str, str] = {}
    write = summarize.extractive_summary

    def spy(inputs: list[Item], level: int, *args, title: str = "", **kw) -> str:
        seen[title] = seen.get(title, "") + "x"
        return write(inputs, level, *args, title=title, **kw)

    monkeypatch.setattr(summarize, "extractive_summary", spy)
    assert run(home, None, force=True).generated == ALL
    titles = {summarize.own_title(n) for n in tree if n.node_type == "summary"}
    assert set(seen) == titles
    assert all(
        summarize.own_title(n) for n in tree if n.node_type == "summary" and n.level == 1
    )  # each its own
    assert "" in titles  # « Première partie » says nothing of the part
    chapter = next(n for n in tree if n.section is not None and n.section.kind == "chapter")
    assert summarize.own_title(chapter) == chapter.title != chapter.section.label
    for bare in ("Chapitre XIV", "Chapter 3", "LIVRE II."):  # a label and a number say nothing of it
        assert summarize.own_title(dataclasses.replace(chapter, title=bare)) == ""
    for named in ("Avertissement", "Chapitre XIV : du capital", "Les routes", "II. Du capital"):
        assert summarize.own_title(dataclasses.replace(chapter, title=named)) == named


def test_a_renamed_section_is_summarised_again(tmp_path: Path) -> None:
    """The title is what the prompt's heading and the extractive provider's title term read: a
    section renamed in book.toml has its summary rewritten (and its part's, whose inputs changed
    if the text did); the other sections' stay."""
    home = make_home(tmp_path)
    assert run(home, None, force=True).generated == ALL
    toml = home / "corpus" / BOOK / "book.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace('title = "Le boulanger"', 'title = "Le pain du boulanger"'),
        encoding="utf-8",
    )
    report = run(home, None)
    assert P1C1 in report.generated and meta(home, P1C1)["title"] == "Le pain du boulanger"
    assert {FRONT, P1C2, P2C1, P2C2, P2} <= set(report.skipped)
