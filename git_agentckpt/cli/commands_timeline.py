"""`git ckpt timeline TASK --html FILE`: the task's trail as one HTML page for people."""

from __future__ import annotations

import os
import tempfile

import click

from git_agentckpt.cli.common import open_reader
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import CkptError, UsageError, system_refused


@cli.command()
@click.argument("task")
@click.option(
    "--html",
    "path",
    required=True,
    metavar="FILE",
    help="Write the page to FILE (`-`: standard output).",
)
@click.option(
    "--commit-url",
    metavar="TEMPLATE",
    help="Link each item to a forge's commit page, e.g. https://host/o/r/commit/{commit}.",
)
@json_option
@click.pass_context
def timeline(
    ctx: click.Context, task: str, path: str, commit_url: str | None, as_json: bool
) -> None:
    """Write TASK's timeline as one self-contained HTML page (no network).

    Checkpoints, steps, events, constraint checks, drift alarms and resumes on one
    time axis, each linked to the commit that records it."""
    if commit_url is not None and "{commit}" not in commit_url:
        raise UsageError("--commit-url needs {commit} where the commit id goes")
    tl, page = open_reader(ctx).timeline(task, commit_url)
    if path == "-":
        click.echo(page, nl=False)
    else:
        _write(path, page)
    counts = {**tl.counts, "items": len(tl.marks)}
    if as_json:
        emit_json({"task": tl.task, "file": path, "counts": counts, "bytes": len(page.encode())})
    elif path != "-":
        click.echo(
            f"wrote {path}: {counts['items']} items, {counts['events']} events, "
            f"{counts['checkpoints']} checkpoints, {counts['resumes']} resumes"
        )


def _cannot_write(path: str, exc: OSError) -> CkptError:
    """A full disk, a read-only mount, a permission: exit 7 naming FILE; else exit 2."""
    refused = system_refused(exc.errno, path, "git ckpt timeline")
    return refused or UsageError(f"cannot write {path}: {exc.strerror}")


def _write(path: str, page: str) -> None:
    """Written whole or not at all (a temporary file renamed over FILE)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".timeline-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as `open` would have made it
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise _cannot_write(path, exc) from None
