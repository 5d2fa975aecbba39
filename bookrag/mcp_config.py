"""`bookrag mcp config`: the snippet each MCP client needs to start this checkout's server over
stdio, with absolute paths, and the file it goes in. Each client's documented shape:
Claude Desktop and Claude Code read `{"mcpServers": {name: {command, args, env}}}`, VS Code
reads `{"servers": {name: {type: "stdio", command, args, env}}}`."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any, Literal

from bookrag.config import Settings

Client = Literal["claude-desktop", "claude-code", "vscode"]
CLIENTS: tuple[Client, ...] = ("claude-desktop", "claude-code", "vscode")
SERVER_NAME = "bookrag"

#: Where each client reads the snippet, and what to do after pasting it.
WHERE: dict[Client, str] = {
    "claude-desktop": (
        "Claude Desktop: merge this into ~/Library/Application Support/Claude/claude_desktop_config.json (macOS) "
        "or %APPDATA%\\Claude\\claude_desktop_config.json (Windows) — Settings > Developer > Edit Config opens it — "
        "then quit and restart Claude Desktop"
    ),
    "claude-code": (
        "Claude Code: merge this into .mcp.json at the root of your project (shared with the project), or run: "
        "{add_command}"
    ),
    "vscode": (
        "VS Code: merge this into .vscode/mcp.json in your workspace (or run `MCP: Open User Configuration`), "
        "then start the server from that file or the Extensions view"
    ),
}


def executable(settings: Settings) -> Path:
    """The program a client starts: the checkout's installed console script, else its `run` script,
    else whatever `bookrag` is on PATH."""
    for candidate in (settings.home / ".venv" / "bin" / "bookrag", settings.home / "run"):
        if candidate.is_file():
            return candidate.resolve()
    found = shutil.which("bookrag")
    return Path(found).resolve() if found else settings.home / "run"


def server_entry(settings: Settings) -> dict[str, Any]:
    """command, args and env of the stdio server: env names the checkout (and the database when it
    is not the embedded one), since clients start servers from their own folder."""
    env = {"BOOKRAG_HOME": str(settings.home)}
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    if settings.mcp_database_url:
        env["BOOKRAG_MCP_DATABASE_URL"] = settings.mcp_database_url
    return {"command": str(executable(settings)), "args": ["mcp"], "env": env}


def snippet(client: Client, settings: Settings) -> dict[str, Any]:
    entry = server_entry(settings)
    if client == "vscode":
        return {"servers": {SERVER_NAME: {"type": "stdio", **entry}}}
    return {"mcpServers": {SERVER_NAME: entry}}


def add_command(settings: Settings) -> str:
    """The `claude mcp add` line registering the same server in Claude Code."""
    entry = server_entry(settings)
    envs = " ".join(f"--env {_quote(f'{k}={v}')}" for k, v in entry["env"].items())
    return f"claude mcp add --transport stdio {envs} {SERVER_NAME} -- {_quote(entry['command'])} {' '.join(entry['args'])}"


def where(client: Client, settings: Settings) -> str:
    return WHERE[client].format(add_command=add_command(settings))


def _quote(text: str) -> str:
    return shlex.quote(text)
