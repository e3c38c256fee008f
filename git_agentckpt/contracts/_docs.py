"""Documents with the line of every key: YAML and JSON loaded into plain data.

`load_document(text, filename)` returns `(root, lines)`: `root` is plain
lists, dicts and scalars (YAML through `SafeLoader`, so no Python objects),
and `lines` maps `id(container)` to `{key or index: line}` for every mapping
and list in it, so that a validator can name the line of a bad key. Syntax
errors, duplicate keys, non-scalar keys, recursive aliases and unsupported
tags raise `DocError(line, message)`.
"""

from __future__ import annotations

import bisect
import datetime
import json
import re

import yaml

__all__ = ["DocError", "Lines", "is_plain_data", "load_document", "show", "type_name"]

Lines = dict[int, dict[object, int]]  # id(container) -> key or index -> line


def type_name(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    names.update({list: "list", dict: "mapping", type(None): "null"})
    return names.get(type(value), type(value).__name__)


def show(value: object) -> str:
    text = repr(value) if isinstance(value, str | int | float | type(None)) else type_name(value)
    return text if len(text) <= 80 else text[:77] + "..."


_SCALARS = (str, int, float, bool, type(None), datetime.date, datetime.time)


def is_plain_data(value: object, depth: int = 0) -> bool:
    """Only lists, dicts with scalar keys and (YAML) scalars, at most 100 levels deep."""
    if depth > 100:
        return False
    if isinstance(value, list):
        return all(is_plain_data(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(key, _SCALARS) and is_plain_data(item, depth + 1)
            for key, item in value.items()
        )
    return isinstance(value, _SCALARS)


def load_document(text: str, filename: str) -> tuple[object, Lines]:
    """Parse `text` as JSON when `filename` ends with `.json`, else as YAML."""
    lines: Lines = {}
    try:
        if filename.endswith(".json"):
            return _load_json(text, lines), lines
        return _load_yaml(text, lines), lines
    except RecursionError:
        raise DocError(None, "nested too deeply") from None


class DocError(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


_MERGE_TAG = "tag:yaml.org,2002:merge"


# libyaml's parser when PyYAML has it (~5x faster; the same nodes and marks)
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _reader_error(text: str, exc: yaml.reader.ReaderError) -> DocError:
    line = text.count("\n", 0, exc.position) + 1
    why = f"unacceptable character #x{exc.character:04x}"
    return DocError(line, f"invalid YAML: {why}")


def _load_yaml(text: str, lines: Lines) -> object:
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    try:
        node = loader.get_single_node()
        return None if node is None else _YamlBuilder(loader, lines).build(node)
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        why = "; ".join(part for part in (exc.context, exc.problem) if part)
        raise DocError(mark.line + 1 if mark else None, f"invalid YAML: {why}") from None
    except yaml.YAMLError as exc:
        raise DocError(None, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


class _YamlBuilder:
    """Nodes -> plain lists/dicts (scalars by SafeLoader), recording key lines."""

    def __init__(self, loader: yaml.SafeLoader, lines: Lines) -> None:
        self.loader, self.lines = loader, lines
        self.done: dict[int, object] = {}
        self.active: set[int] = set()

    def build(self, node: yaml.Node) -> object:
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node, deep=True)
        line = node.start_mark.line + 1
        if id(node) in self.done:
            return self.done[id(node)]
        if id(node) in self.active:
            raise DocError(line, "recursive YAML alias")
        self.active.add(id(node))
        if isinstance(node, yaml.SequenceNode) and node.tag == "tag:yaml.org,2002:seq":
            items = [self.build(item) for item in node.value]
            starts = [item.start_mark.line + 1 for item in node.value]
            self.lines[id(items)] = dict(enumerate(starts))
            result: object = items
        elif isinstance(node, yaml.MappingNode) and node.tag == "tag:yaml.org,2002:map":
            result = self._mapping(node)
        else:
            raise DocError(line, f"unsupported YAML tag {node.tag}")
        self.active.discard(id(node))
        self.done[id(node)] = result
        return result

    def _mapping(self, node: yaml.MappingNode) -> dict[object, object]:
        merged = any(key.tag == _MERGE_TAG for key, _ in node.value)
        if merged:
            self.loader.flatten_mapping(node)  # merged keys first; own keys override
        out: dict[object, object] = {}
        table: dict[object, int] = {}
        for key_node, value_node in node.value:
            key = self.build(key_node)
            line = key_node.start_mark.line + 1
            if isinstance(key, list | dict):
                raise DocError(line, "mapping keys must be scalars")
            if key in out and not merged:
                raise DocError(line, f"duplicate key {show(key)}")
            out[key] = self.build(value_node)
            table[key] = line
        self.lines[id(out)] = table
        return out


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)


def _load_json(text: str, lines: Lines) -> object:
    if not text.strip():
        return None
    try:
        data: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocError(exc.lineno, f"invalid JSON: {exc.msg}") from None
    newlines = [m.start() for m in re.finditer("\n", text)]
    found = _JSON_TOKEN.finditer(text)
    tokens = [(m.group(), bisect.bisect(newlines, m.start()) + 1) for m in found]

    def walk(value: object, i: int) -> int:
        """Skip the value starting at token i; record key lines of its containers."""
        token = tokens[i][0]
        if token not in ("{", "["):
            return i + 1
        table: dict[object, int] = {}
        close = "}" if token == "{" else "]"
        i, index = i + 1, 0
        while tokens[i][0] != close:
            if token == "{":
                key, line = json.loads(tokens[i][0]), tokens[i][1]
                if key in table:
                    raise DocError(line, f"duplicate key {show(key)}")
                table[key] = line
                child = value.get(key) if isinstance(value, dict) else None
                i = walk(child, i + 2)
            else:
                table[index] = tokens[i][1]
                child = value[index] if isinstance(value, list) else None
                i, index = walk(child, i), index + 1
            if tokens[i][0] == ",":
                i += 1
        if isinstance(value, dict | list):
            lines[id(value)] = table
        return i + 1

    walk(data, 0)
    return data
