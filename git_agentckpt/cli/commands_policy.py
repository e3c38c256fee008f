"""Commands of the checkpoint policy: tick, config get|set."""

from __future__ import annotations

import json
import os
import time
import tomllib
from typing import Any

import click

from git_agentckpt.cli.common import open_ckpt
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import NotFound, UsageError

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
    from git_agentckpt.tick import tick as run_tick
    from git_agentckpt.triggers import Signals

    fields = {k: v for k, v in given.items() if v is not None and v is not False}
    explicit = set(fields)
    fields.setdefault("now", time.time())
    try:
        signals = Signals(**fields)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    result = run_tick(open_ckpt(ctx), task, signals, explicit)
    if as_json:
        emit_json(result.to_json())
        return
    d = result.decision
    made = f": checkpoint {result.checkpoint.id}" if result.checkpoint else ""
    click.echo(f"{d.tier} ({d.rule}){made}")
    for reason in d.reasons:
        click.echo(f"  {reason}")


@cli.group()
def config() -> None:
    """Read and write settings in .agent/ckpt.toml (comments are kept)."""


def _settings_path(ctx: click.Context) -> tuple[Any, str]:
    from git_agentckpt.settings import SETTINGS_PATH

    ck = open_ckpt(ctx)
    return ck, os.path.join(ck.repo.workdir, SETTINGS_PATH)


@config.command(name="get")
@click.argument("key")
@json_option
@click.pass_context
def config_get(ctx: click.Context, key: str, as_json: bool) -> None:
    """Print the value of KEY (dotted, e.g. policy.light_every_calls)."""
    from git_agentckpt.config_edit import lookup
    from git_agentckpt.triggers import Policy

    _, path = _settings_path(ctx)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        doc = {}
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f".agent/ckpt.toml: {exc}") from exc
    try:
        value = lookup(doc, key)
    except KeyError:
        table, _, name = key.rpartition(".")
        defaults = Policy().to_mapping()
        if table == "policy" and name in defaults:
            value = defaults[name]  # not in the file: the default in force
        else:
            raise NotFound(
                f"no setting {key!r} in .agent/ckpt.toml",
                hint="see `man git-ckpt`, section SETTINGS",
            ) from None
    if as_json:
        emit_json({"key": key, "value": value})
    else:
        click.echo(value if isinstance(value, str) else json.dumps(value))


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@json_option
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str, as_json: bool) -> None:
    """Set KEY to VALUE (TOML: 10, 0.5, true, [0.8, 0.95], or text), keeping comments."""
    from git_agentckpt.config_edit import parse_value, set_key
    from git_agentckpt.settings import settings_from_doc
    from git_agentckpt.tick import load_policy

    if "." not in key or any(not part for part in key.split(".")):
        raise UsageError(
            f"invalid key {key!r}", hint="use TABLE.KEY, e.g. policy.light_every_calls"
        )
    ck, path = _settings_path(ctx)
    try:
        with open(path, encoding="utf-8") as fh:
            old = fh.read()
    except FileNotFoundError:
        old = ""
    parsed = parse_value(value)
    edited = set_key(old, key, parsed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(edited.text)
    # validate the result before it replaces the file
    from git_agentckpt.triggers import Policy

    try:
        doc = tomllib.loads(edited.text)
        settings_from_doc(doc)
        Policy.from_mapping(doc.get("policy", {}))
    except (ValueError, tomllib.TOMLDecodeError, UsageError) as exc:
        os.unlink(tmp)
        msg = exc.message if isinstance(exc, UsageError) else str(exc)
        raise UsageError(f"{key} = {value!r} refused: {msg}") from exc
    os.replace(tmp, path)
    ck._settings = None
    load_policy(ck)
    if as_json:
        emit_json({"key": key, "value": parsed, "kept_comments": edited.kept_comments})
    else:
        click.echo(f"{key} = {json.dumps(parsed)}")
