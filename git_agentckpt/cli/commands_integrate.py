"""`git ckpt integrate claude-code|codex`: the agent's hooks and instructions, in and out."""

from __future__ import annotations

import click

from git_agentckpt import api
from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option


@cli.group()
def integrate() -> None:
    """Set up an agent (Claude Code, Codex) to checkpoint through git ckpt; --remove undoes it."""


def _scope_options(scopes: list[tuple[str, str]]) -> list[click.Option]:
    first = scopes[0][0]
    return [
        click.Option(
            [f"--{name}", "scope"],
            flag_value=name,
            help=text + (" (default)" if name == first else ""),
        )
        for name, text in scopes
    ]


def _run(ctx: click.Context, agent: str, scope: str | None, remove: bool, as_json: bool) -> None:
    result = api.integrate(agent, scope or "project", root_path(ctx), remove=remove)
    if as_json:
        emit_json(result.to_json())
        return
    for f in result.files:
        click.echo(f"{f.change:<9} {f.path} ({f.what})")
    if not result.changed:
        click.echo("nothing changed: already " + ("removed" if remove else "integrated"))
    for note in result.notes:
        click.echo(f"note: {note}")


@integrate.command(name="claude-code")
@click.option("--remove", is_flag=True, help="Take the hooks and the CLAUDE.md block out again.")
@json_option
@click.pass_context
def claude_code(ctx: click.Context, scope: str | None, remove: bool, as_json: bool) -> None:
    """Hooks in .claude/settings.json, and a CLAUDE.md block importing the constraints."""
    _run(ctx, "claude-code", scope, remove, as_json)


@integrate.command(name="codex")
@click.option("--remove", is_flag=True, help="Take the hooks and the AGENTS.md block out again.")
@json_option
@click.pass_context
def codex(ctx: click.Context, scope: str | None, remove: bool, as_json: bool) -> None:
    """Hooks in .codex/hooks.json, and an AGENTS.md block on steps, check and resume."""
    _run(ctx, "codex", scope, remove, as_json)


claude_code.params[:0] = _scope_options(
    [
        ("project", "Write .claude/settings.json of this worktree."),
        ("local", "Write .claude/settings.local.json (yours, not committed)."),
        ("user", "Write ~/.claude/settings.json (every project; CLAUDE.md untouched)."),
    ]
)
codex.params[:0] = _scope_options(
    [
        ("project", "Write .codex/hooks.json of this worktree."),
        ("user", "Write $CODEX_HOME/hooks.json (~/.codex; AGENTS.md untouched)."),
    ]
)
