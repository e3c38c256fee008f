"""Commands on the contract: check (run every constraint now) and trust (approve commands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from git_agentckpt.cli.common import open_ckpt
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option, short
from git_agentckpt.display import escape_control, escape_for_display
from git_agentckpt.errors import UsageError

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer
    from git_agentckpt.model import JSON


def _stdin_is_terminal() -> bool:
    """Whether a person can answer (one seam for trust and confirm: recovery/person.py)."""
    from git_agentckpt.api import person_present

    return person_present()


def _shown(text: str) -> str:
    return escape_control(text)


@cli.command()
@click.argument("task", required=False)
@click.option(
    "-t", "--task", "task_opt", help="Task name (default: $GIT_CKPT_TASK, the single active task)."
)
@click.option(
    "--rebaseline",
    is_flag=True,
    help="First accept the current content of the watched (unsnapshotted) files, "
    "after showing them to a person at a terminal; logged as constraint.rebaseline.",
)
@json_option
@click.pass_context
def check(
    ctx: click.Context, task: str | None, task_opt: str | None, rebaseline: bool, as_json: bool
) -> None:
    """Run every constraint of .agent/contracts now; exit 1 on a block violation.

    Logs constraint.check, one constraint.violation per failure and any
    drift.suspected to the task's log (nothing is logged without a task).
    """
    if task and task_opt and task != task_opt:
        raise UsageError(f"two different tasks: {task!r} and {task_opt!r}")
    ck = open_ckpt(ctx)
    accepted = _rebaseline(ck, task or task_opt, as_json) if rebaseline else None
    outcome = ck.check(task or task_opt)
    if as_json:
        doc = outcome.to_json()
        if rebaseline:
            doc["rebaseline"] = accepted
        emit_json(doc)
        ctx.exit(outcome.exit_status)
    report = outcome.report
    for r in report.results:
        click.echo(f"{r.status:9}  {r.severity:5}  {r.id}: {_shown(r.text)}")
        click.echo(f"{'':18}{r.detail}")
    counts = report.counts
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    where = report.contract or "no contract file (.agent/contracts/constraints.yaml)"
    click.echo(f"check: {summary or 'no constraints'} ({where})")
    base = f"against {short(outcome.baseline)}" if outcome.baseline else "against an empty tree"
    logged = f"logged to task {outcome.task}" if outcome.task else "no task: not logged"
    click.echo(f"{outcome.changed} changed file(s) {base}; {logged}")
    if report.blocking_failures:
        click.echo("blocking: " + ", ".join(report.blocking_failures))
    for signal in outcome.drift:
        click.echo(f"drift suspected ({signal.signal}): {_shown(signal.details)}")
    if outcome.recommendation:
        click.echo(f"recommended: {outcome.recommendation}")
    ctx.exit(outcome.exit_status)


def _rebaseline(ck: Checkpointer, task: str | None, as_json: bool) -> dict[str, JSON]:
    """Show what changed in the watched files and, if a person at a terminal says yes,
    accept it. Prompts go to stderr with --json (stdout holds one JSON document)."""
    t, shown = ck.pending_rebaseline(task)
    if not shown:
        click.echo("rebaseline: the watched files match the record: nothing to accept", err=as_json)
        return {"task": t.name, "accepted": None, "event": None}
    paths = [(p, what) for what, ps in shown.to_json().items() for p in ps]
    if not _stdin_is_terminal():
        raise UsageError(
            f"{len(paths)} watched file(s) changed, and only a person at a terminal can "
            "accept them: stdin is not a terminal",
            hint=f"run `git ckpt check --rebaseline {t.name}` in a terminal",
        )
    click.echo(f"watched files of task {t.name} that no snapshot holds:", err=as_json)
    for path, what in paths:
        click.echo(f"  {what:8} {escape_control(path)}", err=as_json)
    question = f"Accept the current content of these {len(paths)} file(s) as the new baseline?"
    if not click.confirm(question, default=False, err=as_json):
        click.echo("nothing accepted", err=as_json)
        return {"task": t.name, "accepted": None, "event": None}
    done = ck.rebaseline(t, shown)
    click.echo(f"accepted: logged {done.event} (constraint.rebaseline)", err=as_json)
    return done.to_json()


@cli.command()
@click.option(
    "--list", "list_", is_flag=True, help="List the approved commands of this repository."
)
@click.option(
    "--revoke", metavar="FINGERPRINT", help="Remove one approval (its fingerprint or 8+ digits)."
)
@json_option
@click.pass_context
def trust(ctx: click.Context, list_: bool, revoke: str | None, as_json: bool) -> None:
    """Approve command checks (the contract's, and the command assertions of each
    task's latest checkpoint) one by one, at a terminal.

    An approval binds the exact argv to this clone and lives in
    $XDG_CONFIG_HOME/git-ckpt/trust, never in the repository.
    """
    if list_ and revoke:
        raise UsageError("--list and --revoke do not go together")
    ck = open_ckpt(ctx)
    if revoke is not None:
        ck.revoke_approval(revoke)
        if as_json:
            emit_json({"revoked": revoke})
        else:
            click.echo(f"revoked {revoke}")
        return
    if list_:
        entries = ck.approvals()
        if as_json:
            emit_json([e.to_json() for e in entries])
            return
        for e in entries:
            click.echo(f"{e.fingerprint[:16]}  {e.approved_at}  {escape_for_display(e.argv)}")
        if not entries:
            click.echo(f"no approved command for {ck.repo_identity()}")
        return
    pending = ck.pending_approvals()
    if not pending:
        if as_json:
            emit_json({"pending": [], "approved": []})
        else:
            click.echo("nothing to approve: every command check is approved")
        return
    if not _stdin_is_terminal():
        raise UsageError(
            f"{len(pending)} command check(s) await approval, and only a person at a "
            "terminal can approve: stdin is not a terminal",
            hint="run `git ckpt trust` in a terminal",
        )
    approved = []
    for p in pending:
        where = f" (line {p.line})" if p.line else ""
        kind = "constraint" if p.line is not None or "(" not in p.constraint else "assertion"
        click.echo(f"{kind} {p.constraint}{where}, severity {p.severity}, timeout {p.timeout:g} s")
        click.echo(f"  command:     {escape_for_display(p.argv)}")
        click.echo(f"  fingerprint: {p.fingerprint}")
        if click.confirm("Allow git ckpt to run this command in this clone?", default=False):
            ck.approve(p, note=f"{kind} {p.constraint}")
            approved.append(p.fingerprint)
            click.echo("  approved")
        else:
            click.echo("  not approved (it stays untrusted and is never run)")
    if as_json:
        emit_json({"pending": [p.to_json() for p in pending], "approved": approved})
