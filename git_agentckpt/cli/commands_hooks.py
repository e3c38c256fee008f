"""Commands of the git hooks: hooks install|uninstall|status, and the hidden hook entry."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option

if TYPE_CHECKING:
    from git_agentckpt.git.repo import GitRepo


def _repo(ctx: click.Context) -> GitRepo:
    from git_agentckpt.git.repo import GitRepo

    return GitRepo.discover(root_path(ctx), allow_bare=True)


@cli.group()
def hooks() -> None:
    """Install the git hooks that guard refs/agent/* (write-ahead order, forward only)."""


@hooks.command(name="install")
@click.pass_context
def hooks_install(ctx: click.Context) -> None:
    """Install the reference-transaction shim; keeps and chains an existing hook."""
    from git_agentckpt import hooks as h

    for line in h.install(_repo(ctx)):
        click.echo(line)


@hooks.command(name="uninstall")
@click.pass_context
def hooks_uninstall(ctx: click.Context) -> None:
    """Remove the shim and put back a hook it had chained."""
    from git_agentckpt import hooks as h

    for line in h.uninstall(_repo(ctx)) or ["nothing to remove"]:
        click.echo(line)


@hooks.command(name="status")
@json_option
@click.pass_context
def hooks_status(ctx: click.Context, as_json: bool) -> None:
    """Show whether each hook is installed."""
    from git_agentckpt import hooks as h

    state = h.status(_repo(ctx))
    if as_json:
        emit_json(state)
    else:
        for name, value in state.items():
            click.echo(f"{name}: {value}")


@cli.command(name="hook", hidden=True)
@click.argument("name")
@click.argument("args", nargs=-1)
def hook(name: str, args: tuple[str, ...]) -> None:
    """Run a hook body (called by the shims in hooks/)."""
    from git_agentckpt import hooks as h

    if name != "reference-transaction":
        raise click.UsageError(f"unknown hook {name!r}")
    state = args[0] if args else ""
    sys.exit(h.run_reference_transaction(state, sys.stdin.read(), os.getcwd()))
