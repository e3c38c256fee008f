"""`git ckpt verify`: check a trail end to end, one line per problem."""

from __future__ import annotations

import click

from git_agentckpt.cli.common import root_path
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import Exit


@cli.command()
@click.argument("tasks", nargs=-1, metavar="[TASK]...")
@click.option(
    "--against",
    metavar="REMOTE",
    help="Also check that every agent ref of REMOTE is contained in ours (a rollback).",
)
@click.option(
    "--witness",
    metavar="FILE",
    help="The witness file `git ckpt push` writes (default: "
    "$XDG_STATE_HOME/git-ckpt/witness/<repository id>.json, read when it exists).",
)
@json_option
@click.pass_context
def verify(
    ctx: click.Context,
    tasks: tuple[str, ...],
    against: str | None,
    witness: str | None,
    as_json: bool,
) -> None:
    """Check the trail of TASKs (default: all) and name each problem; exit 6 if any."""
    from git_agentckpt.api import verify as run_verify

    report = run_verify(root_path(ctx), tasks, against=against, witness=witness)
    if as_json:
        emit_json(report.to_json())
    else:
        for line in report.lines():
            click.echo(line)
        counts = {s: sum(p.severity == s for p in report.problems) for s in ("error", "warning")}
        read = ", ".join(f"{n} {what}" for what, n in sorted(report.checked.items()))
        against_text = f"; compared with {', '.join(report.sources)}" if report.sources else ""
        verdict = "ok" if report.ok else "FAILED"
        click.echo(
            f"verify {verdict}: {len(report.tasks)} task(s), {counts['error']} error(s), "
            f"{counts['warning']} warning(s) ({read}){against_text}"
        )
    if not report.ok:
        ctx.exit(int(Exit.CORRUPT))
