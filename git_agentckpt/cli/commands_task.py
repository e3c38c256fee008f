"""Commands about task state and steps: task start|show|list, step start|done|fail."""

from __future__ import annotations

from typing import Any

import click

from git_agentckpt.cli.commands_ckpt import build_run, run_options
from git_agentckpt.cli.common import open_ckpt, open_reader, read_json_arg
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option


@cli.group()
def task() -> None:
    """Start, show and list tasks."""


def _parse_step(value: str) -> tuple[str, str]:
    sid, sep, title = value.partition(":")
    if not sid:
        raise click.BadParameter(f"{value!r} is not ID:TITLE", param_hint="--step")
    return sid, (title if sep else sid)


@task.command(name="start")
@click.argument("name")
@click.option("--goal", required=True, help="What the task must achieve.")
@click.option(
    "--step", "steps", multiple=True, metavar="ID:TITLE", help="A step (repeatable, in order)."
)
@click.option(
    "--constraint",
    "constraints",
    multiple=True,
    metavar="ID",
    help="A constraint id in force (repeatable).",
)
@run_options
@json_option
@click.pass_context
def task_start(
    ctx: click.Context,
    /,
    name: str,
    goal: str,
    steps: tuple[str, ...],
    constraints: tuple[str, ...],
    as_json: bool,
    **kw: Any,
) -> None:
    """Create task NAME and take its first (baseline) checkpoint."""
    run = build_run(kw)
    made = open_ckpt(ctx).task_start(
        name, goal, [_parse_step(s) for s in steps], list(constraints), run=run
    )
    if as_json:
        emit_json(made.to_json())
    else:
        click.echo(f"started task {name}: checkpoint {made.id}")


@task.command(name="show")
@click.argument("name")
@json_option
@click.pass_context
def task_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show the current state of task NAME (latest checkpoint + later events)."""
    ck = open_reader(ctx)
    state = ck.state(name)
    for claim in ck.suspect_claims(name):
        ck.warnings.append(f"task {name}: suspect state: {claim.one_line()}")
    in_force = ck.constraints_in_force(name)
    if as_json:
        emit_json({**state, "constraints_in_force": in_force})
        return
    click.echo(f"task     {state['task']}  ({state['status']})")
    click.echo(f"goal     {state.get('goal', '')}")
    click.echo(f"current  {state.get('current_step') or '-'}")
    for s in state.get("steps", []):
        click.echo(f"  [{s['status']:11}] {s['id']}: {s['title']}")
    if in_force:
        click.echo("constraints in force: " + ", ".join(in_force))
    usage = state.get("usage") or {}
    if usage:
        click.echo("usage    " + ", ".join(f"{k}={v}" for k, v in sorted(usage.items())))
    summary = (state.get("summary") or {}).get("text")
    if summary:
        click.echo(f"summary  (not authoritative) {summary}")


@task.command(name="list")
@json_option
@click.pass_context
def task_list(ctx: click.Context, as_json: bool) -> None:
    """List tasks with their status and current step."""
    rows = open_reader(ctx).task_summaries()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(f"{r['task']:20} {r['status']:10} {r['done']}/{r['steps']} steps  {r['goal']}")


@cli.group()
def step() -> None:
    """Move a step: start, done (commits a full checkpoint), fail."""


@step.command(name="start")
@click.argument("task")
@click.argument("step_id")
@click.option("--force", is_flag=True, help="Start even while the task is recovering.")
@click.option("--redo", is_flag=True, help="Start a done or skipped step again (logged).")
@click.option(
    "--risk",
    type=click.Choice(["low", "medium", "high"]),
    help="Risk of the step; high takes a full pre_expensive_step checkpoint first.",
)
@json_option
@click.pass_context
def step_start(
    ctx: click.Context, /, task: str, step_id: str, as_json: bool, **kw: Any
) -> None:
    """Mark STEP_ID of TASK in progress: a pending step starts, an in-progress one
    restarts, a failed one is retried, a done or skipped one is redone with --redo."""
    ck = open_ckpt(ctx)
    ck.require_task(task)  # a name nobody started: "did you mean"
    ev = ck.step_start(task, step_id, force=kw["force"], risk=kw["risk"], redo=kw["redo"])
    if as_json:
        emit_json(ev.to_json())
    else:
        click.echo(f"step {step_id}: {ev.data.get('mode')} (event #{ev.seq})")


@step.command(name="done")
@click.argument("task")
@click.argument("step_id")
@click.option("--output", "output", metavar="JSON|FILE|-", help="The step's outputs (JSON).")
@run_options
@json_option
@click.pass_context
def step_done(
    ctx: click.Context, /, task: str, step_id: str, output: str | None, as_json: bool, **kw: Any
) -> None:
    """Mark STEP_ID done: log step.end, then commit the full checkpoint that makes it so."""
    run = build_run(kw)
    ck = open_ckpt(ctx)
    ck.require_task(task)
    made = ck.step_done(task, step_id, read_json_arg(output, "--output", ctx), run=run)
    if as_json:
        emit_json(made.to_json())
    else:
        click.echo(f"step {step_id} done: checkpoint {made.id}")


@step.command(name="fail")
@click.argument("task")
@click.argument("step_id")
@click.option("--output", "output", metavar="JSON|FILE|-", help="What happened (JSON).")
@json_option
@click.pass_context
def step_fail(
    ctx: click.Context, task: str, step_id: str, output: str | None, as_json: bool
) -> None:
    """Mark STEP_ID failed (it may be retried with `step start`)."""
    ck = open_ckpt(ctx)
    ck.require_task(task)
    ev = ck.step_fail(task, step_id, read_json_arg(output, "--output", ctx))
    if as_json:
        emit_json(ev.to_json())
    else:
        click.echo(f"step {step_id} failed (event #{ev.seq})")
