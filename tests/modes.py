"""The two modes the whole suite runs in, as git reruns its suite with its fsmonitor on.

- `daemon`: what a user gets by default. Every `git ckpt` call a test makes through
  `helpers.ckpt` goes to the work tree's daemon (started for the test and waited for,
  its watcher's first walk included; forked from a process that did the imports once,
  tests/zygote.py), from this process, through the same client code as the `git-ckpt`
  entry point (`daemon/client.run_remote`); calls the daemon refuses run here, as the
  entry point runs them in its own process. Real `git ckpt` subprocesses (hooks,
  agents) find and start daemons as they would for a user.
- `inline`: `GIT_CKPT_DAEMON=off`; every call runs in its own process (here, through
  click's CliRunner).

Each test runs once per mode (`[daemon]`, `[inline]` in its id) unless it says, with
`@pytest.mark.mode("daemon" | "inline" | "once", reason=...)`, that it makes sense in
one mode only: "inline" for a test that patches this process or measures work done in
it; "daemon" for the tests of the daemon itself (they set their environment up
themselves); "once" for a test that never runs a `git ckpt` command (pure functions).
`pytest --mode daemon|inline` runs one mode.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from zygote import Zygote

MODES = ("daemon", "inline")
MODE_ENV = {
    "daemon": {
        "GIT_CKPT_DAEMON": "auto",
        "GIT_CKPT_DAEMON_TIMEOUT": "10",  # a loaded machine is no reason to run inline
        "GIT_CKPT_DAEMON_IDLE": "120",
    },
    "inline": {"GIT_CKPT_DAEMON": "off"},
}
READY_SECONDS = 30.0
ZYGOTE = Zygote()


def allowed(marker: pytest.Mark | None) -> tuple[str, ...]:
    """The modes a test runs in, from its `mode` marker."""
    if marker is None:
        return MODES
    which = marker.args[0] if marker.args else ""
    if "reason" not in marker.kwargs:
        raise pytest.UsageError(f"@pytest.mark.mode({which!r}) needs a reason=")
    if which == "once":
        return ("inline",)
    if which not in MODES:
        raise pytest.UsageError(f"unknown mode {which!r} (daemon, inline or once)")
    return (which,)


def mode_of(nodeid: str) -> str | None:
    """The mode in a test's id (`test_x[daemon]`, `test_y[3-inline]`), if any."""
    if not nodeid.endswith("]"):
        return None
    ids = nodeid.rsplit("[", 1)[-1][:-1].split("-")
    return next((m for m in MODES if m in ids), None)


# -- the daemon of a test's repository ---------------------------------------------------


def ready(git_dir: str, fp: str) -> bool:
    """Whether the daemon of `git_dir` answers, is of this installation, and its watcher
    finished its first walk (or is off)."""
    from git_agentckpt.cli.commands_server import daemon_status

    status = daemon_status(git_dir)
    if status is None or status.get("fingerprint") != fp:
        return False
    watcher = status.get("watcher")
    return not isinstance(watcher, dict) or watcher.get("state") != "walking"


def ensure_daemon(worktree: str, git_dir: str, fp: str) -> None:
    """Start the daemon of `git_dir` unless it runs, and wait until it is `ready`."""
    if ready(git_dir, fp):
        return
    ZYGOTE.daemon(fp, git_dir, worktree)
    deadline = time.monotonic() + READY_SECONDS
    while not ready(git_dir, fp):
        if time.monotonic() > deadline:
            raise AssertionError(f"the daemon of {git_dir} did not get ready")
        time.sleep(0.01)


def daemon_pids(root: Path) -> list[int]:
    """Daemons serving a git dir under `root` (their argv names it), not their children."""
    prefix = os.fsencode(os.path.realpath(root)) + b"/"
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        ours = len(argv) >= 4 and any(b"git_agentckpt" in a and b"server" in a for a in argv)
        if ours and argv[-3].startswith(prefix) and stat[0] != b"Z":
            found[int(entry.name)] = int(stat[1])
    return [pid for pid, parent in found.items() if parent not in found]


def stop_daemons(root: Path, timeout: float = 10.0) -> None:
    """End every daemon the test started: the zygote's, and those `git-ckpt` started under
    `root` (SIGTERM: a daemon lets its running calls finish), then wait for them."""
    ZYGOTE.stop_all()
    pids = daemon_pids(root)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        time.sleep(0.005)
        pids = daemon_pids(root)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
