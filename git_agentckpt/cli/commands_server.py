"""`git ckpt server start|stop|status`: the warm server that spares each call Python's start-up.

The server itself is `cli/server.py`; `cli/launch.py` starts it on the first
call and hands it later calls. These commands always run in the calling
process (never through the server they manage).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click

from git_agentckpt.cli import launch
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option
from git_agentckpt.errors import OperationFailed, UsageError

WAIT_SECONDS = 15.0


def _require_support() -> None:
    if not launch.supported():
        raise UsageError(
            "the git-ckpt server needs Linux (abstract unix sockets)",
            hint="every call runs without it; nothing to do",
        )


def this_address() -> bytes:
    return launch.address(launch.fingerprint())


def all_addresses() -> list[bytes]:
    """Every git-ckpt server socket of this user, any version (from /proc/net/unix)."""
    prefix = f"@git-ckpt/{os.getuid()}/"
    found: set[bytes] = set()
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as fh:
            next(fh, None)
            for line in fh:
                parts = line.split()
                if len(parts) >= 8 and parts[7].startswith(prefix):
                    found.add(b"\0" + parts[7][1:].encode())
    except OSError:
        return [this_address()]
    return sorted(found)


def server_status(addr: bytes) -> dict[str, Any] | None:
    reply = launch.control(addr, "status")
    if reply is None or reply[0] != "S":
        return None
    status: dict[str, Any] = json.loads(reply[1])
    return status


def _wait(addr: bytes, running: bool) -> dict[str, Any] | None:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        status = server_status(addr)
        if (status is not None) == running or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


@cli.group()
def server() -> None:
    """The warm server: imports done once, one forked child per call (Linux).

    The first `git ckpt` call starts it in the background; later calls are
    handed to it and skip Python's start-up. It exits after
    GIT_CKPT_SERVER_IDLE seconds (900) without a call. GIT_CKPT_SERVER=off
    runs every call in its own process.
    """


@server.command(name="status")
@click.option("--all", "every", is_flag=True, help="Every server of this user, any version.")
@json_option
def server_status_cmd(every: bool, as_json: bool) -> None:
    """Show whether the server for this installation runs, and what it has served."""
    _require_support()
    addrs = all_addresses() if every else [this_address()]
    found = [s for s in (server_status(a) for a in addrs) if s is not None]
    enabled = launch.enabled(os.environ)
    if as_json:
        if every:
            emit_json({"enabled": enabled, "servers": found})
        else:
            emit_json({"enabled": enabled, "running": bool(found), **(found[0] if found else {})})
        return
    if not enabled:
        click.echo(f"{launch.MODE_VAR}=off: calls run without a server")
    if not found:
        click.echo("no server running" + (" for this installation" if not every else ""))
    for s in found:
        state = "stopping" if s["stopping"] else "running"
        click.echo(
            f"{state}: pid {s['pid']}, git-ckpt {s['version']}, {s['served']} call(s) served, "
            f"{len(s['calls'])} running, idle {s['idle_for']:.0f}s of {s['idle_timeout']:.0f}s"
        )
        click.echo(f"  package {s['package']} ({s['python']})")


@server.command(name="start")
def server_start() -> None:
    """Start the server now (the first call would otherwise start it)."""
    _require_support()
    fp = launch.fingerprint()
    addr = launch.address(fp)
    status = server_status(addr)
    if status is not None:
        click.echo(f"already running: pid {status['pid']}")
        return
    if launch.spawn_server(fp) is None:
        raise OperationFailed("could not start the server", hint="run with GIT_CKPT_SERVER=off")
    status = _wait(addr, running=True)
    if status is None:
        raise OperationFailed(
            f"the server did not answer within {WAIT_SECONDS:.0f} s",
            hint="calls still work without it; try `git ckpt server start` again",
        )
    click.echo(f"started: pid {status['pid']}")
    if not launch.enabled(os.environ):
        click.echo(f"note: {launch.MODE_VAR}=off here, so calls from this shell will not use it")


@server.command(name="stop")
@click.option("--all", "every", is_flag=True, help="Every server of this user, any version.")
def server_stop(every: bool) -> None:
    """Stop the server; calls it is running finish first."""
    _require_support()
    stopped = 0
    for addr in all_addresses() if every else [this_address()]:
        status = server_status(addr)
        if status is None or launch.control(addr, "stop") is None:
            continue
        if _wait(addr, running=False) is not None:
            raise OperationFailed(
                f"server pid {status['pid']} is still running calls after {WAIT_SECONDS:.0f} s",
                hint="it exits when they end; `git ckpt server status` shows them",
            )
        click.echo(f"stopped: pid {status['pid']}")
        stopped += 1
    if not stopped:
        click.echo("no server running")
