"""Helpers for the tests of the per-worktree daemon (daemon/server.py, cli/launch.py).

Calls go through the installed `git-ckpt` script, as agents and hooks make them.
The `served` fixture (`serving`) turns the daemon on for the test (GIT_CKPT_SERVER=auto) and
stops every daemon of the test's directories afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

GIT_CKPT = os.path.join(os.path.dirname(sys.executable), "git-ckpt")


def run(
    cwd: Path,
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    **kw: Any,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GIT_CKPT, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        timeout=60,
        **kw,
    )


def ok(cwd: Path, *args: str, **kw: Any) -> str:
    proc = run(cwd, *args, **kw)
    assert proc.returncode == 0, f"git ckpt {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def status(repo: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`git ckpt daemon status --json` in `repo`."""
    result: dict[str, Any] = json.loads(ok(repo, "daemon", "status", "--json", env=env))
    return result


def wait_for(pred: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def running_status(repo: Path) -> dict[str, Any]:
    result: dict[str, Any] = wait_for(
        lambda: (s := status(repo))["running"] and s, "the daemon to answer"
    )
    return result


def watching(repo: Path) -> None:
    """Wait for the work tree's daemon and the end of its watcher's first walk."""
    running_status(repo)
    wait_for(
        lambda: status(repo).get("watcher", {}).get("state") == "watching",
        "the watcher's first walk",
    )


def watch_log(repo: Path) -> str:
    path = repo / ".git" / "agent" / "watch.log"
    return path.read_text() if path.exists() else ""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0): read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def daemon_pids(root: Path) -> list[int]:
    """Daemon processes serving a git dir under `root` (their argv names it)."""
    prefix = os.fsencode(os.path.realpath(root))
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = any(b"git_agentckpt.daemon.server" in arg for arg in argv) and len(argv) >= 4
        if ours and argv[-3].startswith(prefix) and not gone(int(entry.name)):
            found.append(int(entry.name))
    # a daemon's forked children (its calls, its spare) carry its argv: not daemons
    return [pid for pid in found if parent_of(pid) not in found]


def parent_of(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def daemon_git_dirs(root: Path) -> set[str]:
    dirs = set()
    for pid in daemon_pids(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 4:  # an ending process shows none
            dirs.add(os.fsdecode(argv[-3]))
    return dirs


def stop_all(root: Path) -> None:
    """Stop every daemon under `root`; a stopped (SIGSTOP) one is resumed first."""
    from git_agentckpt.daemon import client as launch

    deadline = time.monotonic() + 30
    while daemon_pids(root) and time.monotonic() < deadline:
        for pid in daemon_pids(root):
            os.kill(pid, signal.SIGCONT)
        for git_dir in daemon_git_dirs(root):
            launch.control(git_dir, "stop", 2.0)
        time.sleep(0.1)
    left = daemon_pids(root)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"daemons still running after stop: {left}"


def serving(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The body of each test module's `served` fixture."""
    monkeypatch.setenv("GIT_CKPT_DAEMON", "auto")  # whatever the suite's mode (tests/modes.py)
    monkeypatch.setenv("GIT_CKPT_SERVER", "auto")
    monkeypatch.setenv("GIT_CKPT_SERVER_IDLE", "120")
    monkeypatch.setenv("GIT_CKPT_DAEMON_TIMEOUT", "10")  # a loaded machine is no reason to fail
    yield
    stop_all(tmp_path)


def blocked_event(repo: Path, **kw: Any) -> subprocess.Popen[str]:
    """`git ckpt event … --json -` waiting for its stdin: a call that is still running."""
    return subprocess.Popen(
        [GIT_CKPT, "event", "t1", "--type", "note", "--json", "-"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def blocked_child(repo: Path) -> int:
    """The pid of the one call the daemon is running (waiting for its stdin)."""
    pids: list[int] = wait_for(lambda: status(repo).get("calls"), "a running call")
    assert len(pids) == 1
    return pids[0]


def log(repo: Path) -> list[dict[str, Any]]:
    """`git ckpt log t1 --json`: one event per line."""
    return [json.loads(line) for line in ok(repo, "log", "t1", "--json").splitlines()]


def notes(repo: Path) -> list[dict[str, Any]]:
    return [e for e in log(repo) if e["type"] == "note"]
