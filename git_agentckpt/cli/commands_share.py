"""`git ckpt fetch|push [REMOTE]`: share the audit trail through any git remote."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from git_agentckpt.cli.common import open_ckpt
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import CkptError, ConflictError, CorruptError

if TYPE_CHECKING:
    from git_agentckpt.api import ShareResult
    from git_agentckpt.store.share import RefResult

_FLAGS = {" ": "updated", "*": "new", "=": "up to date", "!": "rejected", "+": "forced"}


def _report(ctx: click.Context, result: ShareResult, as_json: bool, pushing: bool) -> None:
    """Print the outcome; diverged refs make it fail (exit 5) after the rest was shared."""
    blocked = result.blocked
    damaged = [r for r in blocked if r.action == "damaged"]
    error: CkptError | None = None
    if damaged:  # a record failed validation: only its own refs wait
        here = [r.ref for r in damaged if r.local]
        error = CorruptError(
            "not shared: " + "; ".join(_damaged(r) for r in damaged),
            hint=f"the rest was shared; `git ckpt verify` tells what is wrong with {here[0]}"
            if here
            else "the rest was shared; ask that clone's owner to check it with `git ckpt list`",
        )
    elif blocked:
        error = ConflictError(
            "not shared: " + "; ".join(f"{r.ref} {r.action} ({r.detail})" for r in blocked),
            hint="two clones wrote the same task: resume one chain, or start a new task",
        )
    if as_json:
        doc = result.to_json()
        if error is not None:
            doc.update(error=error.one_line(), exit=int(error.exit_status))
        emit_json(doc)
    else:
        none = f"{result.remote}: no agent refs"
        click.echo(f"from {result.remote}:" if result.fetched else none)
        width = max((len(r.ref) for r in result.fetched), default=0)
        for r in result.fetched:
            action = r.action + " here" * r.local
            click.echo(f"  {r.ref:<{width}}  {action}" + (f": {r.detail}" if r.detail else ""))
        if pushing:
            counts: dict[str, int] = {}
            for p in result.pushed:
                label = _FLAGS.get(p.flag, p.flag)
                counts[label] = counts.get(label, 0) + 1
            done = ", ".join(f"{n} {label}" for label, n in sorted(counts.items())) or "nothing"
            click.echo(f"pushed to {result.remote}: {done}")
    if error is not None:
        click.echo(f"git ckpt: error: {error.one_line()}", err=True)
        ctx.exit(int(error.exit_status))


def _damaged(r: RefResult) -> str:
    """One damaged ref: where, why, and what waits with it (`ShareResult.held_back`)."""
    waits = ", with its task's checkpoint and reports" if r.holds_task else ""
    return f"{r.ref} damaged{' here' * r.local} ({r.detail}){waits}"


@cli.command()
@click.argument("remote", default="origin")
@json_option
@click.pass_context
def fetch(ctx: click.Context, remote: str, as_json: bool) -> None:
    """Fetch REMOTE's audit trail (refs/agent/*, refs/notes/agent/*) and merge it in."""
    _report(ctx, open_ckpt(ctx).fetch(remote), as_json, pushing=False)


@cli.command()
@click.argument("remote", default="origin")
@json_option
@click.pass_context
def push(ctx: click.Context, remote: str, as_json: bool) -> None:
    """Fetch and merge REMOTE's audit trail, then push ours to it in one atomic push."""
    _report(ctx, open_ckpt(ctx).push(remote), as_json, pushing=True)
