"""Formatting helpers shared by the commands: JSON (pretty on a terminal) and text."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def emit_json(value: Any) -> None:
    if sys.stdout.isatty():
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    click.echo(text)


def emit_jsonl(values: list[Any]) -> None:
    for value in values:
        click.echo(json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True))


def short(sha: str | None) -> str:
    return sha[:12] if sha else "-"


JSON_ERRORS = "ckpt.json"  # set when the command asked for JSON output: errors as JSON too


def _output_is_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """The command's own `--json` decides the channel of its errors (CkptGroup)."""
    if value:
        ctx.find_root().meta[JSON_ERRORS] = True
    return value


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    callback=_output_is_json,
    help="Print JSON instead of text (errors too: see man git-ckpt, OPTIONS).",
)
