"""Arguments that do not fit a tool's schema are one sentence (mcp_server/arguments.py): every
tool's every argument is sent a wrong type, a value out of its bounds, and each required one is
left out; each answer names the argument, says what it allows, on one line, without pydantic's
report. Validation comes before any database work: the server here has no database."""

from __future__ import annotations

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
