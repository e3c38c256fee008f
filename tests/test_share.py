"""Sharing the audit trail between clones: `git ckpt fetch|push` (design section 6)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json

from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store.share import _union_trees

GIT_CKPT = os.path.join(os.path.dirname(sys.executable), "git-ckpt")


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote with one commit on main, and two clones of it (a, b)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    (seed / "README.md").write_text("shared\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "initial")
    git(seed, "push", "-q", "origin", "HEAD:refs/heads/main")
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(clone))
    return remote, a, b


def events(repo: Path, task: str) -> list[dict[str, Any]]:
    out = ckpt(repo, "log", task, "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


def note(repo: Path, text: str, task: str = "t") -> str:
    return str(
        ckpt(repo, "event", task, "--type", "note", "--json", json.dumps({"n": text})).stdout
    )


def notes_of(repo: Path, task: str = "t") -> list[str]:
    return [e["data"]["n"] for e in events(repo, task) if e["type"] == "note"]


def test_two_clones_share_their_tasks_and_notes(clones: tuple[Path, Path, Path]) -> None:
    remote, a, b = clones
    ckpt(a, "task", "start", "ta", "--goal", "A's work")
    pushed = ckpt_json(a, "push")
    assert {p["ref"] for p in pushed["pushed"]} == {
        "refs/agent/checkpoints/ta",
        "refs/agent/events/ta",
        "refs/notes/agent/state",
    }
    ckpt(b, "task", "start", "tb", "--goal", "B's work")
    result = ckpt_json(b, "push")  # B's state notes diverged from A's: merged, then pushed
    actions = {r["ref"]: r["action"] for r in result["fetched"]}
    assert actions["refs/notes/agent/state"] == "merged"
    assert actions["refs/agent/checkpoints/ta"] == "created"
    ckpt(a, "fetch")
    for clone in (a, b):
        for task, goal in (("ta", "A's work"), ("tb", "B's work")):
            assert ckpt_json(clone, "task", "show", task)["goal"] == goal
    for ref in ("refs/agent/checkpoints/tb", "refs/notes/agent/state", "refs/agent/events/ta"):
        assert git(a, "rev-parse", ref) == git(b, "rev-parse", ref) == git(remote, "rev-parse", ref)
    assert len(git(a, "notes", "--ref", "agent/state", "list").splitlines()) == 2


def test_diverged_event_logs_are_united_without_loss(clones: tuple[Path, Path, Path]) -> None:
    _, a, b = clones
    ckpt(a, "task", "start", "t", "--goal", "shared task")
    ckpt(a, "push")
    ckpt(b, "fetch")
    for i in range(3):  # both write the same task's log while apart
        note(a, f"a{i}")
        note(b, f"b{i}")
    ckpt(b, "push")
    merged = ckpt_json(a, "push")
    by_ref = {r["ref"]: r for r in merged["fetched"]}
    assert by_ref["refs/agent/events/t"] == {
        "ref": "refs/agent/events/t",
        "action": "merged",
        "detail": "3 event(s)",
        "local": False,
    }
    ckpt(b, "fetch")
    assert git(a, "rev-parse", "refs/agent/events/t") == git(b, "rev-parse", "refs/agent/events/t")
    for clone in (a, b):
        seen = events(clone, "t")
        ids = [e["id"] for e in seen]
        assert len(ids) == len(set(ids))
        assert sorted(notes_of(clone)) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    last = max(e["seq"] for e in events(a, "t"))
    note(a, "after")
    assert events(a, "t")[-1]["seq"] == last + 1  # numbering goes on past both sides


def test_merging_back_and_forth_never_duplicates(clones: tuple[Path, Path, Path]) -> None:
    _, a, b = clones
    ckpt(a, "task", "start", "t", "--goal", "ping pong")
    ckpt(a, "push")
    ckpt(b, "fetch")
    written = []
    for round_ in range(4):
        for clone, name in ((a, "a"), (b, "b")):
            note(clone, f"{name}{round_}")
            written.append(f"{name}{round_}")
            ckpt(clone, "push")
    ckpt(a, "fetch")
    for clone in (a, b):
        ids = [e["id"] for e in events(clone, "t")]
        assert len(ids) == len(set(ids))
        assert sorted(notes_of(clone)) == sorted(written)


def test_diverged_checkpoint_chains_are_kept_and_reported(
    clones: tuple[Path, Path, Path],
) -> None:
    remote, a, b = clones
    ckpt(a, "task", "start", "t", "--goal", "one task, two writers")
    ckpt(a, "push")
    ckpt(b, "fetch")
    (a / "a.txt").write_text("a\n")
    (b / "b.txt").write_text("b\n")
    ours_a = ckpt_json(a, "create", "-t", "t", "-m", "from a")["commit"]
    ckpt(a, "push")
    ours_b = ckpt_json(b, "create", "-t", "t", "-m", "from b")["commit"]
    result = ckpt(b, "push", "--json", ok=False)
    assert result.exit_code == 5
    assert "refs/agent/checkpoints/t diverged" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["blocked"] == ["refs/agent/checkpoints/t"]
    # everything else went through: the remote has both sides' events and notes
    assert git(remote, "rev-parse", "refs/agent/checkpoints/t") == ours_a
    assert git(b, "rev-parse", "refs/agent/checkpoints/t") == ours_b
    kept = doc["mirror"] + "agent/checkpoints/t"
    assert git(b, "rev-parse", kept) == ours_a
    ckpt(a, "fetch")
    logged = events(a, "t")
    prepared = {e["links"].get("checkpoint") for e in logged if e["type"] == "checkpoint.prepare"}
    assert {ours_a, ours_b} <= prepared


def test_push_to_a_guarded_remote(clones: tuple[Path, Path, Path]) -> None:
    remote, a, b = clones
    ckpt(remote, "hooks", "install")
    ckpt(a, "task", "start", "t", "--goal", "guarded")
    ckpt(a, "push")
    ckpt(b, "fetch")
    note(a, "a")
    note(b, "b")
    ckpt(a, "push")
    ckpt(b, "push")  # a merge commit moves the remote's log forward: the guard allows it
    (b / "x.txt").write_text("x\n")
    made = ckpt_json(b, "create", "-t", "t")
    ckpt(b, "push")
    assert git(remote, "rev-parse", "refs/agent/checkpoints/t") == made["commit"]


def test_a_hook_that_declines_is_said_at_once_not_retried_as_a_race(
    clones: tuple[Path, Path, Path],
) -> None:
    remote, a, _ = clones
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'audit refs are frozen this week' >&2\nexit 1\n")
    hook.chmod(0o755)
    ckpt(a, "task", "start", "t", "--goal", "g")
    result = ckpt(a, "push", "--json", ok=False)
    assert result.exit_code == 1
    assert "was refused" in result.stderr and "audit refs are frozen this week" in result.stderr
    assert "kept moving" not in result.stderr
    assert git(remote, "for-each-ref", "refs/agent/") == ""


def test_a_missing_remote_is_one_clear_error(repo: Path) -> None:
    result = ckpt(repo, "fetch", "nowhere", ok=False)
    assert result.exit_code == 1
    assert "git fetch nowhere failed" in result.stderr
    assert result.stderr.count("\n") == 1


def test_union_of_trees_keeps_ours_on_conflict(repo: Path) -> None:
    g = GitRepo.discover(str(repo))
    blob = {name: g.write_blob(name.encode()) for name in ("x", "y", "z", "w")}
    sub_a = g.write_tree({"k1": (blob["x"], 0o100644)})
    sub_b = g.write_tree({"k1": (blob["y"], 0o100644), "k2": (blob["z"], 0o100644)})
    ours = g.write_tree({"ab": (sub_a, 0o040000), "only-ours": (blob["w"], 0o100644)})
    theirs = g.write_tree({"ab": (sub_b, 0o040000), "cd": (sub_b, 0o040000)})
    merged, conflicts = _union_trees(g, ours, theirs)
    assert conflicts == 1  # ab/k1: ours kept
    top = g.tree_entries(merged)
    assert set(top) == {"ab", "cd", "only-ours"}
    inner = g.tree_entries(top["ab"][0])
    assert inner["k1"][0] == blob["x"] and inner["k2"][0] == blob["z"]
    assert _union_trees(g, ours, ours) == (ours, 0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(clones: tuple[Path, Path, Path]) -> Iterator[str]:
    """`git daemon` on 127.0.0.1 serving the remote (push enabled); its git:// URL."""
    remote = clones[0]
    port = _free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={remote.parent}",
            str(remote.parent),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/{remote.name}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_share_over_git_daemon_with_concurrent_pushes(
    clones: tuple[Path, Path, Path], daemon: str
) -> None:
    remote, a, b = clones
    ckpt(a, "task", "start", "t", "--goal", "over the network")
    ckpt(a, "push", daemon)
    ckpt(b, "fetch", daemon)
    for i in range(3):
        note(a, f"a{i}")
        note(b, f"b{i}")

    def push(clone: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [GIT_CKPT, "push", daemon, "--json"],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=120,
        )

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(push, (a, b)))
    for proc in done:
        assert proc.returncode == 0, proc.stderr
    ckpt(a, "push", daemon)  # whoever pushed first has not seen the other side yet
    ckpt(b, "fetch", daemon)
    tip = git(remote, "rev-parse", "refs/agent/events/t")
    assert git(a, "rev-parse", "refs/agent/events/t") == tip
    assert git(b, "rev-parse", "refs/agent/events/t") == tip
    assert sorted(notes_of(b)) == ["a0", "a1", "a2", "b0", "b1", "b2"]


def test_a_task_name_clash_is_refused_not_fatal(clones: tuple[Path, Path, Path]) -> None:
    """Task `x` on one clone and `x/y` on the other cannot both be refs here."""
    _, a, b = clones
    ckpt(a, "task", "start", "x", "--goal", "a's")
    ckpt(a, "task", "start", "other", "--goal", "fine")
    ckpt(a, "push")
    ckpt(b, "task", "start", "x/y", "--goal", "b's")
    result = ckpt(b, "fetch", "--json", ok=False)
    assert result.exit_code == 5
    doc = json.loads(result.stdout)
    actions = {r["ref"]: r["action"] for r in doc["fetched"]}
    assert actions["refs/agent/events/x"] == "refused"
    assert actions["refs/agent/events/other"] == "created"  # the rest still came in
    assert ckpt_json(b, "task", "show", "other")["goal"] == "fine"
