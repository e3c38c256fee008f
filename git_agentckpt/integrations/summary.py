"""Agent payloads made small enough for the event log: summaries, never the whole thing.

A tool call's input and response can be a whole file (Write's `content`) or a
command's megabytes of output. What is logged keeps the structure and every
short value (paths, ids, commands, statuses) and cuts long strings, long lists
and deep nesting, saying what was cut (`…[N more characters]`), until the JSON
fits `MAX_BYTES`. Redaction happens after this, at the store's gate
(`store/redaction.py`, applied by `append_events`).
"""

from __future__ import annotations

import json
from typing import Any

from git_agentckpt.model import JSON

MAX_BYTES = 8 * 1024  # per field (input, output): a tool call event stays a few KiB
MAX_ITEMS = 40
MAX_DEPTH = 6
STRING_LIMITS = (2000, 400, 80)  # tried in turn until the whole fits MAX_BYTES


def cut_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more characters]"


def _shrink(value: Any, limit: int, depth: int) -> JSON:
    if isinstance(value, str):
        return cut_text(value, limit)
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= MAX_DEPTH:
        return cut_text(json.dumps(value, default=str), limit)
    if isinstance(value, dict):
        items = list(value.items())
        out: dict[str, JSON] = {str(k): _shrink(v, limit, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more keys"
        return out
    if isinstance(value, list | tuple):
        shown: list[JSON] = [_shrink(v, limit, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            shown.append(f"…[{len(value) - MAX_ITEMS} more items]")
        return shown
    return cut_text(str(value), limit)


def summarise(value: Any, max_bytes: int = MAX_BYTES) -> JSON:
    """`value` with long strings, lists and nesting cut until its JSON fits `max_bytes`."""
    for limit in STRING_LIMITS:
        small = _shrink(value, limit, 0)
        text = json.dumps(small, ensure_ascii=False)
        if len(text.encode("utf-8")) <= max_bytes:
            return small
    return cut_text(text, max_bytes // 2)
