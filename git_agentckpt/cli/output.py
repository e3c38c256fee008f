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


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
