"""`git ckpt metrics`: recovery quality per resume and per task (git_agentckpt/metrics/)."""

from __future__ import annotations

import os
from typing import Any

import click

from git_agentckpt.cli.common import open_ckpt
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option, short
from git_agentckpt.display import escape_control


@cli.command()
@click.argument("tasks", nargs=-1)
@click.option("--all", "all_tasks", is_flag=True, help="Every task (the default with no TASK).")
@click.option(
    "--window",
    type=int,
    default=10,
    show_default=True,
    help="Steps counted after each resume and before its interruption.",
)
@json_option
@click.pass_context
def metrics(
    ctx: click.Context, tasks: tuple[str, ...], all_tasks: bool, window: int, as_json: bool
) -> None:
    """Recovery quality of TASKs: violations after each resume against before it, redone
    work, time and tokens to get going, restatement outcome, drift alarms."""
    if all_tasks and tasks:
        raise click.UsageError("give TASK names or --all, not both")
    names = list(tasks)
    if not names and not all_tasks and os.environ.get("GIT_CKPT_TASK"):
        names = [os.environ["GIT_CKPT_TASK"]]
    data = open_ckpt(ctx).metrics(names, window)
    if as_json:
        emit_json(data)
        return
    for row in data["tasks"]:
        _task(row)
    t = data["totals"]
    click.echo(
        f"all {t['tasks']} task(s): {t['resumes']} resume(s), violations {t['violations_after']} "
        f"after / {t['violations_before']} before, redone {t['redone_done']} done + "
        f"{t['redone_rolled_back']} rolled back + {t['redone_unfinished']} unfinished step(s), "
        f"{t['files_rewritten']} file(s) rewritten, {t['tool_calls_repeated']} repeated tool "
        f"call(s), {t['drift_alarms']} drift alarm(s) (read in {data['elapsed_ms']} ms)"
    )


def _text(value: Any) -> str:
    return escape_control(str(value))


def _task(row: dict[str, Any]) -> None:
    steps, t = row["steps"], row["totals"]
    ratio = f"ratio {steps['ratio']}" if steps["ratio"] is not None else "no step started"
    click.echo(
        f"task {_text(row['task'])}: {t['resumes']} resume(s), {steps['executions']} step "
        f"execution(s) of {steps['distinct']} step(s) ({ratio}), {row['events']} events"
    )
    for r in row["resumes"]:
        _resume(r)
    secs = t["seconds_to_confirm"]
    click.echo(
        f"  totals: violations {t['violations_after']} after / {t['violations_before']} before; "
        f"confirmed {t['confirmed_first_try']} first try, {t['confirmed_after_retries']} after "
        f"retries, {t['confirmed_by_person']} by a person, {t['not_confirmed']} not; "
        f"time to confirm {secs if secs is not None else '-'} s; tokens to first step "
        f"{t['tokens_to_first_step'] if t['tokens_to_first_step'] is not None else '-'}"
    )


def _resume(r: dict[str, Any]) -> None:
    cut = r["interruption"]
    v, red, go, w = r["violations"], r["redone"], r["getting_going"], r["window"]
    click.echo(
        f"  resume {r['report']} (from {short(r['from_checkpoint'])}, "
        f"{r['attempts']} attempt(s), {r['outcome']})"
    )
    if cut:
        kind = "stop signal" if cut["stop_signal"] else "last event"
        click.echo(f"    interrupted: #{cut['seq']} {_text(cut['type'])} at {cut['ts']} ({kind})")
    where = ", ".join(
        f"{_text(x['constraint'])} at step {x['step_index']} ({_text(x['step'])})"
        for x in v["after_items"]
    )
    click.echo(
        f"    violations: {v['after']} after ({v['checks_after']} check(s)), {v['before']} "
        f"before ({v['checks_before']} check(s))" + (f"; after: {where}" if where else "")
    )
    steps = ", ".join(
        f"{_text(s['step'])} {s['kind']}" + (" (expected)" if s["expected"] else " (NOT expected)")
        for s in red["steps"]
    )
    files = ", ".join(f"{_text(f['path'])} ({f['how']})" for f in red["files"])
    calls = ", ".join(f"#{c['seq']} = #{c['same_as_seq']}" for c in red["tool_calls"])
    click.echo(f"    redone steps: {steps or 'none'}")
    click.echo(f"    files rewritten to the resume point's content: {files or 'none'}")
    click.echo(f"    repeated tool calls: {calls or 'none'}")
    tokens = go["tokens_to_first_step"]
    click.echo(
        f"    getting going: {_secs(go['seconds_to_confirm'])} to confirm, "
        f"{_secs(go['seconds_to_first_step'])} to the first step "
        f"({_text(go['first_step'] or '-')}), "
        + (f"{tokens} tokens ({go['tokens_source']})" if tokens is not None else "tokens -")
    )
    said = r["restatement"]
    how = {
        "first_try": "confirmed first try",
        "after_retries": "confirmed after retries",
        "by_person": "confirmed by a person",
    }.get(said["outcome"], "not confirmed")
    click.echo(f"    restatement: {how} (tries: {said['tries']})")
    alarms = "; ".join(
        f"{_text(a['signal'])} {_text(a['subject'] or '')}: "
        + (
            f"passed after {_secs(a['seconds_to_pass'])} ({a['steps_to_pass']} steps)"
            if a["passed_seq"] is not None
            else "no passing check since"
        )
        for a in r["drift"]["items"]
    )
    click.echo(f"    drift alarms: {r['drift']['alarms']}" + (f" ({alarms})" if alarms else ""))
    state = f"passed ({w['closed_by']})" if w["passed"] else "open"
    click.echo(
        f"    window: {w['steps_after']}/{w['size']} steps after, {w['steps_before']} before; "
        f"{state}; recorded: {'yes' if r['recorded'] else 'no'}"
    )
    click.echo(f"    verdict: {_text(r['verdict_line'])}")


def _secs(value: Any) -> str:
    return f"{value:g} s" if isinstance(value, int | float) else "-"
