"""`git ckpt`: the click layer. It parses, calls the facade, and formats.

Errors are mapped to exit statuses in one place (`CkptGroup.invoke`); no
traceback reaches the user unless GIT_CKPT_DEBUG=1.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import sys
import traceback
from typing import Any

import click

from git_agentckpt import __version__, progress
from git_agentckpt.cli.output import JSON_ERRORS, guard_streams
from git_agentckpt.errors import (
    FILE_SYSTEM_WIDE,
    CkptError,
    Exit,
    UsageError,
    errno_in_text,
    shorten,
    system_refused,
)


def _report(ctx: click.Context, message: str, status: int) -> None:
    """An error, once on each channel: one line on stderr, always; and one JSON object
    on stdout when the command was asked for JSON output by its own `--json` option
    (`event --json PAYLOAD` takes a payload, not an output format: text only)."""
    click.echo(f"git ckpt: error: {message}", err=True)
    if ctx.meta.get(JSON_ERRORS):
        click.echo(json.dumps({"error": message, "exit": status}, separators=(",", ":")))


def _print_warnings(ctx: click.Context) -> None:
    """Damaged records a command skipped: named on stderr, once each, after its output."""
    seen: set[str] = set()
    for ck in ctx.meta.get("ckpt.facades", []):
        for line in ck.warnings:
            if line not in seen:
                seen.add(line)
                click.echo(f"git ckpt: warning: {line}", err=True)


def _not_utf8(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _git_dir_of(path: str) -> str:
    """`/x/.git` for a path inside a `.git` directory, else the path itself."""
    head, sep, _ = path.partition("/.git/")
    return head + "/.git" if sep else path


def _as_system_error(ctx: click.Context, exc: OSError | MemoryError) -> CkptError | None:
    """Last resort for an OSError no layer translated: a full disk is not a bug either;
    nor is memory the system refused (MemoryError)."""
    doing = f"git ckpt {ctx.invoked_subcommand or ''}".strip()
    if isinstance(exc, MemoryError):
        return system_refused(errno.ENOMEM, None, doing)
    err = exc.errno if exc.errno is not None else errno_in_text(str(exc))
    path = exc.filename if isinstance(exc.filename, str) else None
    if path and err in FILE_SYSTEM_WIDE:  # the repository's directory, not a lock file in it
        path = _git_dir_of(path)
    return system_refused(err, path, doing)


# Each command's module is imported only when that command runs (or help lists it):
# every `git ckpt` call pays Python start-up, so the other modules are not loaded.
LAZY_COMMANDS = {
    "init": "commands_ckpt",
    "create": "commands_ckpt",
    "list": "commands_ckpt",
    "show": "commands_ckpt",
    "log": "commands_ckpt",
    "diff": "commands_ckpt",
    "restore": "commands_ckpt",
    "event": "commands_ckpt",
    "task": "commands_task",
    "step": "commands_task",
    "resume": "commands_resume",
    "confirm": "commands_resume",
    "report": "commands_resume",
    "demo": "commands_resume",
    "tick": "commands_policy",
    "config": "commands_policy",
    "check": "commands_contracts",
    "trust": "commands_contracts",
    "hooks": "commands_hooks",
    "hook": "commands_hooks",
    "daemon": "commands_server",
    "server": "commands_server",
    "fetch": "commands_share",
    "push": "commands_share",
    "doctor": "commands_doctor",
    "mcp": "commands_mcp",
    "integrate": "commands_integrate",
    "import": "commands_import",
    "timeline": "commands_timeline",
    "metrics": "commands_metrics",
    "verify": "commands_audit",
    "export": "commands_export",
}


def load_all_commands() -> None:
    for module in sorted(set(LAZY_COMMANDS.values())):
        importlib.import_module(f"git_agentckpt.cli.{module}")


class CkptGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            importlib.import_module(f"git_agentckpt.cli.{LAZY_COMMANDS[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for before, arg in zip(["", *args], args, strict=False):
            # Python hands bytes of argv that are not UTF-8 over as lone surrogates: text
            # (a goal, a message, JSON) is stored as UTF-8 and cannot hold them; a path can.
            if _not_utf8(arg) and before != "-C" and not os.path.lexists(arg):
                raise click.UsageError(
                    f"the argument {shorten(arg)!r} is not valid UTF-8: "
                    "git ckpt stores text as UTF-8; convert it (e.g. with iconv)",
                    ctx,
                )
        # progress on stderr: a terminal only, never with --json (git_agentckpt/progress.py)
        json_output = any(a == "--json" or a.startswith("--json=") for a in args)
        parsed = super().parse_args(ctx, args)
        quiet = bool(ctx.params.get("quiet"))
        progress.configure(progress.wanted(json_output=json_output, quiet=quiet))
        return parsed

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return self._invoke(ctx)
        finally:
            _print_warnings(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CkptError as exc:
            _report(ctx, exc.one_line(), int(exc.exit_status))
            ctx.exit(int(exc.exit_status))
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("git ckpt: interrupted", err=True)
            ctx.exit(int(Exit.INTERRUPTED))
        except BrokenPipeError:
            ctx.exit(0)
        except (OSError, MemoryError) as exc:
            refused = _as_system_error(ctx, exc)
            if refused is None:
                _internal(ctx, exc)
            else:
                _report(ctx, refused.one_line(), int(refused.exit_status))
                ctx.exit(int(refused.exit_status))
        except Exception as exc:
            _internal(ctx, exc)


def _internal(ctx: click.Context, exc: Exception) -> None:
    if os.environ.get("GIT_CKPT_DEBUG"):
        traceback.print_exc()
    _report(
        ctx,
        f"internal error: {type(exc).__name__}: {exc} (rerun with GIT_CKPT_DEBUG=1 and report it)",
        int(Exit.INTERNAL),
    )
    ctx.exit(int(Exit.INTERNAL))


@click.group(cls=CkptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="git-ckpt", message="%(prog)s %(version)s"
)
@click.option(
    "-C",
    "repo_path",
    default=".",
    metavar="PATH",
    help="Run as if started in PATH (like git -C).",
)
@click.option(
    "--quiet",
    "-q",
    "quiet",
    is_flag=True,
    help="No progress meters on stderr (they show only on a terminal, for long work).",
)
@click.pass_context
def cli(ctx: click.Context, repo_path: str, quiet: bool) -> None:
    """Checkpoints, task state and an event log for long-running AI agents, in git.

    Snapshots live under refs/agent/checkpoints/<task>, task state in
    refs/notes/agent/state, events in refs/agent/events/<task>. Your index,
    HEAD, branches and stash are never touched. See `man git-ckpt`.
    """
    guard_streams()
    if repo_path != ".":
        try:
            os.stat(repo_path)
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise UsageError(
                    f"-C {shorten(repo_path)}: the path is too long for the file system",
                    hint="pass a shorter path (cd part of the way first)",
                ) from exc
    ctx.obj = repo_path


def main() -> None:
    try:
        cli.main(prog_name="git ckpt", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(int(Exit.INTERRUPTED))
