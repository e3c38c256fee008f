"""Edit one key of a TOML file in place, keeping every comment and key it does not touch.

`git ckpt config set` goes through tomlkit, which keeps the document as
written (comments, order, spacing, quoting) and changes only the value it is
told to. The result is read back with tomllib before it is returned.
`render_value` (tomli-w) renders values for the settings template `init`
writes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

import tomli_w
import tomlkit
from tomlkit.exceptions import TOMLKitError

from git_agentckpt.errors import UsageError


@dataclass(frozen=True)
class Edited:
    text: str
    kept_comments: bool  # always True with tomlkit; kept for the --json output


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


def set_key(text: str, dotted: str, value: Any) -> Edited:
    """`text` with the key `TABLE.KEY` (any depth) set to `value`; tables are created."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UsageError(f"the settings file is not valid TOML: {exc}") from exc
    *tables, key = dotted.split(".")
    node: Any = doc
    for part in tables:
        child = node.get(part)
        if child is None:
            child = tomlkit.table()
            node[part] = child
        elif not isinstance(child, dict):
            raise UsageError(f"cannot set {dotted}: {part} is a value, not a table")
        node = child
    node[key] = value
    out = tomlkit.dumps(doc)
    check = lookup(tomllib.loads(out), dotted)
    if check != value:  # tomlkit and tomllib disagree: never write what reads back wrong
        raise UsageError(f"cannot set {dotted} to {value!r} in TOML")
    return Edited(out, kept_comments=True)


def parse_value(raw: str) -> Any:
    """A command-line value: TOML when it parses (10, 0.5, true, [0.8, 0.95], "x"), else text."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
