"""`git ckpt daemon start|stop|status|list`: the daemons (`server` is a hidden alias).

The daemon itself is `daemon/server.py`; `cli/launch.py` starts it on the first
call that writes a task's trail in a work tree and hands it later calls. These
commands always run in the calling process (never through the daemon they manage; the daemon refuses
them too). The work tree is found the way `git-ckpt` finds it
(`daemon_find.discover`), so these commands talk to the daemon calls would use.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click

from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.daemon import client, registry
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.errors import OperationFailed, UsageError

WAIT_SECONDS = 15.0
_BASE_KEYS = {
    "pid", "version", "python", "package", "fingerprint", "worktree", "git_dir", "socket",
    "started", "served", "refused", "calls", "idle_timeout", "idle_for", "request_timeout",
    "stopping",
}  # fmt: skip


def _where() -> tuple[str, str]:
    """(work tree, git dir) of the daemon calls from here would use."""
    if not daemon_find.supported():
        raise UsageError(
            "the git-ckpt daemon needs Linux (SO_PEERCRED, /proc)",
            hint="every call runs without it; nothing to do",
        )
    ctx = click.get_current_context()
    start = os.path.join(os.getcwd(), str(ctx.find_root().obj or "."))
    found = daemon_find.discover(start, os.environ)
    if found is None:
        unclear = [v for v in daemon_find.UNCLEAR_VARS if v in os.environ]
        raise UsageError(
            "no daemon here: "
            + (f"{', '.join(unclear)} set" if unclear else "not inside a git work tree"),
            hint="calls from here run in their own process; nothing to do",
        )
    return found


def daemon_status(git_dir: str) -> dict[str, Any] | None:
    reply = client.control(git_dir, "status")
    if reply is None or reply[0] != "S":
        return None
    status: dict[str, Any] = json.loads(reply[1])
    return status


def _gone(pid: int) -> bool:
    return not client.alive(pid)


@cli.group()
def daemon() -> None:
    """This work tree's daemon: imports done once, one forked child per call (Linux).

    The first call that writes a task's trail in a work tree starts it in the
    background; later calls from the same user, namespaces, cgroup, limits and
    privileges are handed to it and skip Python's start-up (others run in their
    own process). It exits after GIT_CKPT_DAEMON_IDLE seconds (300) without a
    call; beyond GIT_CKPT_DAEMON_MAX daemons of this user (4), the least recently
    used one exits. GIT_CKPT_DAEMON=off runs every call in its own process.
    """


@daemon.command(name="status")
@json_option
def daemon_status_cmd(as_json: bool) -> None:
    """Show whether this work tree's daemon runs, and what it has served."""
    worktree, git_dir = _where()
    found = daemon_status(git_dir)
    enabled = daemon_find.enabled(os.environ)
    if as_json:
        emit_json({"enabled": enabled, "running": found is not None, **(found or {})})
        return
    if not enabled:
        click.echo(f"{daemon_find.MODE_VAR}=off: calls run without the daemon")
    if found is None:
        click.echo(f"no daemon running for {worktree}")
        return
    state = "stopping" if found["stopping"] else "running"
    click.echo(
        f"{state}: pid {found['pid']}, git-ckpt {found['version']}, "
        f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(found['started']))}"
    )
    click.echo(f"  worktree {found['worktree']}")
    click.echo(f"  socket   {found['socket']}")
    click.echo(
        f"  {found['served']} call(s) served, {len(found['calls'])} running, "
        f"idle {found['idle_for']:.0f}s of {found['idle_timeout']:.0f}s"
    )
    for why, count in sorted(found["refused"].items()):
        click.echo(f"  {count} call(s) run by their caller: {why}")
    click.echo(f"  package {found['package']} ({found['python']})")
    for name in sorted(set(found) - _BASE_KEYS):  # what plug-ins report (the watcher)
        click.echo(f"  {name}: {json.dumps(found[name], sort_keys=True)}")


@daemon.command(name="start")
def daemon_start() -> None:
    """Start this work tree's daemon now (the first call would otherwise start it)."""
    worktree, git_dir = _where()
    status = daemon_status(git_dir)
    if status is not None and status["fingerprint"] == daemon_find.fingerprint():
        click.echo(f"already running: pid {status['pid']}")
        return
    fp = daemon_find.fingerprint()
    if client.spawn_daemon(fp, worktree, git_dir) is None:
        raise OperationFailed("could not start the daemon", hint="run with GIT_CKPT_DAEMON=off")
    deadline = time.monotonic() + WAIT_SECONDS
    while (status := daemon_status(git_dir)) is None or status["fingerprint"] != fp:
        if time.monotonic() > deadline:
            raise OperationFailed(
                f"the daemon did not answer within {WAIT_SECONDS:.0f} s",
                hint="calls still work without it; try `git ckpt daemon start` again",
            )
        time.sleep(0.05)
    click.echo(f"started: pid {status['pid']}")
    if not daemon_find.enabled(os.environ):
        off = f"{daemon_find.MODE_VAR}=off"
        click.echo(f"note: {off} here, so calls from this shell will not use it")


def _stop(git_dir: str) -> int | None:
    """Ask the daemon of `git_dir` to stop and wait until it has: its pid, None if none ran."""
    status = daemon_status(git_dir)
    if status is None or client.control(git_dir, "stop") is None:
        return None
    deadline = time.monotonic() + WAIT_SECONDS
    while not _gone(status["pid"]):
        if time.monotonic() > deadline:
            raise OperationFailed(
                f"daemon pid {status['pid']} is still running calls after {WAIT_SECONDS:.0f} s",
                hint="it exits when they end; `git ckpt daemon status` shows them",
            )
        time.sleep(0.05)
    return int(status["pid"])


@daemon.command(name="stop")
@click.option("--all", "every", is_flag=True, help="Stop every daemon of this user.")
def daemon_stop(every: bool) -> None:
    """Stop this work tree's daemon (or all of them); calls running finish first."""
    if every:
        stopped = [pid for e in registry.entries() if (pid := _stop(e.git_dir)) is not None]
        click.echo(f"stopped {len(stopped)} daemon(s)" + "".join(f" {p}" for p in stopped))
        return
    _worktree, git_dir = _where()
    pid = _stop(git_dir)
    click.echo("no daemon running" if pid is None else f"stopped: pid {pid}")


def _memory_kb(pid: int) -> int | None:
    """Resident memory of `pid` (VmRSS), in KiB."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


@daemon.command(name="list")
@json_option
def daemon_list(as_json: bool) -> None:
    """List every daemon of this user: work tree, pid, age, memory, calls served."""
    rows = []
    now = time.time()
    for entry in registry.entries():
        status = daemon_status(entry.git_dir) or {}
        rows.append(
            {
                "pid": entry.pid,
                "worktree": entry.worktree,
                "git_dir": entry.git_dir,
                "age_seconds": round(now - entry.started, 1),
                "idle_seconds": round(now - entry.last_used, 1),
                "rss_kb": _memory_kb(entry.pid),
                "served": status.get("served"),
                "running": len(status.get("calls", [])),
            }
        )
    if as_json:
        emit_json({"cap": registry.cap(), "daemons": rows})
        return
    if not rows:
        click.echo("no daemon running")
        return
    for row in rows:
        kb = row["rss_kb"]
        rss = f"{kb / 1024:.0f} MB" if isinstance(kb, int) else "?"
        click.echo(
            f"{row['pid']:>7}  {row['age_seconds']:>6.0f}s old  idle {row['idle_seconds']:>5.0f}s  "
            f"{rss:>6}  {row['served'] or 0:>5} calls  {row['worktree']}"
        )
    click.echo(f"{len(rows)} of at most {registry.cap()} ({registry.MAX_VAR})")


server = click.Group(
    "server",
    commands=dict(daemon.commands),
    hidden=True,
    help="The former name of `git ckpt daemon` (same subcommands).",
)
cli.add_command(server)
