"""The SQL functions in sql/functions/: their files, order of application and versions."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "sql" / "functions"
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
_MARKER = re.compile(r"^-- function: (?P<name>\w+) sha256:(?P<sha>[0-9a-f]{64})$", re.M)


@dataclass(frozen=True)
class FunctionFile:
    name: str
    path: Path
    sha256: str

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def function_files(folder: Path = FUNCTIONS_DIR) -> list[FunctionFile]:
    """Files in application order: shared types first, private helpers, then public functions
    (alphabetical, so get_node precedes get_parent, which a SQL-language body needs)."""
    paths = sorted(folder.glob("*.sql"), key=lambda p: (p.stem != "_types", not p.stem.startswith("_"), p.stem))
    return [FunctionFile(p.stem, p, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths]


def recorded_versions(folder: Path = MIGRATIONS_DIR) -> dict[str, str]:
    """The newest sha256 each migration installs per function (later migrations win)."""
    versions: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        for m in _MARKER.finditer(path.read_text(encoding="utf-8")):
            versions[m["name"]] = m["sha"]
    return versions


def render_migration(name: str, files: list[FunctionFile], reason: str) -> str:
    """A migration that installs the given function files verbatim and records their versions."""
    parts = [f"-- {name}: {reason}", "-- depends: " + _previous_migration_id(name), ""]
    for f in files:
        parts += [f"-- function: {f.name} sha256:{f.sha256}", f.text.rstrip(), ""]
    values = ",\n    ".join(f"('{f.name}', '{f.sha256}', '{name}')" for f in files)
    parts += [
        "INSERT INTO rag.function_versions (name, sha256, migration) VALUES",
        f"    {values}",
        "ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();",
        "",
    ]
    return "\n".join(parts)


def _previous_migration_id(name: str, folder: Path = MIGRATIONS_DIR) -> str:
    ids = sorted(p.stem for p in folder.glob("*.sql") if p.stem < name)
    return ids[-1] if ids else ""


def write_function_migration(slug: str, reason: str, folder: Path = MIGRATIONS_DIR) -> Path | None:
    """Write migrations/NNNN_<slug>.sql with every function whose file changed since the last
    migration; None when nothing changed."""
    recorded = recorded_versions(folder)
    changed = [f for f in function_files() if recorded.get(f.name) != f.sha256]
    if not changed:
        return None
    number = len(list(folder.glob("*.sql"))) + 1
    name = f"{number:04d}_{slug}"
    path = folder / f"{name}.sql"
    path.write_text(render_migration(name, changed, reason), encoding="utf-8")
    return path
