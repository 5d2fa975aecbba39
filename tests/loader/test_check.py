"""`bookrag check` on the fixture tree: clean, then each defect named with its file."""

from __future__ import annotations

from loader import frontmatter
from loader.check import check_corpus
from tests.conftest import settings_for

C = "corpus/traite-des-echanges"


def problems(home):
    return check_corpus(settings_for(home, None))[0]


def edit(home, rel: str, **changes):
    path = home / rel
    meta, body = frontmatter.read(path)
    meta.update(changes)
    for k in [k for k, v in changes.items() if v is ...]:
        del meta[k]
    path.write_text(frontmatter.render(meta, body), encoding="utf-8")


def test_the_fixture_tree_is_clean(home):
    found, line = check_corpus(settings_for(home, None))
    assert found == [] and line == (
        "1 book, 13 files checked, 0 problems\n"
        "paragraphs cited by a summary anchor: traite-des-echanges 9/12 (75 %)"
    )


def test_missing_parent_and_wrong_level(home):
    edit(
        home,
        f"{C}/premiere-partie/chapitre-02-les-routes/summary.md",
        parent_source_file=f"{C}/premiere-partie/nope/summary.md",
        level=2,
    )
    found = problems(home)
    rel = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    assert (
        f"{rel}:1: parent_source_file is '{C}/premiere-partie/nope/summary.md', the tree says '{C}/premiere-partie/summary.md'"
        in found
    )
    assert f"{rel}:1: level is 2, the tree says 1" in found
    assert f"{rel}:1: parent_source_file {C}/premiere-partie/nope/summary.md does not exist" in found


def test_two_roots(home):
    edit(home, f"{C}/avant-propos/summary.md", parent_source_file=None)
    assert any(
        p.startswith("corpus/traite-des-echanges: 2 roots (files without parent): ") for p in problems(home)
    )


def test_incomplete_frontmatter_and_unknown_file(home):
    edit(home, f"{C}/avant-propos/source.md", embed=...)
    (home / f"{C}/premiere-partie/stray.md").write_text("---\nbook: x\n---\ntext\n")
    found = problems(home)
    assert f"{C}/avant-propos/source.md:1: frontmatter lacks embed" in found
    assert (
        f"{C}/premiere-partie/stray.md: not part of traite-des-echanges's tree (book.toml does not name it)"
        in found
    )


def test_missing_summary_and_broken_yaml(home):
    (home / f"{C}/deuxieme-partie/summary.md").unlink()
    (home / f"{C}/avant-propos/summary.md").write_text("---\nbook: [unclosed\n---\nx\n")
    found = problems(home)
    assert (
        f"{C}/deuxieme-partie/summary.md: missing summary (run `bookrag summarize traite-des-echanges`)"
        in found
    )
    assert (
        f"{home}/{C}/avant-propos/summary.md:2: invalid YAML frontmatter: expected ',' or ']', "
        "but got '<stream end>'" in found
    )


ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"


def set_body(home, rel: str, body: str) -> None:
    meta, _ = frontmatter.read(home / rel)
    (home / rel).write_text(frontmatter.render(meta, body), encoding="utf-8")


def test_bad_anchors_are_named_with_file_and_line(home):
    """Beyond the last paragraph, malformed, backwards, too wide, a sentence without one (issue 11)."""
    set_body(
        home,
        ROUTES,
        "Le péage renchérit la farine [§4]. Les routes comptent [§]. Les ornières coûtent [§x].\n\n"
        "Une route droite vaut une récolte [§3–1]. Tout compte [§1–9]. Sans ancre ici. Fin [§1].",
    )
    found = [p for p in problems(home) if p.startswith(ROUTES)]
    line = len(
        frontmatter.render(frontmatter.read(home / ROUTES)[0], "").splitlines()
    )  # the body's first line
    assert found == [
        f"{ROUTES}:{line}: malformed anchor [§]: expected [§N], [§N–M] or [§N, §M]",
        f"{ROUTES}:{line + 2}: malformed anchor [§3–1]: the range 3–1 runs backwards",
    ]
    set_body(
        home,
        ROUTES,
        "Le péage renchérit la farine [§4]. Les routes comptent [§1, §2].\n\nSans ancre ici. Fin [§1–3].",
    )
    found = [p for p in problems(home) if p.startswith(ROUTES)]
    assert found == [
        f"{ROUTES}:{line}: anchor [§4] cites §4, beyond the last (§3)",
        f"{ROUTES}:{line + 2}: sentence without an anchor: 'Sans ancre ici.'",
    ]


def test_part_anchors_cite_children(home):
    part = f"{C}/premiere-partie/summary.md"
    set_body(home, part, "La première partie suit le pain et les routes [§1–2]. Elle conclut [§3].")
    assert [p for p in problems(home) if p.startswith(part)] == [
        f"{part}:{len(frontmatter.render(frontmatter.read(home / part)[0], '').splitlines())}: anchor [§3] cites §3, beyond the last (§2)"
    ]
