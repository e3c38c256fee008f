"""Scripted model servers for the real-agent tests: an Anthropic Messages API and an
OpenAI Responses API on 127.0.0.1, answering turn by turn from a script the test writes.

Each server records every request (path and JSON body) so a test can assert what the
model was sent, and lets the test wait on a request with a deadline instead of a
sleep. A scripted reply can be held (`Hold`) until the test releases it: the agent is
then mid-turn, waiting on the model, and the test can kill it there.

Requests the script does not cover get a plain "Done." that ends the turn; compaction
requests (Claude Code's `/compact` summary request, Codex's inline compaction) are
recognised by their prompt and answered with the script's summary, never consuming a
scripted turn.
"""

from __future__ import annotations

import http.server
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

DEADLINE = 120.0  # seconds a test waits on the agent at most; generous on a loaded machine
LIFETIME = 900.0  # a server nobody stopped shuts itself down after this
SUMMARY = (
    "<analysis>The user asked for notes; they were written.</analysis>\n"
    "<summary>1. Primary Request and Intent: write the notes of the task.</summary>"
)


@dataclass(frozen=True)
class Request:
    """One request the agent sent: its path, its JSON body and its kind as the server
    answered it ("turn", "compact", "extra")."""

    index: int
    path: str
    body: dict[str, Any]
    kind: str
    at: float = 0.0  # time.monotonic() on arrival

    @property
    def text(self) -> str:
        """Every string of the body, one after another: what the model was sent, for
        `in` checks."""
        return "\n".join(strings(self.body))


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


# -- replies a test scripts ---------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """The model answers with text and ends the turn."""

    text: str
    input_tokens: int = 1000


@dataclass(frozen=True)
class ToolCall:
    """The model calls one tool (Claude Code: `name` with `input`; Codex: a function
    call `name` with `input` as its JSON arguments, or a freeform (custom) tool call
    when `input` is a string, as Codex's `apply_patch` is)."""

    name: str
    input: dict[str, Any] | str
    input_tokens: int = 1000


@dataclass(frozen=True)
class Fail:
    """The API refuses the request: HTTP `status` with the API's JSON error body (a 429
    `rate_limit_error` is a usage limit). `x-should-retry: false` tells the agent's SDK
    not to retry it."""

    status: int = 429
    error: str = "rate_limit_error"
    message: str = "This request would exceed your account's rate limit."


@dataclass
class Hold:
    """Hold the request open until `release()` (or the server stops), then answer with
    `reply`. `held` is set once the agent is waiting on it."""

    reply: Text | ToolCall
    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


Reply = Text | ToolCall | Fail | Hold


# -- the server -----------------------------------------------------------------------------


class ScriptedServer:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) answering the agent's model
    requests from a script. Use as a context manager: it stops itself on exit (and on
    its own after LIFETIME seconds)."""

    endpoint = ""  # the POST path the agent uses for a model turn

    def __init__(self, summary: str = SUMMARY) -> None:
        self.summary = summary
        self.requests: list[Request] = []
        self.other_paths: list[str] = []  # requests to other endpoints, answered 404
        self._script: list[Reply] = []
        self._compact_script: list[Reply] = []
        self._holds: list[Hold] = []
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(LIFETIME, self.stop)
        self._timer.daemon = True

    # lifecycle
    def __enter__(self) -> Self:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        with self._cond:
            for hold in self._holds:
                hold.release()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # script and records
    def script(self, *replies: Reply) -> None:
        """Queue the model's next turn replies, in order."""
        with self._cond:
            self._script.extend(replies)

    def wait_for(
        self, predicate: Callable[[Request], bool], after: int = 0, timeout: float = DEADLINE
    ) -> Request:
        """The first request from index `after` on that satisfies `predicate`, waiting
        for it (up to `timeout` seconds)."""
        with self._cond:
            found: list[Request] = []

            def ready() -> bool:
                found[:] = [r for r in self.requests[after:] if predicate(r)][:1]
                return bool(found)

            if not self._cond.wait_for(ready, timeout=timeout):
                kinds = [(r.index, r.kind) for r in self.requests]
                raise AssertionError(f"no such request within {timeout}s; seen {kinds}")
            return found[0]

    def dump(self, where: Path) -> None:
        """Write every request as `<index>-<kind>.json` into `where` (for a failing test)."""
        where.mkdir(parents=True, exist_ok=True)
        with self._cond:
            for r in self.requests:
                text = json.dumps(r.body, indent=1, ensure_ascii=False)
                (where / f"{r.index:03d}-{r.kind}.json").write_text(text)
            start = self.requests[0].at if self.requests else 0.0
            timeline = [f"{r.at - start:8.2f}s {r.index:3d} {r.kind}" for r in self.requests]
            (where / "timeline.txt").write_text("\n".join([*timeline, *self.other_paths]) + "\n")

    def script_compaction(self, *replies: Reply) -> None:
        """Queue replies for the next compaction requests (default: `Text(summary)`);
        a `Hold` here keeps the compaction waiting while the test looks around."""
        with self._cond:
            self._compact_script.extend(replies)

    def turns(self) -> list[Request]:
        with self._cond:
            return [r for r in self.requests if r.kind == "turn"]

    def unused(self) -> list[Reply]:
        with self._cond:
            return list(self._script)

    # answering
    def take(self, path: str, body: dict[str, Any]) -> Reply:
        """Record the request and pick its reply: the next scripted turn, the summary
        for a compaction request, or a plain "Done."."""
        kind = self.classify(body)
        with self._cond:
            reply: Reply
            if kind == "turn" and self._script:
                reply = self._script.pop(0)
            elif kind == "compact" and self._compact_script:
                reply = self._compact_script.pop(0)
            elif kind == "compact":
                reply = Text(self.summary)
            else:
                reply = Text("Done.")
            self.requests.append(Request(len(self.requests), path, body, kind, time.monotonic()))
            if isinstance(reply, Hold):
                self._holds.append(reply)
            self._cond.notify_all()
        return reply

    def render(self, reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
        """The reply as stream chunks; a held reply waits for its release first."""
        if isinstance(reply, Hold):
            reply.held.set()
            reply.released.wait(DEADLINE)
            reply = reply.reply
        assert not isinstance(reply, Fail)  # answered before any stream
        yield from self.stream(reply, body, next(self._ids))

    def classify(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def stream(self, reply: Text | ToolCall, body: dict[str, Any], n: int) -> Iterator[bytes]:
        raise NotImplementedError

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the connection's end ends the stream

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.other_paths.append(f"GET {self.path}")
                self._send_json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                path = self.path.split("?", 1)[0]
                if path != server.endpoint:
                    server.other_paths.append(f"POST {self.path}")
                    self._send_json(404, {"error": {"type": "not_found", "message": path}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                reply = server.take(path, body)
                if isinstance(reply, Fail):
                    error = {
                        "type": "error",
                        "error": {"type": reply.error, "message": reply.message},
                    }
                    self._send_json(reply.status, error, {"x-should-retry": "false"})
                    return
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    for chunk in server.render(reply, body):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent was killed while we answered

            def _send_json(
                self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


# -- Anthropic Messages API (Claude Code) ------------------------------------------------------

CLAUDE_COMPACT_MARKERS = ("create a detailed summary of the conversation",)


def message_texts(body: dict[str, Any]) -> list[str]:
    """Every text a Messages request carries (system blocks, message text blocks and
    tool results), in order."""
    out: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        out.append(system)
    elif isinstance(system, list):
        out += [str(b.get("text", "")) for b in system if isinstance(b, dict)]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                out.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return out


class AnthropicServer(ScriptedServer):
    """`POST /v1/messages` streamed as Server-Sent Events, the way Claude Code asks."""

    endpoint = "/v1/messages"

    def classify(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        last = json.dumps(messages[-1]).lower() if messages else ""
        if any(marker in last for marker in CLAUDE_COMPACT_MARKERS):
            return "compact"
        if not body.get("tools"):
            return "extra"  # a side request (a title, a quota probe): not a turn
        return "turn"

    def stream(self, reply: Text | ToolCall, body: dict[str, Any], n: int) -> Iterator[bytes]:
        model = str(body.get("model", "claude-test"))
        usage = {
            "input_tokens": reply.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
        }
        message: dict[str, Any] = {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield sse("message_start", {"type": "message_start", "message": message})
        if isinstance(reply, ToolCall):
            block = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": reply.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.input)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": reply.text}
            stop = "end_turn"
        yield sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        yield sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
        yield sse("message_stop", {"type": "message_stop"})


# -- OpenAI Responses API (Codex) ---------------------------------------------------------------

CODEX_COMPACT_MARKERS = ("context checkpoint compaction", "handoff summary")


def response_texts(body: dict[str, Any]) -> list[str]:
    """Every text a Responses request carries (instructions, message content, function
    call outputs), in order."""
    out: list[str] = []
    if isinstance(body.get("instructions"), str):
        out.append(body["instructions"])
    for item in body.get("input") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and "text" in part:
                    out.append(str(part["text"]))
        elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            out.append(output if isinstance(output, str) else json.dumps(output))
    return out


class ResponsesServer(ScriptedServer):
    """`POST /v1/responses` streamed as Server-Sent Events, the way Codex asks."""

    endpoint = "/v1/responses"

    def classify(self, body: dict[str, Any]) -> str:
        items = body.get("input") or []
        last = json.dumps(items[-1]).lower() if items else ""
        if any(marker in last for marker in CODEX_COMPACT_MARKERS):
            return "compact"
        return "turn"

    def stream(self, reply: Text | ToolCall, body: dict[str, Any], n: int) -> Iterator[bytes]:
        rid = f"resp_{n:04d}"
        response: dict[str, Any] = {
            "id": rid,
            "object": "response",
            "status": "in_progress",
            "model": body.get("model"),
            "output": [],
        }
        yield sse("response.created", {"type": "response.created", "response": response})
        if isinstance(reply, ToolCall) and isinstance(reply.input, str):
            item: dict[str, Any] = {
                "type": "custom_tool_call",
                "id": f"ctc_{n:04d}",
                "call_id": f"call_{n:04d}",
                "name": reply.name,
                "input": reply.input,
                "status": "completed",
            }
        elif isinstance(reply, ToolCall):
            item = {
                "type": "function_call",
                "id": f"fc_{n:04d}",
                "call_id": f"call_{n:04d}",
                "name": reply.name,
                "arguments": json.dumps(reply.input),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{n:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        yield sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        usage = {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + 20,
        }
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        yield sse("response.completed", {"type": "response.completed", "response": done})
