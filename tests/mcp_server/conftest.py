"""The reading room's fixtures: the fixture corpus with one footnote added (the team's own words),
loaded into a database of its own, so that the other tests' corpus stays as it is."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BOOK, loaded_database

#: The chapter given a footnote: its §2 calls note 1, which becomes its last paragraph (§4).
NOTED = "premiere-partie/chapitre-02-les-routes"
NOTE = "[^1]: Le péage fut supprimé l'année suivante, sans que les marchands baissent leurs prix."


@pytest.fixture(scope="session")
def room_home(tmp_path_factory: pytest.TempPathFactory, corpus_home: Path, e5) -> Path:
    from loader.sidecars import write_sidecars

    home = tmp_path_factory.mktemp("room") / "home"
    shutil.copytree(corpus_home, home)
    source = home / "corpus" / BOOK / NOTED / "source.md"
    text = source.read_text(encoding="utf-8")
    assert "du montant exact du péage." in text
    text = (
        text.replace("du montant exact du péage.", "du montant exact du péage[^1].").rstrip("\n")
        + f"\n\n{NOTE}\n"
    )
    source.write_text(text, encoding="utf-8")
    write_sidecars([source], home, 400, e5, progress=False)
    return home


@pytest.fixture(scope="session")
def room_url(postgresql_proc, room_home: Path) -> Iterator[str]:
    """A database holding room_home's corpus (copied from the migrated template)."""
    yield from loaded_database(postgresql_proc, "bookrag_room_fixture", room_home)
