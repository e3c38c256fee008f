"""Helpers shared by the command modules: opening the facade, reading JSON input."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from git_agentckpt.errors import BadStateError

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer


def open_ckpt(ctx: click.Context) -> Checkpointer:
    from git_agentckpt.api import Checkpointer

    ck = Checkpointer.open(root_path(ctx))
    # CkptGroup.invoke prints what its reads skipped (damaged records) as warnings
    ctx.find_root().meta.setdefault("ckpt.facades", []).append(ck)
    return ck


def root_path(ctx: click.Context) -> str:
    root = ctx.find_root().obj
    return root if isinstance(root, str) else "."


def read_json_arg(value: str | None, what: str, ctx: click.Context | None = None) -> Any:
    """JSON from a literal, a file path (relative to -C), or '-' for stdin."""
    if value is None:
        return None
    if value == "-":
        text = sys.stdin.read()
        source = "stdin"
    elif value.lstrip().startswith(("{", "[", '"')) or value.strip() in ("null", "true", "false"):
        text = value
        source = "the command line"
    else:
        path = os.path.join(root_path(ctx), value) if ctx is not None else value
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise BadStateError(f"cannot read {what} file {value!r}: {exc.strerror}") from exc
        source = value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadStateError(
            f"{what} from {source} is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}"
        ) from exc


def parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--param")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out
