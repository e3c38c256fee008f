"""`git ckpt import claude-code|codex FILE`: a past session's transcript as events."""

from __future__ import annotations

import os

import click

from git_agentckpt.cli.common import open_ckpt, root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import shorten

_LABELS = (
    ("prompt", "prompt", "prompts"),
    ("tool_call", "tool call", "tool calls"),
    ("tool_result", "late tool result", "late tool results"),
    ("model_call", "model call", "model calls"),
    ("compaction", "compaction", "compactions"),
    ("quota", "quota signal", "quota signals"),
    ("error", "API error", "API errors"),
)


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


@cli.command("import")
@click.argument("agent", type=click.Choice(["claude-code", "codex"]))
@click.argument("file", metavar="FILE")
@click.option(
    "-t", "--task", help="Task to import into (default: $GIT_CKPT_TASK, or the single active task)."
)
@click.option("--dry-run", is_flag=True, help="Count what would be imported; write nothing.")
@json_option
@click.pass_context
def import_(
    ctx: click.Context, agent: str, file: str, task: str | None, dry_run: bool, as_json: bool
) -> None:
    """Import a past session of AGENT from its transcript FILE into a task's event log.

    FILE is a Claude Code transcript (~/.claude/projects/DIR/SESSION.jsonl) or a Codex
    rollout ($CODEX_HOME/sessions/.../rollout-*.jsonl); it is only read. Prompts, tool
    calls with their results, model usage, compactions and Codex rate limits become
    events. Records imported before are skipped: importing again, or after the session
    grew, adds only what is new.
    """
    ck = open_ckpt(ctx)
    path = os.path.join(root_path(ctx), file)
    result = ck.import_transcript(agent, path, task, dry_run=dry_run, shown=shorten(file))
    if as_json:
        emit_json(result.to_json())
        return
    counts = ", ".join(
        _n(result.imported.get(kind, 0), one, many)
        for kind, one, many in _LABELS
        if result.imported.get(kind, 0) or kind not in ("tool_result", "quota", "error")
    )
    verb = "would import" if dry_run else "imported"
    sessions = ", ".join(result.sessions) or "no session id"
    click.echo(f"{verb} into task {result.task} from {result.file} ({agent}, {sessions}):")
    click.echo(f"  {counts}")
    click.echo(
        f"  {_n(result.already, 'event', 'events')} already imported, "
        f"{_n(result.malformed, 'malformed line', 'malformed lines')} skipped"
    )
