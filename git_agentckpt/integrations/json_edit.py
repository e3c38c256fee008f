"""Edit a JSON settings file as text splices, keeping the rest of its bytes.

The agents' settings files are written by people: their indentation (tabs, two or four
spaces, one compact line), line endings, key order and trailing newline are theirs.
`git ckpt integrate` never re-serialises such a file. It parses it into spans (where each
value, member and element starts and ends) and inserts or deletes text around one child of
one container, in the file's own style.

Each insertion has an exact inverse, so that removing what was inserted gives back the
bytes that were there before:

- a child appended after siblings is `"," + separator + child` after the last sibling;
  removing a child that has a previous sibling deletes from that sibling's end to the
  child's end;
- a child put into an empty container replaces the whitespace inside it (which the caller
  records, `Container.inner`); removing the only child puts that whitespace back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

JsonPath = tuple[str, ...]  # object keys from the top, e.g. ("hooks", "Stop")


class JsonTextError(ValueError):
    """The text is not valid JSON (or not the shape expected): `line` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Node:
    """A JSON value of the text: [start, end) and, for containers, where its children are."""

    kind: str  # "object" | "array" | "scalar"
    start: int
    end: int
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays

    def member(self, key: str) -> Member | None:
        """The member named `key` (the last one, as JSON.parse and json.loads take it)."""
        found = [m for m in self.members if m.key == key]
        return found[-1] if found else None

    def children(self) -> list[tuple[int, int]]:
        """[start, end) of each member (key to value) or element, in order."""
        if self.kind == "object":
            return [(m.start, m.value.end) for m in self.members]
        return [(n.start, n.end) for n in self.items]


@dataclass
class Member:
    key: str
    start: int  # the key's opening quote
    value: Node


_WS = " \t\r\n"
_SCALAR = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null', re.S)


def parse(text: str) -> Node:
    """The span tree of `text` (with an optional UTF-8 BOM before it), which must hold one
    valid JSON value; a JsonTextError naming the line otherwise."""
    body = text[1:] if text.startswith("\ufeff") else text
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        raise JsonTextError(
            f"{exc.msg} (line {exc.lineno} column {exc.colno})", exc.lineno
        ) from exc
    except RecursionError as exc:
        raise JsonTextError("nested too deeply", 1) from exc
    try:
        node, _ = _value(text, _skip(text, len(text) - len(body)))
    except RecursionError as exc:
        raise JsonTextError("nested too deeply", 1) from exc
    return node


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _value(text: str, pos: int) -> tuple[Node, int]:
    """The node starting at `pos` (valid JSON, checked by `parse`) and where it ends."""
    if text[pos] == "{":
        node = Node("object", pos, pos)
        pos = _skip(text, pos + 1)
        while text[pos] != "}":
            key_end = _SCALAR.match(text, pos)
            assert key_end is not None
            key = json.loads(key_end.group(0))
            value, after = _value(text, _skip(text, _skip(text, key_end.end()) + 1))
            node.members.append(Member(key, pos, value))
            pos = _skip(text, after)
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        node.end = pos + 1
        return node, pos + 1
    if text[pos] == "[":
        node = Node("array", pos, pos)
        pos = _skip(text, pos + 1)
        while text[pos] != "]":
            item, after = _value(text, pos)
            node.items.append(item)
            pos = _skip(text, after)
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        node.end = pos + 1
        return node, pos + 1
    found = _SCALAR.match(text, pos)
    assert found is not None
    return Node("scalar", pos, found.end()), found.end()


def find(root: Node, path: JsonPath) -> Node | None:
    node: Node | None = root
    for key in path:
        if node is None or node.kind != "object":
            return None
        member = node.member(key)
        node = member.value if member else None
    return node


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@dataclass(frozen=True)
class Style:
    """How the file writes JSON: line ending, indent unit, separators, one-line or not."""

    newline: str = "\n"
    unit: str = "  "
    colon: str = ": "
    comma: str = ", "  # between elements on one line
    multiline: bool = True


def detect_style(text: str, root: Node) -> Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    multiline = "\n" in text[root.start : root.end] or not root.members
    unit = "  "
    if root.members and multiline:
        indent = _line_indent(text, root.members[0].start)
        if indent:
            unit = indent
    colon, comma = ": ", ""
    for node in _walk(root):
        if node.kind == "object" and node.members:
            m = node.members[0]
            key = _SCALAR.match(text, m.start)
            assert key is not None
            colon = text[key.end() : m.value.start]
            break
    for node in _walk(root):
        spans = node.children()
        if len(spans) > 1 and "\n" not in text[spans[0][1] : spans[1][0]]:
            comma = text[spans[0][1] : spans[1][0]]
            break
    if not comma:  # no two elements on one line: the colon's spacing tells
        comma = ", " if colon.endswith(" ") else ","
    return Style(newline, unit, colon, comma, multiline)


def _walk(node: Node) -> Iterator[Node]:
    yield node
    for child in [m.value for m in node.members] + node.items:
        yield from _walk(child)


def _line_indent(text: str, pos: int) -> str:
    """The whitespace that starts the line holding `pos`."""
    start = text.rfind("\n", 0, pos) + 1
    end = start
    while end < pos and text[end] in " \t":
        end += 1
    return text[start:end]


def render(value: Any, style: Style, indent: str, multiline: bool) -> str:
    """`value` as JSON text in `style`, its first line at the cursor, later lines after
    `indent` (the indentation of the line it starts on)."""
    if not multiline:
        return json.dumps(value, separators=(style.comma, style.colon), ensure_ascii=False)
    text = json.dumps(value, indent=style.unit, separators=(",", style.colon), ensure_ascii=False)
    return text.replace("\n", style.newline + indent)


def render_member(key: str, value: Any, style: Style, indent: str, multiline: bool) -> str:
    return (
        json.dumps(key, ensure_ascii=False) + style.colon + render(value, style, indent, multiline)
    )


@dataclass(frozen=True)
class Inserted:
    """What `append_child` did: the new text, and the whitespace that was inside the
    container when it was empty (None when it had children) — `remove_child` needs it."""

    text: str
    inner: str | None


def append_child(text: str, container: Node, style: Style, key: str | None, value: Any) -> Inserted:
    """`text` with `value` appended to `container` (as member `key` of an object)."""

    def child(indent: str, multiline: bool) -> str:
        if key is None:
            return render(value, style, indent, multiline)
        return render_member(key, value, style, indent, multiline)

    open_, close = container.start, container.end - 1
    spans = container.children()
    inner = text[open_ + 1 : close]
    multiline = style.multiline and ("\n" in inner or not spans)
    if spans:
        last_end = spans[-1][1]
        if multiline:
            indent = _line_indent(text, spans[-1][0])
            insert = "," + style.newline + indent + child(indent, True)
        else:
            insert = _separator(text, spans, style) + child("", False)
        return Inserted(text[:last_end] + insert + text[last_end:], None)
    if multiline:
        outer = _line_indent(text, open_)
        indent = outer + style.unit
        body = style.newline + indent + child(indent, True) + style.newline + outer
    else:
        body = child("", False)
    return Inserted(text[: open_ + 1] + body + text[close:], inner)


def _separator(text: str, spans: list[tuple[int, int]], style: Style) -> str:
    """`,` and the whitespace this one-line container puts between its children."""
    if len(spans) > 1:
        return text[spans[-2][1] : spans[-1][0]]
    return style.comma


def remove_child(text: str, container: Node, index: int, inner: str | None) -> str:
    """`text` without the child `index` of `container`. The only child leaves `inner`
    (the whitespace recorded when it was put in; "" when unknown) inside the container."""
    spans = container.children()
    start, end = spans[index]
    if index > 0:
        return text[: spans[index - 1][1]] + text[end:]
    if len(spans) > 1:
        return text[:start] + text[spans[1][0] :]
    return text[: container.start + 1] + (inner or "") + text[container.end - 1 :]
