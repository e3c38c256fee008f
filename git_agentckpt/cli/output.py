"""Formatting helpers shared by the commands: JSON (pretty on a terminal) and text."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import click

from git_agentckpt.display import TerminalText
from git_agentckpt.paths import TEXT_ERRORS, json_safe


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and hasattr(stream, "buffer")
    except (AttributeError, ValueError):
        return False


def guard_streams() -> None:
    """stdout and stderr write a file name's raw byte as git's `\\ooo`, never fail on it,
    and show control characters as escapes on a terminal (`TerminalText`).

    Paths are quoted where they are printed (`paths.quote`); this is the floor under
    every other text that may hold one (a check's detail, an event's data, an error).
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=TEXT_ERRORS)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, TerminalText) and _on_terminal(stream):
            setattr(sys, name, TerminalText(stream))


def emit_json(value: Any) -> None:
    """One JSON document; file names that are not UTF-8 in their quoted form (`paths`)."""
    value = json_safe(value)
    if sys.stdout.isatty():
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    click.echo(text)


def emit_jsonl(values: list[Any]) -> None:
    for value in json_safe(values):
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
