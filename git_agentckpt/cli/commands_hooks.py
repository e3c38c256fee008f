"""Commands of the git hooks: hooks install|uninstall|status, and the hidden hook entry."""

from __future__ import annotations

import os
import sys

import click

from git_agentckpt import api
from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option


@cli.group()
def hooks() -> None:
    """Install the git hooks that guard refs/agent/* (write-ahead order, forward only)."""


SERVER_HELP = (
    "A shared (usually bare) repository: the pre-receive shim, which refuses pushes "
    "that delete or rewrite the trail."
)


@hooks.command(name="install")
@click.option("--server", is_flag=True, help=SERVER_HELP)
@click.pass_context
def hooks_install(ctx: click.Context, server: bool) -> None:
    """Install the reference-transaction and pre-push shims (--server: pre-receive);
    keeps and chains an existing hook."""
    for line in api.install_hooks(root_path(ctx), server=server):
        click.echo(line)


@hooks.command(name="uninstall")
@click.option("--server", is_flag=True, help="Remove the pre-receive shim.")
@click.pass_context
def hooks_uninstall(ctx: click.Context, server: bool) -> None:
    """Remove the shims (--server: pre-receive) and put back a hook they had chained."""
    for line in api.uninstall_hooks(root_path(ctx), server=server) or ["nothing to remove"]:
        click.echo(line)


@hooks.command(name="status")
@json_option
@click.pass_context
def hooks_status(ctx: click.Context, as_json: bool) -> None:
    """Show whether each hook is installed."""
    state = api.hooks_status(root_path(ctx))
    if as_json:
        emit_json(state)
    else:
        for name, value in state.items():
            click.echo(f"{name}: {value}")


AGENT_HOOKS = ("claude-code", "codex")
GIT_HOOKS = ("reference-transaction", "pre-receive", "pre-push")


@cli.command(name="hook", hidden=True)
@click.argument("name")
@click.argument("args", nargs=-1)
@click.pass_context
def hook(ctx: click.Context, name: str, args: tuple[str, ...]) -> None:
    """Run a hook body: git's (the shims in hooks/), or an agent's.

    `hook claude-code EVENT` and `hook codex EVENT` read the hook's JSON on stdin and
    print one JSON object on stdout for the agent; the exit status is always 0 (a
    failure is said in the object's `systemMessage`)."""
    if name in AGENT_HOOKS:
        try:
            stdin = api.hook_stdin(sys.stdin.buffer)
        except (OSError, ValueError):
            stdin = b""  # no stdin at all: answered as an empty payload
        reply = api.agent_hook(name, args[0] if args else "", stdin, root_path(ctx))
        click.echo(reply.text)
        return
    if name not in GIT_HOOKS:
        raise click.UsageError(f"unknown hook {name!r}")
    sys.exit(api.run_hook(name, args, sys.stdin.read(), os.getcwd()))
