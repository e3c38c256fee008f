"""git's own maintenance beside checkpoints (issue 26 item 8), done by plain git.

- a concurrent `git repack -a -d` (or auto-gc) removes the fan-out directory a loose
  object is being renamed into: the write is made again, never exit 70;
- a concurrent `git gc --prune=now` never leaves a ref at a pruned object: a checkpoint's
  objects are in a kept pack until its transaction moved the refs, what the transaction
  names is checked right before it, and a snapshot whose objects went is taken again;
- the tree the private index names (the last snapshot, checkpointed or not) stays
  reachable (`refs/ckpt-index/<work tree>`): `git gc --prune=now` keeps its blobs;
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, settle, write

from git_agentckpt import crashpoint
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store import checkpoints


@contextmanager
def looping(repo: Path, *argv: str) -> Iterator[None]:
    """`git argv…` run again and again in `repo` while inside: maintenance beside us."""
    loop = 'while :; do git "$@" >/dev/null 2>&1; done'
    proc = subprocess.Popen(["bash", "-c", loop, "loop", *argv], cwd=repo, start_new_session=True)
    try:
        time.sleep(0.2)  # its first run is under way
        yield
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def fsck(repo: Path) -> None:
    proc = subprocess.run(
        ["git", "fsck", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "missing" not in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )


def round_of_work(repo: Path, n: int) -> None:
    """A changed file, a new one, a checkpoint."""
    write(repo / "src" / "app.py", f"print({n})\n")
    write(repo / "new" / f"f{n}.txt", f"new file {n}\n")
    ckpt(repo, "create", "-t", "t", "-m", f"round {n}")


@pytest.mark.mode("once", reason="object writes of the git layer, no git ckpt command")
def test_a_concurrent_repack_never_fails_a_write(repo: Path) -> None:
    """`git repack -a -d` in a loop beside loose object writes (an event's commit, a
    blob outside a checkpoint). Each repack ends with `prune-packed`, which removes the
    fan-out directories it empties; libgit2 makes the directory of a loose object, then
    renames the object into it: one removed in between failed the write with exit 70
    ("failed to rename lockfile"). `core.fsyncObjectFiles` (libgit2 then syncs the
    object before the rename) widens that window, as a slow disk does."""
    git(repo, "config", "core.fsyncObjectFiles", "true")
    r = GitRepo.discover(str(repo))
    written: list[str] = []
    with looping(repo, "repack", "-a", "-d", "-q"):
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:
            written.append(r.write_blob(b"beside a repack %d\n" % len(written)))
    assert len(written) > 50
    missing = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=repo,
        input="\n".join(written) + "\n",
        capture_output=True,
        text=True,
    ).stdout
    assert "missing" not in missing


def test_gc_prune_now_beside_checkpoints_leaves_every_ref_whole(repo: Path, long_run: bool) -> None:
    """`git gc --prune=now` in a loop beside checkpoints: the refs of the task and
    `refs/notes/agent/state` were left at pruned objects (the notes lost). Every
    checkpoint now lands whole, with its note, and `git fsck` finds nothing missing."""
    ckpt(repo, "task", "start", "t", "--goal", "beside gc")
    rounds = 40 if long_run else 5
    with looping(repo, "gc", "-q", "--prune=now"):
        for n in range(rounds):
            round_of_work(repo, n)
    settle(repo)
    fsck(repo)
    listed = ckpt_json(repo, "list", "t")
    assert len(listed) == rounds + 1
    for item in listed:  # every checkpoint's state note is there
        note = git(repo, "notes", "--ref=agent/state", "show", item["commit"])
        assert json.loads(note)["goal"] == "beside gc"
    assert ckpt_json(repo, "task", "show", "t")["goal"] == "beside gc"
    assert git(repo, "show", "refs/agent/checkpoints/t:src/app.py") == f"print({rounds - 1})"


def test_the_tree_the_private_index_names_stays_reachable(repo: Path) -> None:
    """A snapshot no checkpoint took (`check`) wrote a blob that only the private index
    names; `git gc --prune=now` pruned it, and the next checkpoint reused it unhashed
    (exit 0, then `fsck: missing blob`; through the daemon, exit 70). The private
    index's tree is kept reachable by `refs/ckpt-index/main`."""
    ckpt(repo, "task", "start", "t", "--goal", "pinned")
    ckpt(repo, "create", "-t", "t", "-m", "first")
    write(repo / "fresh.txt", "only the private index names me\n")
    blob = git(repo, "hash-object", "fresh.txt")
    ckpt(repo, "check")
    settle(repo)
    git(repo, "gc", "-q", "--prune=now")
    ckpt(repo, "create", "-t", "t", "-m", "after gc")
    assert git(repo, "rev-parse", "refs/agent/checkpoints/t:fresh.txt") == blob
    fsck(repo)
    assert git(repo, "rev-parse", "refs/ckpt-index/main:fresh.txt") == blob


@pytest.mark.mode("inline", reason="runs git at the instant before the transaction, patched here")
def test_objects_pruned_right_before_the_transaction_are_written_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the instant before a checkpoint's transaction, plain git drops the pin and
    prunes (`git update-ref -d refs/ckpt-index/main`, `git gc --prune=now`): the new
    blob of the snapshot is gone. The check right before the transaction finds it
    missing; the snapshot is taken again (its private index seeded afresh) and the
    checkpoint lands whole."""
    ckpt(repo, "task", "start", "t", "--goal", "pruned")
    write(repo / "late.txt", "pruned before the transaction\n")
    blob = git(repo, "hash-object", "late.txt")
    real = crashpoint.crash_point
    pruned: list[bool] = []

    def prune_first_time(name: str) -> None:
        if name == "checkpoint.objects" and not pruned:
            pruned.append(True)
            git(repo, "update-ref", "-d", "refs/ckpt-index/main")
            git(repo, "gc", "-q", "--prune=now")
            assert subprocess.run(["git", "cat-file", "-e", blob], cwd=repo).returncode != 0
        real(name)

    monkeypatch.setattr(checkpoints, "crash_point", prune_first_time)
    ckpt(repo, "create", "-t", "t", "-m", "raced")
    assert pruned == [True]
    assert git(repo, "rev-parse", "refs/agent/checkpoints/t:late.txt") == blob
    assert git(repo, "cat-file", "-t", blob) == "blob"
    fsck(repo)
