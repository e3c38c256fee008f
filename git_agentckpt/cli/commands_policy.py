"""Commands of the checkpoint policy: tick, config get|set."""

from __future__ import annotations

import json
from typing import Any

import click

from git_agentckpt.cli.common import open_ckpt
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option

_INT = click.IntRange(min=0)
_FLOAT = click.FloatRange(min=0)
SIGNAL_OPTIONS: list[tuple[str, Any, str]] = [
    ("now", float, "Unix time of the tick (default: now)."),
    ("calls-since", _INT, "Tool calls since the last checkpoint (default: counted from the log)."),
    ("steps-since", _INT, "Finished steps since the last full checkpoint."),
    ("tokens-used", _INT, "Tokens used so far."),
    ("token-budget", click.IntRange(min=1), "Token budget of the task."),
    ("calls-used", _INT, "Model calls so far."),
    ("calls-budget", click.IntRange(min=1), "Model-call budget of the task."),
    ("rate-limit-remaining", _INT, "Remaining requests (or tokens) as the API reports it."),
    ("rate-limit-reset", _FLOAT, "Seconds until the rate limit resets."),
    ("next-step-cost", _FLOAT, "Estimated tokens of the next step."),
    ("next-step-calls", _INT, "Estimated tool calls of the next step."),
    ("next-step-seconds", _FLOAT, "Estimated duration of the next step (for the 5% rule)."),
]


def signal_options(f: Any) -> Any:
    for name, typ, text in reversed(SIGNAL_OPTIONS):
        f = click.option(f"--{name}", type=typ, help=text)(f)
    f = click.option(
        "--next-step-risk",
        type=click.Choice(["low", "medium", "high"]),
        help="Risk of the next step.",
    )(f)
    f = click.option(
        "--rate-limit-unit",
        type=click.Choice(["requests", "tokens"]),
        help="What --rate-limit-remaining counts (default requests).",
    )(f)
    f = click.option(
        "--step-boundary",
        "at_step_boundary",
        is_flag=True,
        help="The harness is between two steps.",
    )(f)
    return f


@cli.command()
@click.argument("task", required=False)
@signal_options
@json_option
@click.pass_context
def tick(ctx: click.Context, /, task: str | None, as_json: bool, **given: Any) -> None:
    """Decide none, light or full from the signals, take it, and log why."""
    fields = {k: v for k, v in given.items() if v is not None and v is not False}
    result = open_ckpt(ctx).tick(task, **fields)
    if as_json:
        emit_json(result.to_json())
        return
    d = result.decision
    made = f": checkpoint {result.checkpoint.id}" if result.checkpoint else ""
    rule = f"{d.rule}, demoted from {d.demoted_from}" if d.demoted_from else d.rule
    click.echo(f"{d.tier} ({rule}){made}")
    for reason in d.reasons:
        click.echo(f"  {reason}")


@cli.group()
def config() -> None:
    """Read and write settings in .agent/ckpt.toml (comments are kept)."""


@config.command(name="get")
@click.argument("key")
@json_option
@click.pass_context
def config_get(ctx: click.Context, key: str, as_json: bool) -> None:
    """Print the value of KEY (dotted, e.g. policy.light_every_calls)."""
    value = open_ckpt(ctx).config_get(key)
    if as_json:
        emit_json({"key": key, "value": value})
    else:
        click.echo(value if isinstance(value, str) else json.dumps(value))


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@click.option(
    "--add", is_flag=True, help="Create KEY in a table of your own (git ckpt does not read it)."
)
@json_option
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str, add: bool, as_json: bool) -> None:
    """Set KEY to VALUE (TOML: 10, 0.5, true, [0.8, 0.95], or text), keeping comments.

    Only the keys git ckpt reads are accepted (see `man git-ckpt`, SETTINGS);
    --add creates a key of your own in a table git ckpt does not use."""
    parsed = open_ckpt(ctx).config_set(key, value, add)
    if as_json:
        emit_json({"key": key, "value": parsed, "kept_comments": True})
    else:
        click.echo(f"{key} = {json.dumps(parsed)}")
