"""`.agent/ckpt.toml` read and edited one key at a time, keeping every comment and key.

`git ckpt config set` goes through tomlkit, which keeps the document as
written (comments, order, spacing, quoting) and changes only the value it is
told to. The result is read back with tomllib before it is returned.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from git_agentckpt.errors import NotFound, UsageError
from git_agentckpt.settings import KNOWN_SETTINGS, SETTINGS_PATH, settings_from_doc
from git_agentckpt.triggers import Policy


@dataclass(frozen=True)
class Edited:
    text: str
    kept_comments: bool  # always True with tomlkit; kept for the --json output


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


def get_setting(workdir: str, key: str) -> Any:
    """The value of dotted `key` in the settings file (a policy default when it is absent)."""
    try:
        with open(os.path.join(workdir, SETTINGS_PATH), "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        doc = {}
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{SETTINGS_PATH}: {exc}") from exc
    try:
        return lookup(doc, key)
    except KeyError:
        table, _, name = key.rpartition(".")
        defaults = Policy().to_mapping()
        if table == "policy" and name in defaults:
            return defaults[name]  # not in the file: the default in force
        raise NotFound(
            f"no setting {key!r} in {SETTINGS_PATH}",
            hint="see `man git-ckpt`, section SETTINGS",
        ) from None


def known_keys() -> dict[str, tuple[str, ...]]:
    """Every table the tool reads, with its keys."""
    return {**KNOWN_SETTINGS, "policy": tuple(Policy().to_mapping())}


def check_key(key: str, text: str, add: bool) -> None:
    """Refuse a key the tool does not read: in one of its tables, always (a typo would
    silently do nothing); in a table of the user's own, unless the file has it already
    or `add` (`config set --add`) says it is meant."""
    tables = known_keys()
    table, _, rest = key.partition(".")
    dotted = [f"{t}.{k}" for t, keys in tables.items() for k in keys]
    if table in tables and rest in tables[table]:
        return
    close = difflib.get_close_matches(key, dotted, n=1, cutoff=0.75)
    mean = f"did you mean {close[0]!r}? " if close else ""
    if table in tables:
        raise UsageError(
            f"unknown setting {key!r}: [{table}] has {', '.join(tables[table])}",
            hint=f"{mean}see `man git-ckpt`, section SETTINGS",
        )
    if add and not close:
        return
    try:
        lookup(tomllib.loads(text), key)
        return  # the user's own key, already in the file
    except (KeyError, tomllib.TOMLDecodeError):
        pass
    raise UsageError(
        f"unknown setting {key!r}: git ckpt reads no [{table}] table",
        hint=mean
        + (
            ""
            if close
            else f"to keep a setting of your own, run `git ckpt config set --add {key} ...`"
        ),
    )


def set_setting(workdir: str, key: str, raw: str, add: bool = False) -> Any:
    """Set dotted `key` to `raw` (TOML when it parses, else text); the parsed value.

    Only keys the tool reads are accepted (`check_key`). The edited file is validated
    (settings and policy) before it replaces the old one: a refused value leaves the
    file as it was."""
    if "." not in key or any(not part for part in key.split(".")):
        raise UsageError(
            f"invalid key {key!r}", hint="use TABLE.KEY, e.g. policy.light_every_calls"
        )
    path = os.path.join(workdir, SETTINGS_PATH)
    try:
        with open(path, encoding="utf-8") as fh:
            old = fh.read()
    except FileNotFoundError:
        old = ""
    check_key(key, old, add)
    parsed = parse_value(raw)
    edited = set_key(old, key, parsed)
    try:
        doc = tomllib.loads(edited.text)
        settings_from_doc(doc)
        Policy.from_mapping(doc.get("policy", {}))
    except (ValueError, tomllib.TOMLDecodeError, UsageError) as exc:
        msg = exc.message if isinstance(exc, UsageError) else str(exc)
        raise UsageError(f"{key} = {raw!r} refused: {msg}") from exc
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(edited.text)
    os.replace(tmp, path)
    return parsed
