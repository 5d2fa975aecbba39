"""The SQL functions in sql/functions/: their files, order of application, versions, and the
migrations that install them.

A function migration copies the full new text of each changed file (files are the truth,
migrations the deltas). `CREATE OR REPLACE` cannot change a function's argument types or result
type, and `_types.sql` creates its row types only when absent; so the generator compares each
changed file with the version the last migration installed and writes, in order:
  DROP TYPE … CASCADE and CREATE TYPE for a row type whose attributes changed (the cascade drops
    every function returning it: they are all re-created below, changed or not); DROP TYPE …
    CASCADE for a row type removed from _types.sql (refused while a function file still names it);
  DROP FUNCTION old-signature for a function whose arguments or result changed;
  the files' CREATE OR REPLACE statements;
  GRANT EXECUTE to bookrag_reader for every function dropped and re-created (migration 0003's
    default privileges grant the rest), then EXECUTE revoked from PUBLIC on every rag function:
    a function created or re-created gets PUBLIC's built-in default, which 0003's per-schema
    default privileges cannot take away (PostgreSQL adds those to the global defaults);
  and, for a function file deleted since, `-- dropped: name`, its DROP FUNCTION and the removal of
    its rag.function_versions row.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "sql" / "functions"
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
READER_ROLE = "bookrag_reader"
_MARKER = re.compile(r"^-- function: (?P<name>\w+) sha256:(?P<sha>[0-9a-f]{64})$", re.M)
_DROPPED = re.compile(r"^-- dropped: (?P<name>\w+)$", re.M)
_FUNCTION = re.compile(r"CREATE\s+OR\s+REPLACE\s+FUNCTION\s+(?P<name>rag\.\w+)\s*\(", re.I)
_TYPE = re.compile(r"CREATE\s+TYPE\s+(?P<name>rag\.\w+)\s+AS\s*\(", re.I)


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
    paths = sorted(
        folder.glob("*.sql"), key=lambda p: (p.stem != "_types", not p.stem.startswith("_"), p.stem)
    )
    return [FunctionFile(p.stem, p, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths]


def recorded_versions(folder: Path = MIGRATIONS_DIR) -> dict[str, str]:
    """The newest sha256 each migration installs per function (later migrations win; a function
    a migration drops, `-- dropped: name`, is no longer recorded)."""
    versions: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        body = path.read_text(encoding="utf-8")
        for m in sorted([*_MARKER.finditer(body), *_DROPPED.finditer(body)], key=lambda m: m.start()):
            if m.re is _DROPPED:
                versions.pop(m["name"], None)
            else:
                versions[m["name"]] = m["sha"]
    return versions


def recorded_texts(folder: Path = MIGRATIONS_DIR, until: str | None = None) -> dict[str, str]:
    """The text each function file had when a migration last installed it; with `until` (a
    migration's number, e.g. '0019'), as the migrations up to that one left it (what the
    experiments compare an installed function with). A function that a migration's last part
    installs keeps the GRANT and REVOKE lines after it (harmless to run again)."""
    texts: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        if until is not None and path.name[: len(until)] > until:
            break
        body = path.read_text(encoding="utf-8")
        marks = list(_MARKER.finditer(body))
        for i, m in enumerate(marks):
            end = (
                marks[i + 1].start()
                if i + 1 < len(marks)
                else body.find("INSERT INTO rag.function_versions", m.end())
            )
            texts[m["name"]] = body[m.end() : end if end >= 0 else len(body)].strip()
    return texts


# --- what a definition declares --------------------------------------------------------------


def _balanced(text: str, start: int) -> str:
    """The text between the '(' at start-1 and its matching ')'."""
    depth, i = 1, start
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def _without_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def names_type(type_name: str, text: str) -> bool:
    """Whether SQL text uses the row type `rag.x` outside comments: any case, either part quoted
    or not (`RAG.X`, `"rag"."x"`), never as the prefix of a longer name (`rag.x_y`, `rag.xs`)."""
    schema, _, name = type_name.partition(".")
    code = re.sub(r"/\*.*?\*/", "", _without_comments(text), flags=re.S)
    return re.search(rf'(?<![\w."])"?{schema}"?\s*\.\s*"?{name}"?(?![\w"])', code, re.I) is not None


_MODES = ("in", "out", "inout", "variadic")


def signatures(text: str) -> dict[str, tuple[str, str]]:
    """function name -> (input argument types, result) as declared in a file, normalised. OUT
    parameters, with their names, are part of the result (DROP FUNCTION names the input arguments
    only; CREATE OR REPLACE cannot rename an OUT parameter)."""
    text = _without_comments(text)
    out: dict[str, tuple[str, str]] = {}
    for m in _FUNCTION.finditer(text):
        args = _balanced(text, m.end())
        types, outs = [], []
        for param in _split_top(args):
            param = re.split(r"\s+DEFAULT\s+|\s*:=\s*|\s*=\s*", param, maxsplit=1, flags=re.I)[0].strip()
            mode = "in"
            head, _, tail = param.partition(" ")
            if head.lower() in _MODES:
                mode, param = head.lower(), tail.strip()
            words = param.split(None, 1)
            type_ = " ".join((words[1] if len(words) > 1 else words[0]).lower().split())
            if mode != "out":
                types.append(type_)
            if mode in ("out", "inout"):  # names too: renaming an OUT parameter changes the result type
                outs.append(" ".join(param.lower().split()))
        rest = text[m.end() + len(args) + 1 :]
        result = re.match(
            r"\s*RETURNS\s+(.*?)\s+(?:LANGUAGE|AS|SET|STABLE|IMMUTABLE|VOLATILE|SECURITY)\b",
            rest,
            re.I | re.S,
        )
        returns = " ".join((result[1] if result else "").lower().split()) or f"record({', '.join(outs)})"
        out[m["name"]] = (", ".join(types), returns)
    return out


def row_types(text: str) -> dict[str, str]:
    """row type name -> its attribute list, normalised."""
    text = _without_comments(text)
    return {m["name"]: " ".join(_balanced(text, m.end()).lower().split()) for m in _TYPE.finditer(text)}


# --- writing a migration ---------------------------------------------------------------------


def render_migration(
    name: str,
    files: list[FunctionFile],
    reason: str,
    previous: dict[str, str] | None = None,
    all_files: list[FunctionFile] | None = None,
    folder: Path = MIGRATIONS_DIR,
    removed: list[str] | None = None,
) -> str:
    """A migration installing the given files verbatim and recording their versions; `previous`
    (file name -> text last installed) decides what must be dropped first; `removed` names
    function files deleted since: their functions are dropped."""
    previous = previous or {}
    all_files = all_files or files
    drops: list[str] = []
    for gone in removed or []:
        drops.append(f"-- dropped: {gone}")
        drops += [
            f"DROP FUNCTION IF EXISTS {fn}({args});  -- its file was deleted"
            for fn, (args, _result) in signatures(previous.get(gone, "")).items()
        ]
    grants: list[str] = []
    install = list(files)
    changed_types = []
    for f in files:
        if f.name != "_types" or f.name not in previous:
            continue
        old, new = row_types(previous[f.name]), row_types(f.text)
        for t in (t for t in old if t not in new):
            users = [g.name for g in all_files if g.name != f.name and names_type(t, g.text)]
            if users:
                raise ValueError(f"{t} is removed from _types.sql but {', '.join(users)} still name it")
            drops.append(
                f"DROP TYPE IF EXISTS {t} CASCADE;  -- removed from _types.sql; the functions that returned it changed"
            )
        changed_types = [t for t in new if t in old and old[t] != new[t]]
        for t in changed_types:
            drops.append(
                f"DROP TYPE IF EXISTS {t} CASCADE;  -- its attributes changed; dependants re-created below"
            )
            drops.append(f"CREATE TYPE {t} AS ({new[t]});")
    if changed_types:  # every function mentioning a re-created type was dropped by the cascade
        names = {f.name for f in install}
        for f in all_files:
            if f.name not in names and any(names_type(t, f.text) for t in changed_types):
                install.append(f)
        install.sort(key=lambda f: [g.name for g in all_files].index(f.name))
    for f in install:
        new_sigs = signatures(f.text)
        old_sigs = signatures(previous.get(f.name, ""))
        for fn, (args, result) in new_sigs.items():
            recreated = any(names_type(t, f.text) for t in changed_types)
            if fn in old_sigs and old_sigs[fn] != (args, result):
                drops.append(
                    f"DROP FUNCTION IF EXISTS {fn}({old_sigs[fn][0]});  -- arguments or result changed"
                )
                recreated = True
            if recreated and not f.name.startswith("_"):
                grants.append(f"GRANT EXECUTE ON FUNCTION {fn}({args}) TO {READER_ROLE};")
    parts = [f"-- {name}: {reason}", "-- depends: " + _previous_migration_id(name, folder), ""]
    if drops:
        parts += [
            "-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.",
            *drops,
            "",
        ]
    for f in install:
        parts += [f"-- function: {f.name} sha256:{f.sha256}", f.text.rstrip(), ""]
    if grants:
        parts += [*grants, ""]
    if install:
        parts += [
            "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions",
            "",
        ]
    if removed:
        parts += [
            f"DELETE FROM rag.function_versions WHERE name IN ({', '.join(repr(g) for g in removed)});",
            "",
        ]
    if install:
        values = ",\n    ".join(f"('{f.name}', '{f.sha256}', '{name}')" for f in install)
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


def write_function_migration(
    slug: str, reason: str, folder: Path = MIGRATIONS_DIR, functions: Path = FUNCTIONS_DIR
) -> Path | None:
    """Write migrations/NNNN_<slug>.sql with every function whose file changed since the last
    migration; None when nothing changed."""
    recorded = recorded_versions(folder)
    files = function_files(functions)
    changed = [f for f in files if recorded.get(f.name) != f.sha256]
    removed = sorted(set(recorded) - {f.name for f in files})
    if not changed and not removed:
        return None
    number = len(list(folder.glob("*.sql"))) + 1
    name = f"{number:04d}_{slug}"
    path = folder / f"{name}.sql"
    path.write_text(
        render_migration(name, changed, reason, recorded_texts(folder), files, folder, removed),
        encoding="utf-8",
    )
    return path
