"""Commands of the resume flow: resume, confirm, report, demo."""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from git_agentckpt.cli.common import open_ckpt, open_reader, read_input_text
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.display import escape_control


@cli.command()
@click.argument("task")
@click.option("--from", "from_checkpoint", metavar="CKPT", help="Resume from this checkpoint.")
@click.option(
    "--restore", is_flag=True, help="Bring drifted source files back (safety checkpoint first)."
)
@click.option(
    "--accept-drift", is_flag=True, help="Keep drifted files: record them in a new checkpoint."
)
@click.option(
    "--no-rollback", is_flag=True, help="Stop instead of rolling back when assertions fail."
)
@click.option(
    "--brief-only", is_flag=True, help="Print a brief of the current state; change nothing."
)
@click.option(
    "--brief-format",
    type=click.Choice(["md", "json"]),
    default="md",
    show_default=True,
    help="Format of the recovery brief in text output.",
)
@click.option(
    "--max-brief-tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help="Trim events, outputs and environment to fit; constraints are never cut.",
)
@json_option
@click.pass_context
def resume(
    ctx: click.Context,
    task: str,
    from_checkpoint: str | None,
    restore: bool,
    accept_drift: bool,
    no_rollback: bool,
    brief_only: bool,
    brief_format: str,
    max_brief_tokens: int | None,
    as_json: bool,
) -> None:
    """Reconstruct TASK in five steps: locate, verify, assertions, brief, confirm."""
    ck = open_ckpt(ctx)
    out = ck.resume(
        task,
        from_checkpoint=from_checkpoint,
        restore=restore,
        accept_drift=accept_drift,
        no_rollback=no_rollback,
        brief_only=brief_only,
        max_brief_tokens=max_brief_tokens,
    )
    if as_json:
        emit_json(out.to_json())
    else:
        if out.outcome != "brief":
            _print_steps(out.report, ck.quote_path)
            click.echo(("ok: " if out.exit == 0 else "stopped: ") + out.message, err=out.exit != 0)
        if out.brief is not None:
            click.echo(out.brief.render(brief_format))
    ctx.exit(int(out.exit))


def _print_steps(report: dict[str, object], quote: Callable[[str], str]) -> None:
    locate = report.get("locate")
    if isinstance(locate, dict):
        start = locate.get("start") or {}
        sid = start.get("id") if isinstance(start, dict) else None
        click.echo(f"1 locate     start {sid}: {locate.get('reason')}")
        for c in locate.get("rolled_forward") or []:
            click.echo(
                f"             rolled forward checkpoint {str(c)[:12]} "
                "(ref moved, commit event missing)"
            )
        for c in locate.get("aborted_checkpoints") or []:
            click.echo(f"             aborted checkpoint {str(c)[:12]} (prepared, never committed)")
        for c in locate.get("committed_elsewhere") or []:
            click.echo(
                f"             checkpoint {str(c)[:12]} is another clone's (not in this chain)"
            )
    verify = report.get("verify")
    if isinstance(verify, dict):
        src = verify.get("source_drift") or []
        decision = verify.get("decision")
        click.echo(
            "2 verify     "
            + ("clean" if verify.get("clean") else f"{len(src)} source file(s) drifted")
            + (f", {decision}" if decision else "")
        )
        for d in src:
            if isinstance(d, dict):
                click.echo(f"             {d.get('change'):8} {quote(str(d.get('path')))}")
        for f in verify.get("files") or []:
            if isinstance(f, dict):
                path = quote(str(f.get("path")))
                click.echo(f"             {f.get('action'):12} {path} ({f.get('why')})")
        safety = verify.get("safety_checkpoint")
        if isinstance(safety, dict):
            click.echo(f"             safety checkpoint {safety.get('id')} undoes it")
    assertions = report.get("assertions")
    if isinstance(assertions, dict):
        results = assertions.get("results") or []
        click.echo(f"3 assertions {len(results)} checked, passed={assertions.get('passed')}")
        for r in results:
            if isinstance(r, dict) and r.get("status") != "pass":
                click.echo(f"             {r.get('status'):9} {r.get('id')}: {r.get('detail')}")
        rollback = assertions.get("rollback")
        if isinstance(rollback, dict):
            tried = rollback.get("tried") or []
            target = rollback.get("target")
            tid = target.get("id") if isinstance(target, dict) else None
            click.echo(f"             rollback: {len(tried)} candidate(s) tried, target {tid}")
    constraints = report.get("constraints")
    if isinstance(constraints, dict):
        failing = [
            c
            for c in constraints.get("constraints") or []
            if isinstance(c, dict) and c.get("status") in ("fail", "error")
        ]
        click.echo(f"  constraints {len(failing)} failing")
        for c in failing:
            click.echo(f"             {c.get('severity'):5} {c.get('id')}: {c.get('detail')}")
    if report.get("brief") is not None:
        click.echo("4 brief      below")
        click.echo("5 confirm    task is recovering until `git ckpt confirm` accepts a restatement")


@cli.command()
@click.argument("task")
@click.option(
    "--restatement", metavar="FILE|-", help="The agent's restatement (file, or - for stdin)."
)
@click.option(
    "--by-human",
    is_flag=True,
    help="A person approves instead of the check (asked at a terminal; refused without one).",
)
@json_option
@click.pass_context
def confirm(
    ctx: click.Context, task: str, restatement: str | None, by_human: bool, as_json: bool
) -> None:
    """Check the agent's restatement of goal, constraints and next step; leave recovering."""
    text = None
    if restatement is not None:
        text, _ = read_input_text(restatement, "restatement", ctx)
    status, verdict, result = open_ckpt(ctx).confirm(task, text, by_human, ask=_ask_person)
    if as_json:
        emit_json({**result, "exit": int(status), "task": task})
    elif verdict.passed:
        click.echo(
            f"confirmed: task {task} is active again; "
            f"next step {verdict.expected_next_step or 'none'}"
        )
    else:
        click.echo(f"not confirmed: task {task} stays recovering", err=True)
        for p in verdict.problems:
            click.echo(f"  - {p}", err=True)
    ctx.exit(int(status))


def _ask_person(subject: dict[str, object]) -> bool:
    """Show the person what they approve (on stderr: stdout stays for --json), ask, default no."""
    say = functools.partial(click.echo, err=True)
    say(f"Task {subject['task']} is recovering. You approve, instead of the restatement check:")
    say(f"  goal:       {escape_control(str(subject['goal']))}")
    constraints = subject.get("constraints") or []
    assert isinstance(constraints, list)
    for c in constraints:
        say(f"  constraint: [{c['id']}] ({c['severity']}) {escape_control(str(c['text']))}")
    if not constraints:
        say("  constraints: none in force")
    done = subject.get("done_steps") or []
    assert isinstance(done, list)
    say(f"  done:       {', '.join(map(str, done)) or 'none'} (not to be redone)")
    say(f"  next step:  {subject.get('next_step') or 'none'}")
    return click.confirm(
        "Does the agent continue with this goal, these constraints and this next step?",
        default=False,
        err=True,
    )


@cli.command()
@click.argument("task")
@click.argument("report_id", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the reports of TASK.")
@json_option
@click.pass_context
def report(
    ctx: click.Context, task: str, report_id: str | None, list_only: bool, as_json: bool
) -> None:
    """List TASK's recovery reports, or show one (default: the newest)."""
    ck = open_reader(ctx)
    if list_only:
        rows = ck.reports(task)
        if as_json:
            emit_json(rows)
        else:
            for r in rows:
                click.echo(
                    f"{r['id']}  {r['started']}  {r['outcome']:18} start={r['start']} "
                    f"confirmed={r['verdict']}"
                )
        return
    data = ck.report(task, report_id)
    markdown = data.pop("markdown")
    if as_json:
        emit_json(data)
    else:
        click.echo(markdown)
        click.echo(f"stored at {data['path']}")


@cli.command()
@click.argument("directory", required=False)
@click.option("--keep", is_flag=True, help="Keep the demo repository (default when DIR is given).")
def demo(directory: str | None, keep: bool) -> None:
    """Run a scripted research task in a throwaway repository: interrupt, drift, resume."""
    from git_agentckpt.api import demo as run_demo

    run_demo(directory, keep=keep or directory is not None, echo=click.echo)
