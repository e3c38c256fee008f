"""The daemon's spare child (`cli/daemon_spare.py`): forked between calls, handed the
next call whole; it must run the call exactly as a child forked for it would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import daemon_helpers as dh
import pytest
from conftest import git
from test_private_index import checkpoint_tree, listing, plumbing_tree

from git_agentckpt.cli import launch
from git_agentckpt.git.watcher import MAX_SYNC, TreeWatcher


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from dh.serving(monkeypatch, tmp_path)


def spare_pid(repo: Path) -> int:
    """The daemon's spare child, once it has one."""
    pid: int = dh.wait_for(lambda: dh.status(repo).get("spare", {}).get("pid"), "the spare child")
    return pid


def via_spare(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """`git ckpt ARGS`, checked to have been run by the spare that was waiting."""
    pid = spare_pid(repo)
    used = dh.status(repo)["spare"]["used"]
    out = dh.ok(repo, *args, env=env)
    assert dh.status(repo)["spare"]["used"] == used + 1
    dh.wait_for(lambda: dh.gone(pid), "the spare that ran the call to end")
    return out


def test_a_call_is_handed_to_the_waiting_spare(repo: Path, served: None) -> None:
    dh.ok(repo, "daemon", "start")
    first = spare_pid(repo)
    via_spare(repo, "init")
    assert (repo / ".agent" / "ckpt.toml").exists()
    second = spare_pid(repo)  # a new one, forked once the call ended
    assert second != first
    assert dh.status(repo)["spare"]["forked"] >= 2
    assert dh.status(repo)["served"] == 1
    assert dh.status(repo)["spare"]["lost"] == 0


def test_a_spare_sees_the_changes_made_after_it_was_forked(repo: Path, served: None) -> None:
    """The spare was forked before these edits; the watcher's changes since reach it with
    the call (`TreeWatcher.changes_after`), so the checkpoint looks only at them and still
    gives the tree a full scan gives. Without them it would find "nothing changed"."""
    dh.ok(repo, "init")
    dh.watching(repo)
    dh.ok(repo, "task", "start", "t", "--goal", "spare")
    dh.ok(repo, "create", "-t", "t", "-m", "first: a full scan")
    scans = dh.watch_log(repo).count("full scan:")
    for i in range(3):
        spare_pid(repo)  # forked before the edits below
        (repo / "src" / f"new{i}.py").write_text(f"print({i})\n")
        (repo / "src" / "app.py").write_text(f"print('changed {i}')\n")
        (repo / "README.md").unlink(missing_ok=True)
        via_spare(repo, "create", "-t", "t", "-m", f"change {i}")
        assert listing(repo, checkpoint_tree(repo)) == listing(repo, plumbing_tree(repo))
    assert dh.watch_log(repo).count("full scan:") == scans  # the changes only
    assert any(line.endswith("\tsrc/new2.py") for line in listing(repo, checkpoint_tree(repo)))


def test_the_callers_environment_reaches_a_call_run_by_the_spare(repo: Path, served: None) -> None:
    """As `test_the_environment_of_the_daemon_never_reaches_a_call`, through the spare:
    forked long before the call, it still runs with the caller's environment, all of it
    and nothing else."""
    secret = "zebra-quokka-772"
    leaky = dict(os.environ, GIT_CKPT_TASK="x", ODD_API_TOKEN=secret)
    dh.ok(repo, "daemon", "start", env=leaky)
    via_spare(repo, "init")
    via_spare(repo, "task", "start", "t1", "--goal", "no leaks")
    (repo / "src" / "app.py").write_text("print('leak?')\n")
    made = via_spare(repo, "create", "-m", "no task named").strip()
    assert json.loads(dh.ok(repo, "show", "t1", "--json"))["checkpoint"]["id"] == made
    via_spare(repo, "event", "t1", "--type", "note", "--json", json.dumps({"value": secret}))
    assert [e["data"] for e in dh.notes(repo)] == [{"value": secret}]
    via_spare(repo, "create", "-m", "task x", env=dict(os.environ, GIT_CKPT_TASK="x"))
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/agent/checkpoints/x") != ""


def test_a_ctrl_c_reaches_a_call_run_by_the_spare(repo: Path, served: None) -> None:
    dh.ok(repo, "init")
    dh.ok(repo, "task", "start", "t1", "--goal", "interrupted")
    pid = spare_pid(repo)
    proc = dh.blocked_event(repo)
    assert dh.wait_for(lambda: dh.status(repo)["calls"], "the call to run") == [pid]
    proc.send_signal(signal.SIGINT)  # the client forwards it to the call
    proc.wait(timeout=30)  # stdin stays open: only the signal can end the call
    assert proc.stderr is not None and proc.stdin is not None
    err = proc.stderr.read()
    proc.stdin.close()
    assert proc.returncode == 130, err
    dh.wait_for(lambda: dh.gone(pid), "the interrupted call to end")
    assert dh.notes(repo) == []


def test_the_spare_ends_with_its_daemon(repo: Path, served: None, tmp_path: Path) -> None:
    dh.ok(repo, "daemon", "start")
    first = spare_pid(repo)
    dh.ok(repo, "daemon", "stop")
    dh.wait_for(lambda: dh.gone(first), "the spare to end with `daemon stop`")
    dh.ok(repo, "daemon", "start")
    second = spare_pid(repo)
    (daemon,) = dh.daemon_pids(tmp_path)
    os.kill(daemon, signal.SIGKILL)  # no goodbye: the spare sees its socket close
    dh.wait_for(lambda: dh.gone(second), "the spare to end after its daemon was killed")


def test_spare_off_forks_each_call(
    repo: Path, served: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CKPT_DAEMON_SPARE", "off")
    dh.ok(repo, "daemon", "start")
    dh.ok(repo, "init")
    dh.ok(repo, "list")
    spare: dict[str, Any] = dh.status(repo)["spare"]
    assert spare == {"pid": None, "forked": 0, "used": 0, "lost": 0}
    assert dh.status(repo)["served"] == 2


def test_a_call_too_big_to_hand_over_gets_a_child_forked_for_it(repo: Path, served: None) -> None:
    """A request larger than the spare's socket takes (an 800 KB environment here) cannot be
    handed over: the spare is retired and a child forked for the call, which sees it all."""
    dh.ok(repo, "daemon", "start")
    dh.ok(repo, "init")
    pid = spare_pid(repo)
    used = dh.status(repo)["spare"]["used"]
    padding = {f"PADDING_{i}": "x" * 100_000 for i in range(8)}  # 128 KiB each at most
    env = dict(os.environ, GIT_CKPT_TASK="big", **padding)
    dh.ok(repo, "task", "start", "big", "--goal", "a large environment", env=env)
    dh.ok(repo, "create", "-m", "from GIT_CKPT_TASK", env=env)
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/agent/checkpoints/big") != ""
    after = dh.status(repo)
    assert after["served"] == 3 and after["spare"]["used"] == used
    assert dh.gone(pid)


REFUSING_DAEMON = """
import sys
from git_agentckpt.cli import daemon_find, daemon_spare, server

git_dir, worktree = sys.argv[1:]

def attach(daemon):
    # a plug-in whose changes since the spare's fork are too many to send
    daemon.spares.syncs["too-much"] = daemon_spare.Sync(lambda: 0, lambda mark: None, print)

server.STARTUP_HOOKS.append(attach)
sys.exit(server.main([daemon_find.fingerprint(), git_dir, worktree]))
"""


def test_a_spare_that_cannot_catch_up_is_replaced_by_a_fork(repo: Path, served: None) -> None:
    real = os.path.realpath(repo)
    daemon = subprocess.Popen(
        [sys.executable, "-c", REFUSING_DAEMON, f"{real}/.git", real], stdin=subprocess.DEVNULL
    )
    try:
        pid = spare_pid(repo)
        dh.ok(repo, "init")
        assert (repo / ".agent" / "ckpt.toml").exists()
        after = dh.status(repo)
        assert after["served"] == 1 and after["spare"]["used"] == 0
        dh.wait_for(lambda: dh.gone(pid), "the spare that could not catch up to be retired")
    finally:
        launch.control(f"{real}/.git", "stop")
        daemon.wait(timeout=30)


def test_the_watcher_tells_a_spare_what_changed_since_its_fork(tmp_path: Path) -> None:
    seen = TreeWatcher(str(tmp_path), str(tmp_path))
    seen.seq, seen.ready, seen.changed = 7, True, {"a": 3, "b": 7}
    spare = TreeWatcher(str(tmp_path), str(tmp_path), watcher_id=seen.watcher_id)
    spare.seq, spare.ready, spare.changed = 7, True, {"a": 3, "b": 7}
    mark = seen.seq
    assert seen.changes_after(mark) == {
        "seq": 7,
        "full_before": 1,
        "disabled": "",
        "ready": True,
        "overflows": 0,
        "nested": [],
        "changed": {},
    }
    seen.changed.update({"b": 8, "c/d": 9})
    seen.seq, seen.overflows, seen.full_before = 10, 1, 10
    seen.nested.add("vendor/lib")
    update = seen.changes_after(mark)
    assert update is not None and update["changed"] == {"b": 8, "c/d": 9}
    spare.catch_up(json.loads(json.dumps(update)))  # it travels as JSON
    assert spare.view() == seen.view()
    assert seen.changes_after(11) is None  # a mark from the future: fork instead
    assert seen.changes_after("7") is None
    seen.changed.update({f"f{i}": 11 for i in range(MAX_SYNC + 1)})
    seen.seq = 11
    assert seen.changes_after(mark) is None  # too many to send: fork instead
