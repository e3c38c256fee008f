"""The context size of an agent session, from the tail of its transcript.

A hook is called after every tool call; the transcript may be megabytes long,
so only its end is read: blocks of 64 KiB from the end backwards, until a line
with the usage is found or 4 MiB were read. The file is opened read-only and
never written, and only a regular file is read: a path the payload names that is
a FIFO or a device is treated as no transcript (it could keep the hook waiting).

- Claude Code (`~/.claude/projects/…/<session>.jsonl`): the last `assistant`
  line's `message.usage`; the context is `input_tokens +
  cache_read_input_tokens + cache_creation_input_tokens` (what the model read).
- Codex (`~/.codex/sessions/…/rollout-….jsonl`): the last `event_msg` of type
  `token_count`; `info.last_token_usage.input_tokens` (its `cached_input_tokens`
  are part of it), and `info.model_context_window` when given.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

BLOCK = 64 * 1024
MAX_TAIL = 4 * 1024 * 1024


@dataclass(frozen=True)
class ContextUsage:
    tokens: int  # tokens the model read for its last answer: the context's size
    window: int | None = None  # the model's context window, when the transcript says


def _lines_backwards(path: str, limit: int = MAX_TAIL) -> Iterator[bytes]:
    """Complete lines of `path`, last first, reading at most `limit` bytes from its end;
    none when it is not a regular file (a FIFO or a device may never answer)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # a FIFO: no wait
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        carry = b""
        read = 0
        while pos > 0 and read < limit:
            size = min(BLOCK, pos)
            pos -= size
            fh.seek(pos)
            chunk = fh.read(size) + carry
            read += size
            lines = chunk.split(b"\n")
            carry = lines[0]  # may be cut: completed by the next block, if any
            yield from reversed(lines[1:])
        if pos == 0 and carry:
            yield carry


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _claude(record: dict[str, Any]) -> ContextUsage | None:
    if record.get("type") != "assistant":
        return None
    message = record.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict):
        return None
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return ContextUsage(sum(_int(usage.get(k)) for k in keys))


def _codex(record: dict[str, Any]) -> ContextUsage | None:
    if record.get("type") != "event_msg":
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict) or payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict):
        return None  # a token_count with only rate limits: look further back
    assert isinstance(info, dict)
    window = _int(info.get("model_context_window")) or None
    return ContextUsage(_int(last.get("input_tokens")), window)


def last_usage(path: str | None, agent: str) -> ContextUsage | None:
    """The context size at the last model answer of the transcript, or None when the
    tail holds none (or the file cannot be read: a hook never fails for this)."""
    if not path:
        return None
    parse = _codex if agent == "codex" else _claude
    try:
        for line in _lines_backwards(path):
            if b'"usage"' not in line and b"token_count" not in line:
                continue  # most lines: no JSON decode
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found = parse(record)
                if found is not None:
                    return found
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class ApiError:
    error: str  # rate_limit, billing_error, overloaded, ... as the transcript names it
    status: int | None
    message: str


def last_api_error(path: str | None) -> ApiError | None:
    """The API error that ended a Claude Code session, when its last assistant record is
    one (`isApiErrorMessage`: in `claude -p` a usage limit ends the session with no
    Stop or StopFailure hook, only SessionEnd); None otherwise."""
    if not path:
        return None
    try:
        for line in _lines_backwards(path):
            if b'"assistant"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("type") != "assistant":
                continue
            if record.get("isApiErrorMessage") is not True:
                return None  # the last answer was a real one
            return ApiError(
                str(record.get("error") or "unknown"),
                _int(record.get("apiErrorStatus")) or None,
                _message_text(record.get("message")),
            )
    except OSError:
        return None
    return None


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content[:500]
    texts = [c.get("text") for c in content or [] if isinstance(c, dict)]
    return " ".join(t for t in texts if isinstance(t, str))[:500]
