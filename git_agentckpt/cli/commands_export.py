"""`git ckpt export TASK|CKPT --to DIR`, and the body of `git ckpt verify --dir DIR`
(a working tree against an export; `verify` itself is in commands_audit.py)."""

from __future__ import annotations

import os

import click

from git_agentckpt.cli.common import open_reader, root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import Exit
from git_agentckpt.paths import quote


@cli.command()
@click.argument("target", metavar="TASK|CKPT")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="DIR",
    help="The directory to write: new, or empty (an export never overwrites).",
)
@json_option
@click.pass_context
def export(ctx: click.Context, target: str, to: str, as_json: bool) -> None:
    """Write a task's trail (or one checkpoint) as plain files for reviewers."""
    ck = open_reader(ctx)
    result = ck.export(target, os.path.join(root_path(ctx), to))  # relative: to -C, as git
    if as_json:
        emit_json(result.to_json())
        return
    what = f"task {result.tasks[0]}" if result.scope == "task" else "1 checkpoint"
    click.echo(
        f"exported {what}: {result.checkpoints} checkpoint(s), {result.files} files "
        f"to {result.directory}"
    )
    if result.redacted:
        click.echo(f"redacted on the way out: {result.redacted} value(s) (see export.json)")
    for line in result.warnings:
        click.echo(f"git ckpt: warning: {line}", err=True)
    click.echo(f"check it: (cd {result.directory} && sha256sum -c SHA256SUMS)")


def verify_dir_command(
    ctx: click.Context, export_dir: str, checkpoint: str | None, as_json: bool
) -> None:
    """The body of `verify --dir`: print each difference; exit 1 when there is one."""
    from git_agentckpt.api import verify_dir

    result = verify_dir(root_path(ctx), os.path.join(root_path(ctx), export_dir), checkpoint)
    if as_json:
        emit_json(result.to_json())
    else:
        for d in result.differences:
            click.echo(f"{d.kind:8}  {quote(d.path)}  ({d.detail})")
        verdict = "matches" if result.ok else f"differs in {len(result.differences)} file(s)"
        extra = f", {result.secret} secret file(s) not checked" if result.secret else ""
        click.echo(
            f"working tree {result.worktree} {verdict}: checkpoint {result.checkpoint} of task "
            f"{result.task} ({result.checked} files checked{extra})"
        )
    if not result.ok:
        ctx.exit(int(Exit.FAILED))
