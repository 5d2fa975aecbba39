"""Imports point down (docs/architecture.md, decision 0015): import-linter's contracts in
pyproject.toml hold on the tree, and break, naming the contract and the import, when a
foundation module imports upward."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bookrag", "loader", "evaluation", "mcp_server")
LAYERS = "Layers point down: entry points > evaluation > search > loader > foundation"
MCP_LAYERS = "mcp_server points down: main > http > reading_room > server"


def lint_imports(checkout: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on a checkout's packages, as CI would run it there."""
    script = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(script), "--no-cache"],
        cwd=checkout,
        env={"PYTHONPATH": str(checkout), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{LAYERS} KEPT" in r.stdout and f"{MCP_LAYERS} KEPT" in r.stdout
    assert "Contracts: 3 kept, 0 broken." in r.stdout


def copy_checkout(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)


def test_a_backwards_import_breaks_the_layers_contract(tmp_path):
    copy_checkout(tmp_path)
    config = tmp_path / "bookrag" / "config.py"
    text = config.read_text(encoding="utf-8")
    anchor = "from bookrag.errors import BookragError\n"
    assert anchor in text
    config.write_text(
        text.replace(anchor, anchor + "from mcp_server.server import serve  # backwards\n"), encoding="utf-8"
    )
    line = text[: text.index(anchor)].count("\n") + 2
    r = lint_imports(tmp_path)
    assert r.returncode == 1
    assert f"{LAYERS} BROKEN" in r.stdout and "Contracts: 2 kept, 1 broken." in r.stdout
    assert "bookrag.config is not allowed to import mcp_server:" in r.stdout
    assert f"- bookrag.config -> mcp_server.server (l.{line})" in r.stdout


def test_the_mcp_servers_import_circle_breaks_its_contract(tmp_path):
    """The circle the reading room once made (http -> reading_room -> server -> http, the last
    inside a function) breaks the mcp_server contract, naming the import."""
    copy_checkout(tmp_path)
    server = tmp_path / "mcp_server" / "server.py"
    text = server.read_text(encoding="utf-8")
    anchor = "def build_server("
    assert anchor in text
    server.write_text(
        text.replace(
            anchor, "def _circle() -> None:\n    from mcp_server.http import http_app  # noqa\n\n\n" + anchor
        ),
        encoding="utf-8",
    )
    r = lint_imports(tmp_path)
    assert r.returncode == 1
    assert f"{MCP_LAYERS} BROKEN" in r.stdout and "Contracts: 2 kept, 1 broken." in r.stdout
    assert "mcp_server.server is not allowed to import mcp_server.http:" in r.stdout


def test_the_architecture_page_draws_the_contracted_layers_in_order():
    """docs/architecture.md's layer diagram names every module of the layers contract, top to bottom."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["id"] == "layers"]
    modules = [m.strip() for layer in layers for m in layer.replace(":", "|").split("|")]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = page.split("## Layers", 1)[1].split("```", 2)[1]
    positions = [re.search(rf"(?<![\w.]){re.escape(m)}(?![\w.])", diagram) for m in modules]
    assert all(positions), [m for m, p in zip(modules, positions) if not p]
    starts = [p.start() for p in positions]
    assert starts == sorted(starts), modules
