"""Agent payloads made small enough for the event log: summaries, never the whole thing.

A tool call's input and response can be a whole file (Write's `content`) or a
command's megabytes of output. What is logged keeps the structure and every
short value (paths, ids, commands, statuses) and cuts long strings, long lists
and deep nesting, saying what was cut (`…[N more characters]`), until the JSON
fits `MAX_BYTES`. A long string is cut after redacting (`redact`, the store's
redactor) its head and `REDACT_MARGIN` characters past the cut, so a cut never
leaves half a secret behind, and what is kept is redacted once more as a whole
(secret-named keys); a 60 MB prompt costs no more than a long one (redacting it
whole took 13 s, more than a hook's 10 s). The store's gate
(`store/redaction.py`, applied by `append_events`) redacts it once more.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from git_agentckpt.model import JSON

MAX_BYTES = 8 * 1024  # per field (input, output): a tool call event stays a few KiB
MAX_ITEMS = 40
MAX_DEPTH = 6
STRING_LIMITS = (2000, 400, 80)  # tried in turn until the whole fits MAX_BYTES
REDACT_MARGIN = 64 * 1024  # characters past a cut redacted with the head: a secret's length


def cut_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more characters]"


class _Cutter:
    """Cuts long strings, each after redacting its head once (the longest head kept plus
    a margin: a secret across the cut is redacted whole)."""

    def __init__(self, redact: Callable[[Any], Any] | None) -> None:
        self.redact = redact
        # id() of a string -> the string (kept alive: its id is not reused) and its head
        self.heads: dict[int, tuple[str, str]] = {}

    def cut(self, text: str, limit: int) -> str:
        if len(text) <= limit:
            return text  # redacted with the whole summary
        _, head = self.heads.get(id(text), (text, ""))
        if not head:
            head = text[: STRING_LIMITS[0] + REDACT_MARGIN]
            head = str(self.redact(head)) if self.redact is not None else head
            self.heads[id(text)] = (text, head)
        return f"{head[:limit]}…[{len(text) - limit} more characters]"


def _shrink(value: Any, limit: int, depth: int, cutter: _Cutter) -> JSON:
    if isinstance(value, str):
        return cutter.cut(value, limit)
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_DEPTH:
        return cutter.cut(json.dumps(value, default=str), limit)
    if isinstance(value, dict):
        items = list(value.items())
        out: dict[str, JSON] = {
            cutter.cut(str(k), limit): _shrink(v, limit, depth + 1, cutter)
            for k, v in items[:MAX_ITEMS]
        }
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more keys"
        return out
    if isinstance(value, list | tuple):
        shown = [_shrink(v, limit, depth + 1, cutter) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            shown.append(f"…[{len(value) - MAX_ITEMS} more items]")
        return shown
    return cutter.cut(str(value), limit)


def summarise(
    value: Any, max_bytes: int = MAX_BYTES, redact: Callable[[Any], Any] | None = None
) -> JSON:
    """`value` with long strings, lists and nesting cut until its JSON fits `max_bytes`,
    redacted by `redact` when given (long strings before they are cut)."""
    cutter = _Cutter(redact)
    for limit in STRING_LIMITS:
        small = _shrink(value, limit, 0, cutter)
        if redact is not None:
            small = redact(small)
        text = json.dumps(small, ensure_ascii=False)
        if len(text.encode("utf-8")) <= max_bytes:
            return small
    return cut_text(text, max_bytes // 2)
