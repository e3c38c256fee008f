"""Edit one key of a TOML file in place, keeping every comment and key it does not touch.

tomli-w writes TOML but cannot keep comments, so `git ckpt config set` edits
the one line that holds the key (or inserts one) and checks the result with
tomllib. Only when that is not possible (the old value spans several lines)
does it fall back to a full rewrite with tomli-w, which keeps every key but
drops comments, and says so.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

import tomli_w

_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_SIMPLE_VALUE = re.compile(r"^(?P<value>[^\"'\[\]{}#]*?)\s*(?P<comment>#.*)?$")


@dataclass(frozen=True)
class Edited:
    text: str
    kept_comments: bool


def render_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    return tomli_w.dumps({"x": value}).split("=", 1)[1].strip()


def lookup(doc: dict[str, Any], dotted: str) -> Any:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _assign(doc: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise KeyError(dotted)
        node = child
    node[parts[-1]] = value


def _key_re(key: str) -> re.Pattern[str]:
    return re.compile(
        rf"^(?P<indent>\s*)(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=\s*(?P<rest>.*)$"
    )


def set_key(text: str, dotted: str, value: Any) -> Edited:
    table, _, key = dotted.rpartition(".")
    lines = text.splitlines(keepends=True)
    # the region of the table: from its header to the next header
    start, end = (0, len(lines))
    header_at = None
    current: str | None = ""
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m:
            if current == table and (header_at is not None or table == ""):
                end = i
                break
            current = m.group(1).strip()
            if current == table:
                header_at, start = i, i + 1
    else:
        end = len(lines)
    if table and header_at is None:
        start = end = len(lines)
    new_line = f"{key} = {render_value(value)}\n"
    pattern = _key_re(key)
    edited: list[str] | None = None
    for i in range(start, end):
        m = pattern.match(lines[i].rstrip("\n"))
        if not m:
            continue
        rest = m.group("rest")
        simple = _SIMPLE_VALUE.match(rest)
        if rest.count("[") != rest.count("]") or rest.count("{") != rest.count("}"):
            edited = None  # a value over several lines: fall back
            break
        comment = simple.group("comment") if simple and simple.group("comment") else ""
        closing = rest.rfind("]")
        if not comment and closing != -1 and rest[closing + 1 :].strip().startswith("#"):
            comment = rest[closing + 1 :].strip()
        line = f"{m.group('indent')}{key} = {render_value(value)}"
        edited = [*lines[:i], line + (f"  {comment}" if comment else "") + "\n", *lines[i + 1 :]]
        break
    else:
        if table and header_at is None:
            prefix = (
                ""
                if not text or text.endswith("\n\n")
                else ("\n" if text.endswith("\n") else "\n\n")
            )
            edited = [*lines, f"{prefix}[{table}]\n", new_line]
        else:
            insert = end
            while insert > start and not lines[insert - 1].strip():
                insert -= 1
            edited = [*lines[:insert], new_line, *lines[insert:]]
    if edited is not None:
        candidate = "".join(edited)
        try:
            if lookup(tomllib.loads(candidate), dotted) == value:
                return Edited(candidate, kept_comments=True)
        except (tomllib.TOMLDecodeError, KeyError):
            pass
    doc = tomllib.loads(text) if text.strip() else {}
    _assign(doc, dotted, value)
    return Edited(tomli_w.dumps(doc), kept_comments=False)


def parse_value(raw: str) -> Any:
    """A command-line value: TOML when it parses (10, 0.5, true, [0.8, 0.95], "x"), else text."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
