"""`bookrag mcp config`: each client's snippet is valid JSON of the shape that client documents,
names this checkout by absolute paths, and starts a server that answers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from bookrag.cli import main
from bookrag.config import DEFAULT_HOME
from bookrag.mcp_config import CLIENTS, snippet
from tests.conftest import settings_for


def printed(capsys, client: str) -> tuple[dict, str]:
    assert main(["mcp", "config", "--client", client]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def check_entry(entry: dict, home: Path) -> None:
    assert set(entry) >= {"command", "args", "env"}
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert entry["args"] == ["mcp"]
    assert entry["env"]["BOOKRAG_HOME"] == str(home) and Path(entry["env"]["BOOKRAG_HOME"]).is_absolute()
    assert all(isinstance(v, str) for v in entry["env"].values())


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code"])
def test_claude_clients_read_mcp_servers(client, capsys, monkeypatch):
    monkeypatch.delenv("BOOKRAG_HOME", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config, where = printed(capsys, client)
    assert list(config) == ["mcpServers"] and list(config["mcpServers"]) == ["bookrag"]
    entry = config["mcpServers"]["bookrag"]
    assert "type" not in entry
    check_entry(entry, DEFAULT_HOME.resolve())
    if client == "claude-desktop":
        assert "claude_desktop_config.json" in where and "restart" in where
        assert "Library/Application Support/Claude/" in where and "%APPDATA%\\Claude\\" in where
    else:
        assert (
            ".mcp.json" in where
            and "claude mcp add --transport stdio" in where
            and f"-- {entry['command']} mcp" in where
        )


def test_vscode_reads_servers_with_a_type(capsys, monkeypatch):
    monkeypatch.delenv("BOOKRAG_HOME", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config, where = printed(capsys, "vscode")
    assert list(config) == ["servers"] and list(config["servers"]) == ["bookrag"]
    entry = config["servers"]["bookrag"]
    assert entry["type"] == "stdio"
    check_entry(entry, DEFAULT_HOME.resolve())
    assert ".vscode/mcp.json" in where


def test_the_default_client_is_claude_desktop_and_a_bad_one_is_refused(capsys):
    config, _ = printed(capsys, "claude-desktop")
    assert main(["mcp", "config"]) == 0
    assert json.loads(capsys.readouterr().out) == config
    with pytest.raises(SystemExit) as exit_:
        main(["mcp", "config", "--client", "cursor"])
    assert exit_.value.code == 2
    assert "invalid choice: 'cursor'" in capsys.readouterr().err


def test_a_database_url_goes_in_the_env_block(corpus_url):
    settings = settings_for(DEFAULT_HOME, corpus_url)
    for client in CLIENTS:
        servers = snippet(client, settings)
        entry = next(iter(next(iter(servers.values())).values()))
        assert entry["env"]["DATABASE_URL"] == corpus_url


def test_the_snippet_starts_a_server_that_answers(corpus_url):
    """What a client does with the snippet: start `command args` with `env`, then call a tool."""
    entry = snippet("claude-desktop", settings_for(DEFAULT_HOME, corpus_url))["mcpServers"]["bookrag"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BOOKRAG_", "DATABASE_URL"))}

    async def run() -> list[str]:
        params = StdioServerParameters(
            command=entry["command"], args=entry["args"], env={**env, **entry["env"]}
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("list_books", {})
            assert not result.is_error, result.content
            return [b["book"] for b in result.structured_content["books"]]

    assert anyio.run(run) == ["traite-des-echanges"]
