"""The daemon's read-ahead of the cache files (`store/warm_caches.py`,
`daemon/warm.py`) and the work a served call leaves for after its answer
(`after_reply.py`: the cache files written after the report, in the same child)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git
from daemon_helpers import ok, running_status, serving, wait_for
from helpers import ckpt, settle

import git_agentckpt
from git_agentckpt import after_reply, sealed
from git_agentckpt.api import Checkpointer
from git_agentckpt.model import NewEvent, dumps
from git_agentckpt.store import chain_cache, log_index, state_cache
from git_agentckpt.store.log_index import is_key_event, key_events
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.warm_caches import WarmCaches


def long_task(repo: Path, checkpoints: int = 4) -> Checkpointer:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    settle(repo)
    ck = git_agentckpt.open(str(repo))
    for i in range(checkpoints):
        ck.log.append(TaskName("t"), [NewEvent("tool.call", input={"i": i}, output="ok")])
        ck.create("t", message=f"c{i}", light=True)
    key_events(ck.log, TaskName("t"))  # both files written at the tips: the index
    chain_cache.cached_chain(ck.store, TaskName("t"))  # and the chain
    return ck


def forget() -> None:
    log_index._memo.clear()
    chain_cache._memo.clear()


def git_dir(repo: Path) -> str:
    return str(repo / ".git")


def test_refresh_reads_the_files_that_changed_and_reads_use_them(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a daemon does between calls: the files read into the memos, once each; a read
    then opens no file and gives what a read of the whole log gives."""
    ck = long_task(repo)
    t = TaskName("t")
    forget()
    warm = WarmCaches(git_dir(repo))
    assert warm.refresh() == 2  # the index and the chain
    assert warm.refresh() == 0  # nothing changed since
    assert warm.status() == {"files": 2, "reads": 2, "held": 2}

    def no_file(*_: object) -> None:
        raise AssertionError("a cache file was read: the memo should have answered")

    monkeypatch.setattr(log_index, "_load", no_file)
    monkeypatch.setattr(chain_cache, "_load", no_file)
    full = [dumps(e.to_json()) for e in ck.log.read(t) if is_key_event(e)]
    assert [dumps(e.to_json()) for e in key_events(ck.log, t)] == full
    chain = chain_cache.cached_chain(ck.store, t)
    assert [c.commit for c in chain] == [c.commit for c in ck.store.chain(t)]
    monkeypatch.undo()
    ck.log.append(t, [NewEvent("model.quota", data={"error": "quota"})])
    key_events(ck.log, t)  # the index extended and written again
    assert warm.refresh() == 1
    forget()
    warm.refresh()
    assert warm.refresh() == 0
    assert [e.type for e in key_events(ck.log, t)][-1] == "model.quota"


def test_a_memo_behind_the_refs_is_extended_not_trusted(repo: Path) -> None:
    """The daemon read the files before the log and the chain moved on: a read compares
    the memo's tip with the ref and adds what came after it."""
    ck = long_task(repo)
    t = TaskName("t")
    forget()
    WarmCaches(git_dir(repo)).refresh()
    held_tip = log_index._memo[log_index._path(ck.log, t)].tip
    # moved on by another process (its own memos are not ours)
    other = subprocess.run(
        [sys.executable, "-c", MOVE_ON, str(repo)], capture_output=True, text=True
    )
    assert other.returncode == 0, other.stderr
    assert git(repo, "rev-parse", "refs/agent/events/t") != held_tip
    full = [e.id for e in ck.log.read(t) if is_key_event(e)]
    assert [e.id for e in key_events(ck.log, t)] == full
    assert [c.commit for c in chain_cache.cached_chain(ck.store, t)] == [
        c.commit for c in ck.store.chain(t)
    ]


MOVE_ON = """
import sys, git_agentckpt
ck = git_agentckpt.open(sys.argv[1])
ck.event("t", "model.quota", {"error": "quota"})
ck.create("t", message="later", light=True)
"""


def test_a_file_under_another_tasks_name_or_damaged_is_not_held(repo: Path) -> None:
    """A file is held only when it reads back whole and holds the task its name is made
    from: one copied over another task's name, or edited, is left to the reader (which
    rebuilds it from the refs)."""
    ck = long_task(repo)
    t = TaskName("t")
    ckpt(repo, "task", "start", "u", "--goal", "another")
    settle(repo)  # u's own files, written after the answer
    index = log_index._path(ck.log, t)
    other = log_index._path(ck.log, TaskName("u"))
    shutil.copyfile(index, other)  # t's index under u's name
    chain = chain_cache._path(ck.store, t)
    raw = Path(chain).read_bytes()
    Path(chain).write_bytes(raw.replace(b'"c1"', b'"cX"', 1) if b'"c1"' in raw else raw[:-3])
    forget()
    warm = WarmCaches(git_dir(repo))
    warm.refresh()
    assert other not in log_index._memo
    assert index in log_index._memo
    assert chain not in chain_cache._memo
    # u's own chain, when the daemon's child brought it to tip after its answer, is sound
    u_chain = chain_cache._path(ck.store, TaskName("u"))
    assert warm.status()["held"] == 1 + os.path.exists(u_chain)
    forget()
    assert key_events(ck.log, TaskName("u")) == [
        e for e in ck.log.read(TaskName("u")) if is_key_event(e)
    ]


def test_deferred_cache_writes_are_read_back_then_written_once(repo: Path) -> None:
    """In a daemon child a cache file is written after the answer: until then this
    process reads what it would have written; then the last payload is written, once."""
    ck = long_task(repo)
    path = log_index._path(ck.log, TaskName("t"))
    before = sealed.read_sealed(path)
    after_reply.defer_in_this_process()
    try:
        sealed.write_sealed(path, '{"first":1}')
        sealed.write_sealed(path, '{"last":2}')
        assert sealed.read_sealed(path) == '{"last":2}'
        assert Path(path).read_text().endswith(before or "")  # the file is untouched
        assert after_reply.run_queued() == 1  # one job writes every pending file
        assert sealed.read_sealed(path) == '{"last":2}'
        assert Path(path).read_text().endswith('{"last":2}')
        assert not sealed._unwritten
    finally:
        after_reply.stop_deferring()
        sealed._unwritten.clear()


def test_reported_slots() -> None:
    from git_agentckpt.daemon.child import ReportedSlots

    slots = ReportedSlots(size=2)
    a, b = slots.take(), slots.take()
    assert sorted((a, b)) == [0, 1] and slots.take() == -1  # none left
    assert not slots.reported(a)
    slots.mark(a)
    assert slots.reported(a) and not slots.reported(b) and not slots.reported(-1)
    slots.give_back(a)
    assert slots.take() == a and not slots.reported(a)  # cleared for its next child


pytestmark = pytest.mark.mode("daemon", reason="tests of the daemon: they turn it on themselves")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from serving(monkeypatch, tmp_path)


def test_a_served_call_writes_its_caches_after_its_answer_and_the_daemon_reads_them(
    repo: Path, served: None
) -> None:
    """Through the daemon: the caller has its answer, the child then writes the cache
    files (its client has hung up: it is not killed for it), and the daemon reads them
    for its next children."""
    ok(repo, "init")
    ok(repo, "daemon", "start")
    ok(repo, "task", "start", "t", "--goal", "served")
    for i in range(3):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
        ok(repo, "create", "-t", "t", "-m", f"c{i}")
    ck = git_agentckpt.open(str(repo))
    index = log_index._path(ck.log, TaskName("t"))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(index)  # the resume must write it again: after its answer
    out = json.loads(ok(repo, "resume", "t", "--json"))
    assert out["outcome"] == "ready"
    tip = git(repo, "rev-parse", "refs/agent/events/t")

    def caches_at_tip() -> bool:
        # written after the answer, at the tip the call left (`warm_caches.after_append`
        # brings them there: the index first, the state cache in a later write)
        raw = sealed.read_sealed(index)
        state = state_cache.StateCache(str(repo / ".git")).load("t")
        index_tip = raw is not None and json.loads(raw)["tip"] == tip
        return index_tip and state is not None and state.key.events == tip

    wait_for(caches_at_tip, "the index and the state cache to be written after the answer")
    caches = wait_for(
        lambda: (c := running_status(repo).get("caches")) and c["held"] >= 2 and c,
        "the daemon to read the cache files",
    )
    assert caches["files"] >= 2
    # and a resume it serves now gives what a resume in a process of its own gives
    served_brief = json.loads(ok(repo, "resume", "t", "--json"))
    env = dict(os.environ, GIT_CKPT_DAEMON="off")
    own = json.loads(ok(repo, "resume", "t", "--json", env=env))
    for key in ("outcome", "exit"):
        assert served_brief[key] == own[key]
    assert served_brief["locate"]["start"] == own["locate"]["start"]
