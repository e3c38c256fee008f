"""`git ckpt doctor`: find and remove lock and temporary files left by killed writers."""

from __future__ import annotations

import os

import click

from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import Exit


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@json_option
@click.pass_context
def doctor(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Remove stale *.lock and tmp_* files left by killed writers (when provably unused)."""
    from git_agentckpt.api import doctor as run_doctor

    report = run_doctor(root_path(ctx), dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
    elif not report.findings:
        click.echo(f"{report.git_dir}: no stale lock or temporary files")
    else:
        for f in report.findings:
            shown = os.path.relpath(f.path, os.path.dirname(report.git_dir))
            click.echo(f"{f.action:<12}  {shown}  ({f.kind}): {f.reason}")
    if not report.ok:
        ctx.exit(int(Exit.FAILED))
