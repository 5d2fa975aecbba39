"""Arguments that do not fit a tool's schema are one sentence (mcp_server/protocol.py): every
tool's every argument is sent a wrong type, a value out of its bounds, and each required one is
left out; each answer names the argument, says what it allows, on one line, without pydantic's
report. Validation comes before any database work: the server here has no database."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from bookrag.config import DEFAULT_HOME, Settings
from mcp_server.server import build_server

VALID = {"query": "pain", "source_file": "corpus/x/summary.md", "book": "x", "sql": "SELECT 1"}


def bad_values(prop: dict[str, Any]) -> list[Any]:
    """A wrong type for the argument, and each bound's first value past it."""
    schema = next((o for o in prop.get("anyOf", []) if o.get("type") != "null"), prop)
    out: list[Any] = [{"an": "object"}]
    kind = schema.get("type")
    if kind == "integer":
        out += [schema["minimum"] - 1] if "minimum" in schema else []
        out += [schema["maximum"] + 1] if "maximum" in schema else []
        out.append("twelve")
    if kind == "string":
        out += ["x" * (schema["maxLength"] + 1)] if "maxLength" in schema else []
        out += [""] if schema.get("minLength") else []
        out.append(12)
    if kind == "array":
        item = {"integer": 1, "string": "a"}.get(schema.get("items", {}).get("type"), 1)
        out += [[item] * (schema["maxItems"] + 1)] if "maxItems" in schema else []
        out += [[item] * (schema["minItems"] - 1)] if schema.get("minItems") else []
        out += [["z"]] if schema.get("items", {}).get("type") == "integer" else []
        out.append("not a list")
    if kind == "boolean":
        out.append("maybe")
    return out


def test_every_validation_error_is_one_sentence():
    server = build_server(Settings(DEFAULT_HOME, "postgresql:///none", None, "local", None, 400))

    async def main() -> list[tuple[str, Any, str]]:
        answers = []
        async with Client(server) as client:
            for tool in (await client.list_tools()).tools:
                schema = tool.input_schema
                required = {name: VALID[name] for name in schema.get("required", [])}
                for name in required:  # each required argument left out
                    r = await client.call_tool(tool.name, {k: v for k, v in required.items() if k != name})
                    answers.append((f"{tool.name}.{name}", None, r.content[0].text if r.is_error else "ok"))
                for name, prop in schema.get("properties", {}).items():
                    for value in bad_values(prop):
                        r = await client.call_tool(tool.name, {**required, name: value})
                        answers.append(
                            (f"{tool.name}.{name}", value, r.content[0].text if r.is_error else "ok")
                        )
        return answers

    answers = anyio.run(main)
    assert len(answers) >= 40
    for where, value, text in answers:
        tool, name = where.split(".")
        assert text.startswith(f"{tool}: {name} "), (where, value, text)
        assert " must be " in text or " is required: " in text, (where, value, text)
        assert "\n" not in text and "pydantic" not in text.lower() and len(text) < 300, (where, value, text)
    by_where = {(w, repr(v)): t for w, v, t in answers}
    assert by_where[("search.k", "51")] == "search: k must be an integer from 1 to 50; got 51"
    assert by_where[("search.query", "None")] == "search: query is required: a string of 1 to 2000 characters"
    assert by_where[("search.phrasings", repr(["a"] * 5))] == (
        "search: phrasings must be a list of at most 4 items, each a string of 1 to 2000 characters; "
        "got a list of 5 items"
    )
    assert by_where[("get_node.paragraphs", repr(["z"]))].endswith('; item 1 is "z"')


def test_a_crash_is_one_sentence_naming_its_type(monkeypatch):
    from mcp_server import server as mcp

    def crash(sql: str) -> str:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(mcp, "check_select", crash)
    server = build_server(Settings(DEFAULT_HOME, "postgresql:///none", None, "local", None, 400))

    async def main():
        async with Client(server) as client:
            return await client.call_tool("read_only_sql", {"sql": "SELECT 1"})

    r = anyio.run(main)
    assert r.is_error and r.content[0].text == (
        "read_only_sql failed on an internal error (RuntimeError), not on anything the call asked; "
        "the server's log has the details"
    )


def test_unreadable_stdio_lines_are_answered_and_serving_goes_on(corpus_url, corpus_home):
    """Raw bytes to `bookrag mcp`'s stdin: a line that is not JSON, a lone surrogate escape, a JSON
    line that is no JSON-RPC message; each gets a JSON-RPC error (id null) on one line, and the
    requests after them are answered."""
    import os
    import subprocess
    import sys
    import threading

    from mcp_types import LATEST_PROTOCOL_VERSION

    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKRAG_")}
    env.update(DATABASE_URL=corpus_url, BOOKRAG_HOME=str(corpus_home))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookrag.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    guard = threading.Timer(180, proc.kill)  # a bound for a broken server only
    guard.start()

    def send(line: bytes) -> dict:
        assert proc.stdin and proc.stdout
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        assert answer.endswith(b"\n") and answer.count(b"\n") == 1, answer
        return json.loads(answer)

    try:
        for line, code in (
            (b"this is not json", -32700),
            (b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"x": "\\ud800"}}', -32700),
            (b"\xff\xfe{", -32700),
            (b'{"hello": "world"}', -32600),
        ):
            answer = send(line)
            assert answer["id"] is None and answer["error"]["code"] == code, (line, answer)
            assert "\n" not in answer["error"]["message"]
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        answer = send(json.dumps(init).encode())
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "bookrag"
        assert send(b"not json either")["error"]["code"] == -32700
        assert send(b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}') == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {},
        }
    finally:
        guard.cancel()
        proc.kill()
        proc.wait()
