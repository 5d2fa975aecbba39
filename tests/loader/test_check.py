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
    assert found == [] and line == "1 books, 13 files checked, 0 problems"


def test_missing_parent_and_wrong_level(home):
    edit(home, f"{C}/premiere-partie/chapitre-02-les-routes/summary.md",
         parent_source_file=f"{C}/premiere-partie/nope/summary.md", level=2)
    found = problems(home)
    rel = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    assert f"{rel}:1: parent_source_file is '{C}/premiere-partie/nope/summary.md', the tree says '{C}/premiere-partie/summary.md'" in found
    assert f"{rel}:1: level is 2, the tree says 1" in found
    assert f"{rel}:1: parent_source_file {C}/premiere-partie/nope/summary.md does not exist" in found


def test_two_roots(home):
    edit(home, f"{C}/avant-propos/summary.md", parent_source_file=None)
    assert any(p.startswith(f"corpus/traite-des-echanges: 2 roots (files without parent): ") for p in problems(home))


def test_incomplete_frontmatter_and_unknown_file(home):
    edit(home, f"{C}/avant-propos/source.md", embed=...)
    (home / f"{C}/premiere-partie/stray.md").write_text("---\nbook: x\n---\ntext\n")
    found = problems(home)
    assert f"{C}/avant-propos/source.md:1: frontmatter lacks embed" in found
    assert f"{C}/premiere-partie/stray.md: not part of traite-des-echanges's tree (book.toml does not name it)" in found


def test_missing_summary_and_broken_yaml(home):
    (home / f"{C}/deuxieme-partie/summary.md").unlink()
    (home / f"{C}/avant-propos/summary.md").write_text("---\nbook: [unclosed\n---\nx\n")
    found = problems(home)
    assert f"{C}/deuxieme-partie/summary.md: missing summary (run `bookrag summarize traite-des-echanges`)" in found
    assert any(p.startswith(f"{home}/{C}/avant-propos/summary.md:") and "invalid YAML frontmatter" in p for p in found)
