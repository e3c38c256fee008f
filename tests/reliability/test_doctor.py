"""Issue 9, item 5: a killed `git fetch` must not block sharing for good.

`git ckpt fetch`/`push` name the lock that blocks them and point at `git ckpt
doctor`, which removes lock and temporary files whose owner is provably gone
(no process has them open, no git process runs in the repository, older than a
few seconds) and keeps the others, saying why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt

GIT_CKPT = os.path.join(os.path.dirname(sys.executable), "git-ckpt")
LONG_AGO = 3 * 3600  # seconds: a lock this old is not being written


def age(path: Path, seconds: float = LONG_AGO) -> None:
    """Make `path` look `seconds` old (the doctor never removes what changed just now)."""
    past = time.time() - seconds
    os.utime(path, (past, past))


def wait_for(condition: Callable[[], bool], what: str, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def shared(tmp_path: Path, repo: Path) -> tuple[Path, Path]:
    """`repo` with a task, and a bare remote `origin` that already has its trail."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    ckpt(repo, "task", "start", "t", "--goal", "share it")
    ckpt(repo, "event", "t", "--type", "tool.call")
    ckpt(repo, "push")
    return repo, remote


def doctor(repo: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = ckpt(repo, "doctor", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


def actions(doc: dict[str, object]) -> dict[str, tuple[str, str]]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return {os.path.basename(f["path"]): (f["action"], f["reason"]) for f in findings}


@pytest.fixture
def holder() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes that hold a file open (`hold_open`), killed when the test ends."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


HOLD = "import sys; f = open(sys.argv[1], 'a'); print('ready', flush=True); sys.stdin.read()"


def hold_open(procs: list[subprocess.Popen[str]], path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_killed_fetch_blocks_until_doctor_removes_its_lock(shared: tuple[Path, Path]) -> None:
    """The real thing: `git fetch` killed while it holds a lock under refs/ckpt-remotes/."""
    repo, remote = shared
    other = remote.parent / "other"
    git(remote.parent, "clone", "-q", str(remote), str(other))
    ckpt(other, "fetch")  # a clone appends to a task it has (an unknown name is refused)
    ckpt(other, "event", "t", "--type", "tool.call")  # something new to fetch
    ckpt(other, "push")
    ready = remote.parent / "hook-ready"
    hook = repo / ".git" / "hooks" / "reference-transaction"
    # git runs this hook while it holds every lock of the transaction ("prepared")
    hook.write_text(
        f'#!/bin/sh\nif [ "$1" = prepared ]; then echo held > "{ready}"; sleep 600; fi\n'
    )
    hook.chmod(0o755)
    env = {**os.environ, "GIT_CKPT_SERVER": "off"}
    fetch = subprocess.Popen(
        [GIT_CKPT, "fetch"], cwd=repo, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(ready.exists, "git fetch to hold its locks")
    os.killpg(fetch.pid, signal.SIGKILL)
    fetch.wait()
    hook.unlink()
    mirror = repo / ".git" / "refs" / "ckpt-remotes" / "origin"
    locks = sorted(mirror.rglob("*.lock"))
    assert locks, "the killed fetch left no lock: nothing was reproduced"

    blocked = ckpt(repo, "fetch", ok=False)
    assert blocked.exit_code == 5
    line = blocked.stderr.strip()
    assert len(line.splitlines()) == 1 and "git ckpt doctor" in line
    assert any(str(lock) in line for lock in locks), line
    assert "URL" not in line  # not the misleading hint about the remote's address
    assert ckpt(repo, "push", ok=False).exit_code == 5

    young_status, young = doctor(repo)  # just killed: too young to be proven stale
    assert young_status == 1 and all(a == "kept" for a, _ in actions(young).values())
    assert all(lock.exists() for lock in locks)
    for lock in locks:
        age(lock)
    dry_status, dry = doctor(repo, "--dry-run")
    assert dry_status == 1
    assert {a for a, _ in actions(dry).values()} == {"would remove"}
    assert all(lock.exists() for lock in locks)
    status, done = doctor(repo)
    assert status == 0 and done["ok"] is True and done["removed"] == len(locks)
    assert not any(lock.exists() for lock in locks)

    fetched = ckpt(repo, "fetch")
    assert "refs/agent/events/t" in fetched.stdout
    ckpt(repo, "push")
    assert git(repo, "rev-parse", "refs/agent/events/t") == git(
        remote, "rev-parse", "refs/agent/events/t"
    )
    status, after = doctor(repo)
    assert status == 0 and after["findings"] == []


def test_a_lock_held_open_is_kept_and_one_left_by_a_killed_process_is_removed(
    repo: Path, holder: list[subprocess.Popen[str]]
) -> None:
    refs = repo / ".git" / "refs" / "agent" / "events"
    refs.mkdir(parents=True)
    held = refs / "held.lock"
    held.write_text("")
    proc = hold_open(holder, held)
    left = refs / "left.lock"
    killed = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(left)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert killed.stdout is not None and killed.stdout.readline().strip() == b"ready"
    killed.kill()
    killed.wait()
    for path in (held, left):
        age(path)

    status, doc = doctor(repo)
    found = actions(doc)
    assert status == 1 and doc["ok"] is False
    assert found["held.lock"][0] == "kept"
    assert f"open in process {proc.pid}" in found["held.lock"][1]
    assert found["left.lock"][0] == "removed"
    assert held.exists() and not left.exists()

    proc.kill()  # its owner is gone now: the next run removes it
    proc.wait()
    status, doc = doctor(repo)
    assert status == 0 and actions(doc) == {"held.lock": ("removed", actions(doc)["held.lock"][1])}
    assert not held.exists()


def test_a_running_git_command_keeps_every_lock(repo: Path) -> None:
    """git closes a lock file after writing it: only "no git runs here" proves it stale."""
    lock = repo / ".git" / "packed-refs.lock"
    lock.write_text("")
    age(lock)
    batch = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        status, doc = doctor(repo)
        action, reason = actions(doc)["packed-refs.lock"]
        assert status == 1 and action == "kept"
        assert f"process {batch.pid}" in reason and "git" in reason
    finally:
        batch.kill()
        batch.wait()
    assert doctor(repo)[0] == 0 and not lock.exists()


def test_temporary_object_files_and_the_private_index_lock(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    objects = repo / ".git" / "objects"
    old_tmp = objects / "ab" / "tmp_obj_Xy12Za"
    old_tmp.parent.mkdir(exist_ok=True)
    old_tmp.write_bytes(b"x" * 100)
    age(old_tmp)
    pack_tmp = objects / "pack" / "tmp_pack_Q1w2E3"
    pack_tmp.write_bytes(b"PACK")
    age(pack_tmp)
    young = objects / "tmp_object_git2_0123456789abcdef"
    young.write_bytes(b"y")
    index_lock = repo / ".git" / "agent" / "index.lock"
    index_lock.write_text("")
    age(index_lock)
    flock = repo / ".git" / "agent" / "index.flock"
    assert flock.exists()
    age(flock)

    status, doc = doctor(repo)
    found = actions(doc)
    assert found["tmp_obj_Xy12Za"][0] == "removed"
    assert found["tmp_pack_Q1w2E3"][0] == "removed"
    assert found["index.lock"][0] == "removed"
    assert found["tmp_object_git2_0123456789abcdef"][0] == "kept"
    assert "ago" in found["tmp_object_git2_0123456789abcdef"][1]
    assert "index.flock" not in found  # the kernel releases flocks: never touched
    assert status == 1 and flock.exists() and young.exists()
    assert not old_tmp.exists() and not pack_tmp.exists() and not index_lock.exists()
    ckpt(repo, "create", "-t", "t")  # the private index works after its lock went


def test_text_output_and_a_clean_repository(repo: Path) -> None:
    clean = ckpt(repo, "doctor")
    assert clean.exit_code == 0 and "no stale lock or temporary files" in clean.stdout
    lock = repo / ".git" / "config.lock"
    lock.write_text("")
    age(lock)
    dry = ckpt(repo, "doctor", "--dry-run", ok=False)
    assert dry.exit_code == 1
    assert "would remove" in dry.stdout and ".git/config.lock" in dry.stdout
    assert lock.exists()
    fixed = ckpt(repo, "doctor")
    assert "removed" in fixed.stdout and not lock.exists()


def test_a_stale_lock_on_a_remote_given_as_a_path(shared: tuple[Path, Path]) -> None:
    repo, remote = shared
    ckpt(repo, "event", "t", "--type", "tool.call")
    lock = remote / "refs" / "agent" / "events" / "t.lock"
    lock.write_text("")
    age(lock)
    blocked = ckpt(repo, "push", ok=False)
    assert blocked.exit_code == 5, blocked.stderr
    assert str(lock) in blocked.stderr and "doctor" in blocked.stderr
    assert "kept moving" not in blocked.stderr
    remote_doctor = ckpt(remote, "doctor")  # a bare repository
    assert "removed" in remote_doctor.stdout and not lock.exists()
    ckpt(repo, "push")
    assert git(repo, "rev-parse", "refs/agent/events/t") == git(
        remote, "rev-parse", "refs/agent/events/t"
    )
