"""`git ckpt mcp`'s stdio transport: every request gets an answer.

The SDK's stdio transport reads each line with pydantic's JSON parser and, when
that fails, hands the error to the session, which drops it: a request holding a
lone surrogate (`"\\udcff"`: JSON's syntax, not Unicode text) or nesting more
than 200 levels (even in a key nobody reads), or not shaped as JSON-RPC, got no
answer, and the agent waited for ever. Here the same transport runs, and each
line it could not read is answered on its write stream (the one writer of the
pipe): with the request's id when Python's `json` reads the line (-32700 for a
line the SDK cannot parse, -32600 for a wrong shape), with `"id": null` when no
id can be read (JSON-RPC's rule for a parse error). A notification or a response
the SDK could not read gets no answer, as JSON-RPC says.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

Item = SessionMessage | Exception


def _sent(exc: ValidationError) -> Any:
    """What the client sent: the line when it is not JSON the SDK reads, else the
    message object (the input of the first error made on the whole of it)."""
    errors = exc.errors()
    for err in errors:
        if err["type"] == "json_invalid" or isinstance(err["input"], dict):
            return err["input"]
    return errors[0]["input"]


def _request_id(value: Any) -> int | str | None:
    """`value` as an id an answer can carry (None: not one, or not Unicode text)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return None


def _error(msg_id: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=msg_id, error=ErrorData(code=code, message=message))


def _why(exc: ValidationError) -> tuple[int, str]:
    """The error code and message to answer with, from the SDK's first error."""
    err = exc.errors()[0]
    if err["type"] != "json_invalid":
        where = ".".join(map(str, err["loc"][1:]))
        return INVALID_REQUEST, f"Invalid request: {where + ': ' if where else ''}{err['msg']}"
    reason = err["msg"].removeprefix("Invalid JSON: ")
    if "surrogate" in reason or "hex escape" in reason:
        reason = f"a lone surrogate is not Unicode text ({reason})"
    elif "recursion limit" in reason:
        reason = f"nested deeper than the server reads ({reason})"
    return PARSE_ERROR, f"Parse error: {reason}"


def refusal(exc: ValidationError) -> JSONRPCError | None:
    """The answer to a line the SDK could not read (None: a blank line, a notification
    or a response, which get none)."""
    sent, (code, reason) = _sent(exc), _why(exc)
    if isinstance(sent, str):
        if not sent.strip():
            return None
        try:
            sent = json.loads(sent)
        except (ValueError, RecursionError):
            return _error(None, code, reason)
    if not isinstance(sent, dict):
        return _error(None, INVALID_REQUEST, "Invalid request: not a JSON object")
    if "result" in sent or "error" in sent or "id" not in sent:
        return None
    return _error(_request_id(sent["id"]), code, reason)


class Answering:
    """The transport's read stream, answering on `out` each line the SDK could not read
    instead of passing its error on."""

    def __init__(self, inner: ReadStream[Item], out: WriteStream[SessionMessage]) -> None:
        self.inner = inner
        self.out = out

    @property
    def last_context(self) -> Any:  # the sender's context of the last item (the SDK's)
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Item:
        while True:
            item = await self.inner.receive()
            answer = refusal(item) if isinstance(item, ValidationError) else None
            if answer is None:
                return item
            await self.out.send(SessionMessage(answer))

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class AnsweringServer(MCPServer):
    """The SDK's server over stdio (`run("stdio")`), through `Answering`."""

    async def run_stdio_async(self) -> None:
        server = self._lowlevel_server
        async with stdio_server() as (read_stream, write_stream):
            reading = Answering(read_stream, write_stream)
            await server.run(reading, write_stream, server.create_initialization_options())
