"""Checkpoint objects are packed as a task goes: the loose objects stay bounded, and every
checkpoint stays readable and restorable (`git fsck` clean)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

from git_agentckpt.git.packing import PACK_AT


def loose_objects(repo: Path) -> int:
    objects = repo / ".git" / "objects"
    return sum(
        len(os.listdir(objects / d))
        for d in os.listdir(objects)
        if len(d) == 2 and (objects / d).is_dir()
    )


def content(i: int, k: int) -> str:
    return f"checkpoint {i} file {k}\n" + f"line {i}-{k}\n" * (k + 1)


def long_task(repo: Path, n: int) -> tuple[list[dict[str, object]], int]:
    """`n` checkpoints of 3 changed files and 2 events each: the checkpoints, and the
    most loose objects seen after any of them."""
    ckpt(repo, "task", "start", "t", "--goal", "a long task")
    made = []
    most = 0
    for i in range(n):
        for k in range(3):
            write(repo / "work" / f"f{k}.txt", content(i, k))
        ckpt(repo, "event", "t", "--type", "tool.call", "--json", '{"input": "step"}')
        ckpt(repo, "event", "t", "--type", "tool.call", "--json", '{"input": "step 2"}')
        made.append(ckpt_json(repo, "create", "-t", "t", "-m", f"c{i}"))
        most = max(most, loose_objects(repo))
    return made, most


def test_loose_objects_stay_bounded_and_every_checkpoint_restores(repo: Path) -> None:
    made, most = long_task(repo, 60)
    # one checkpoint here writes ~14 objects (3 blobs, trees, commit, notes, events)
    assert most < PACK_AT + 60, most
    assert len(list((repo / ".git" / "objects" / "pack").glob("*.pack"))) >= 2
    fsck = subprocess.run(
        ["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    listed = ckpt_json(repo, "list", "t")
    assert len(listed) == 61  # the task start and the 60
    for i in (0, 17, 42, 59):
        commit = str(made[i]["commit"])
        assert git(repo, "cat-file", "-t", commit) == "commit"
        ckpt(repo, "restore", commit)
        for k in range(3):
            assert (repo / "work" / f"f{k}.txt").read_text() == content(i, k)
    assert git(repo, "diff", "--cached", "--name-only") == ""  # the user's index untouched


def test_packing_can_be_turned_off(repo: Path) -> None:
    git(repo, "config", "ckpt.packObjects", "false")
    _, most = long_task(repo, 15)
    assert most > PACK_AT  # each checkpoint's objects stay loose until a gc
    assert loose_objects(repo) == most
    assert not list((repo / ".git" / "objects" / "pack").glob("*.pack"))


def test_a_task_that_only_logs_events_stays_bounded_too(repo: Path) -> None:
    import git_agentckpt
    from git_agentckpt.store.workspace import EVENTS_PER_PACK_CHECK

    ckpt(repo, "task", "start", "t", "--goal", "only events")
    ck = git_agentckpt.open(str(repo))
    n = 2 * EVENTS_PER_PACK_CHECK + 50
    for i in range(n):  # one commit (one loose object) per event
        ck.event("t", "tool.call", {"input": f"call {i}"})
    assert loose_objects(repo) < EVENTS_PER_PACK_CHECK
    logged = ckpt(repo, "log", "t", "--json").stdout.splitlines()  # JSON Lines
    assert len(logged) >= n


def test_in_the_daemon_packing_runs_after_the_answer(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A call the daemon serves answers first; its loose objects are packed afterwards by
    a detached process of its own (`after_reply.py`), and the repository stays sound."""
    from daemon_helpers import ok, running_status, serving, wait_for

    served = serving(monkeypatch, tmp_path)
    next(served)
    try:
        ok(repo, "init")
        ok(repo, "daemon", "start")
        ok(repo, "task", "start", "t", "--goal", "packed after the answer")
        git(repo, "config", "ckpt.packObjects", "false")  # gather loose objects first
        for i in range(20):
            for k in range(3):
                write(repo / "work" / f"f{k}.txt", content(i, k))
            ok(repo, "create", "-t", "t", "-m", f"c{i}")
        gathered = loose_objects(repo)
        assert gathered > PACK_AT + 64  # well above: the packer estimates from 1 directory in 8
        served_before = running_status(repo)["served"]
        git(repo, "config", "ckpt.packObjects", "true")
        write(repo / "work" / "last.txt", "the last one\n")
        ok(repo, "create", "-t", "t", "-m", "last")
        assert running_status(repo)["served"] > served_before  # the daemon ran it
        wait_for(lambda: loose_objects(repo) < 20, "the loose objects to be packed")
        assert list((repo / ".git" / "objects" / "pack").glob("*.pack"))
        fsck = subprocess.run(
            ["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
        )
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    finally:
        with contextlib.suppress(StopIteration):
            next(served)


def test_deferred_work_runs_at_once_outside_the_daemon() -> None:
    from git_agentckpt import after_reply

    ran: list[int] = []
    after_reply.later(lambda: ran.append(1))
    assert ran == [1]  # a process of its own: now
    after_reply.defer_in_this_process()
    try:
        after_reply.later(lambda: ran.append(2))
        after_reply.later(lambda: 1 / 0)  # an error stays the work's own
        assert ran == [1]
        assert after_reply.run_queued() == 2
        assert ran == [1, 2]
    finally:
        after_reply.stop_deferring()
