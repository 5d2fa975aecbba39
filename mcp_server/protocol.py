"""Where the SDK (mcp 2.3.0, pinned) answers a malformed call badly, OneSentenceServer answers it:

- a tool call whose arguments do not fit the tool's schema: one sentence naming the argument, what
  it allows (read from the published input schema, so the sentence and the schema cannot
  disagree) and what was sent; the SDK sends pydantic's report (several lines per error, a link
  naming the pydantic version);
- a tool that crashes: one sentence naming the exception's type (never its text), where the SDK
  says only "Error executing tool <name>";
- over stdio, a line that is not JSON (or not a JSON-RPC message): a JSON-RPC error, -32700 Parse
  error (-32600 Invalid Request), id null, and serving goes on; the SDK's transport hands the
  failure to a loop that drops it, so the client waits for an answer that never comes.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

MAX_SHOWN = 40  # a value sent is quoted up to this many characters, else described by its size


class OneSentenceServer(MCPServer):
    """MCPServer whose argument-validation errors are one sentence (argument_error)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:  # a crash: the SDK says only "Error executing tool <name>"
            cause = exc.__cause__
            raise UnexpectedToolError(
                f"{name} failed on an internal error ({type(cause).__name__ if cause else 'unknown'}), "
                "not on anything the call asked; the server's log has the details"
            ) from cause
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            schema = next((t.input_schema for t in await self.list_tools() if t.name == name), {})
            raise ToolError(argument_error(name, schema, exc.__cause__, arguments)) from exc.__cause__

    async def run_stdio_async(self) -> None:
        """The SDK's own stdio loop (MCPServer.run_stdio_async), with each line the transport could
        not read answered by a JSON-RPC error instead of dropped."""
        async with stdio_server() as (lines, out):
            send, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def answer_unreadable() -> None:
                async with send:
                    async for item in lines:
                        if isinstance(item, Exception):
                            await out.send(SessionMessage(unreadable(item)))
                        else:
                            await send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_unreadable)
                lowlevel = self._lowlevel_server  # as MCPServer.run_stdio_async runs it
                await lowlevel.run(received, out, lowlevel.create_initialization_options())
                tg.cancel_scope.cancel()


def unreadable(exc: Exception) -> JSONRPCError:
    """The JSON-RPC answer to a line the transport could not read: -32700 when it is not JSON
    (a lone surrogate escape, a truncated line), else -32600; one line, id null."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    not_json = not errors or any(e["type"] == "json_invalid" for e in errors)
    reason = (errors[0]["msg"] if errors else str(exc)).replace("\n", " ")[:200]
    if not_json:
        return JSONRPCError(
            jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=f"Parse error: {reason}")
        )
    return JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=ErrorData(code=INVALID_REQUEST, message=f"Invalid Request: not a JSON-RPC message ({reason})"),
    )


def argument_error(
    tool: str, schema: dict[str, Any], error: ValidationError, arguments: dict[str, Any]
) -> str:
    """`search: k must be an integer from 1 to 50; got 0` for the first error pydantic found."""
    first = error.errors()[0]
    loc = first["loc"]
    name = str(loc[0]) if loc else "the arguments"
    prop = schema.get("properties", {}).get(name)
    allowed = allows(prop) if prop else "not an argument of this tool"
    if first["type"] == "missing":
        return f"{tool}: {name} is required: {allowed}"
    item = next((part for part in loc[1:] if isinstance(part, int)), None)
    value = arguments.get(name) if isinstance(arguments, dict) else arguments
    if item is not None and isinstance(value, list) and 0 <= item < len(value):
        got = f"item {item + 1} is {shown(value[item])}"
    else:
        got = f"got {shown(value)}"
    return f"{tool}: {name} must be {allowed}; {got}"


def allows(prop: dict[str, Any]) -> str:
    """What a JSON schema allows, in words: "an integer from 1 to 50", "a list of at most 4
    strings of 1 to 2000 characters", "… or null"."""
    options = prop.get("anyOf")
    if options:
        kinds = [allows(o) for o in options if o.get("type") != "null"]
        nullable = any(o.get("type") == "null" for o in options)
        return " or ".join(kinds) + (" (or null to leave it out)" if nullable else "")
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
    kind = prop.get("type")
    if kind in ("integer", "number"):
        bounds = _bounds(prop.get("minimum"), prop.get("maximum"), "", "from ")
        return ("an integer" if kind == "integer" else "a number") + (f" {bounds}" if bounds else "")
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        bounds = _bounds(prop.get("minLength"), prop.get("maxLength"), " characters")
        return "a string" + (f" of {bounds}" if bounds else "")
    if kind == "array":
        low, high = prop.get("minItems"), prop.get("maxItems")
        count = f"{low}" if low is not None and low == high else _bounds(low, high, "")
        noun = "item" if count.endswith(" 1") or count == "1" else "items"
        items = prop.get("items")
        return f"a list of {count + ' ' if count else ''}{noun}" + (
            f", each {allows(items)}" if items else ""
        )
    if kind == "object":
        return "an object"
    return "a value of the type the tool's schema gives"


def _bounds(low: Any, high: Any, unit: str, span: str = "") -> str:
    """ "from 1 to 50", "1 to 2000 characters", "at most 4", "at least 1", or ""."""
    if low is not None and high is not None:
        return f"{span}{low} to {high}{unit}"
    if high is not None:
        return f"at most {high}{unit}"
    if low is not None:
        return f"at least {low}{unit}"
    return ""


def shown(value: Any) -> str:
    """A value as sent, on one line: quoted when short, else its kind and size."""
    if isinstance(value, str):
        quoted = json.dumps(value, ensure_ascii=False)
        return quoted if len(value) <= MAX_SHOWN else f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_SHOWN else f"a {type(value).__name__} of {len(text)} characters"
