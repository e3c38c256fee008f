"""Helpers shared by the command modules: opening the facade, reading JSON input."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from git_agentckpt.errors import BadStateError, shorten

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer


def open_ckpt(ctx: click.Context) -> Checkpointer:
    from git_agentckpt.api import Checkpointer

    ck = Checkpointer.open(root_path(ctx))
    # CkptGroup.invoke prints what its reads skipped (damaged records) as warnings
    ctx.find_root().meta.setdefault("ckpt.facades", []).append(ck)
    return ck


def open_reader(ctx: click.Context) -> Checkpointer:
    """`open_ckpt` for a command that only reads: a bare repository is fine (a trail is
    audited where it is stored, on the server)."""
    from git_agentckpt.api import Checkpointer

    ck = Checkpointer.open(root_path(ctx), for_reading=True)
    ctx.find_root().meta.setdefault("ckpt.facades", []).append(ck)
    return ck


def root_path(ctx: click.Context) -> str:
    root = ctx.find_root().obj
    return root if isinstance(root, str) else "."


# Deeper input is refused: the state, the redactor and the readers of the log all recurse,
# and a record nested a few hundred levels deep would stop them (RecursionError).
MAX_DEPTH = 100


def read_input_text(value: str, what: str, ctx: click.Context | None = None) -> tuple[str, str]:
    """(text, where it came from) of a file (relative to -C) or '-' (stdin), as UTF-8."""
    if value == "-":
        data = sys.stdin.buffer.read()
        source = "stdin"
    else:
        path = os.path.join(root_path(ctx), value) if ctx is not None else value
        source = shorten(value)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise BadStateError(f"cannot read {what} file {source!r}: {exc.strerror}") from exc
    return decode_utf8(data, f"{what} from {source}"), source


def decode_utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadStateError(
            f"{what} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="convert it to UTF-8 (e.g. with iconv)",
        ) from exc


def read_json_arg(value: str | None, what: str, ctx: click.Context | None = None) -> Any:
    """JSON from a literal, a file path (relative to -C), or '-' for stdin."""
    if value is None:
        return None
    if value != "-" and (
        value.lstrip().startswith(("{", "[", '"')) or value.strip() in ("null", "true", "false")
    ):
        text, source = value, "the command line"
    else:
        text, source = read_input_text(value, what, ctx)
    return parse_json(text, f"{what} from {source}")


def parse_json(text: str, what: str) -> Any:
    """`text` as JSON: invalid, too deeply nested or non-UTF-8 input is a BadStateError."""
    check_utf8(text, what)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadStateError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise BadStateError(f"{what} is nested too deeply (at most {MAX_DEPTH} levels)") from exc
    if nesting(value, what) > MAX_DEPTH:
        raise BadStateError(f"{what} is nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def check_utf8(text: str, what: str) -> None:
    """Python decodes bytes of argv that are not UTF-8 as lone surrogates: refuse them."""
    if any("\udc80" <= ch <= "\udcff" for ch in text):
        raise BadStateError(f"{what} is not valid UTF-8", hint="convert it to UTF-8")


def nesting(value: Any, what: str) -> int:
    """How many arrays and objects deep `value` goes (without recursion); a string that
    holds a lone surrogate (JSON's "\\udcff" escapes) cannot be stored as UTF-8: refused."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_surrogates(item, what)
        elif isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((k, depth) for k in item)
            stack.extend((x, depth + 1) for x in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth + 1)
            stack.extend((x, depth + 1) for x in item)
    return deepest


def _check_surrogates(text: str, what: str) -> None:
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        raise BadStateError(
            f"{what} holds text that is not valid Unicode (a lone surrogate such as \\udcff)",
            hint="pass UTF-8 text",
        )


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--param")
        check_utf8(item, "--param")
        try:
            out[key] = parse_json(raw, f"--param {key}")
        except BadStateError as exc:
            if not isinstance(exc.__cause__, json.JSONDecodeError):
                raise  # nested too deeply
            out[key] = raw  # not JSON: the text itself
    return out
