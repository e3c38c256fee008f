"""The task-state cache (`.git/agent/state/`, store/state_cache.py): a warm read walks no
event, a read after new events walks only them, the cached state is always the state a
cold read computes, and the cache is never trusted over the refs (tampered, garbage,
another task's, a moved or rewound ref, concurrent writers)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, ckpt_json, forge_event, remote_and_clones, settle, walked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import git_agentckpt
from git_agentckpt.daemon import find as daemon_find
from git_agentckpt.model import JSON, NewEvent
from git_agentckpt.sealed import write_sealed
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import TaskView, read_task
from git_agentckpt.store.state_cache import StateCache

STEPS = ("s1:read", "s2:change", "s3:run")


def start(repo: Path, task: str = "t") -> None:
    ckpt(repo, "task", "start", task, "--goal", "g", *[a for s in STEPS for a in ("--step", s)])


def cache_dir(repo: Path) -> Path:
    return repo / ".git" / "agent" / "state"


def view(repo: Path, task: str = "t") -> TaskView:
    ck = git_agentckpt.open(str(repo))
    return read_task(ck.store, ck.log, TaskName(task))


def cold(repo: Path, task: str = "t") -> tuple[JSON, list[JSON]]:
    """The state computed with no cache at all (the files removed first)."""
    settle(repo)
    for f in cache_dir(repo).glob("*") if cache_dir(repo).is_dir() else ():
        f.unlink()
    v = view(repo, task)
    return v.state, [s.to_json() for s in v.skipped]


def warm(repo: Path, task: str = "t") -> tuple[JSON, list[JSON]]:
    settle(repo)  # what a served call writes after its answer is written
    v = view(repo, task)
    return v.state, [s.to_json() for s in v.skipped]


def calls(repo: Path, n: int, task: str = "t") -> None:
    log = git_agentckpt.open(str(repo)).log
    for i in range(n):
        log.append(TaskName(task), [NewEvent("tool.call", input={"i": i})])


def test_a_warm_read_walks_no_event_and_a_new_event_costs_one_step(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    calls(repo, 200)
    first = cold(repo)
    assert list(cache_dir(repo).glob("*.json")), "the read left no cache file"
    with walked() as seen:
        assert warm(repo) == first
    assert seen == []  # 200 tool calls since the tip, none read
    ckpt(repo, "step", "fail", "t", "s1")
    settle(repo)  # a served call brings the cache to its own tip after its answer
    calls(repo, 3)
    with walked() as seen:
        state, _ = warm(repo)
    # the 4 new commits and the cached tip, where the walk stops; a call the daemon
    # served brought the cache to its own tip after its answer: 3 and that tip
    assert len(seen) == (4 if daemon_find.enabled(os.environ) else 5)
    assert isinstance(state, dict) and state["steps"][0]["status"] == "failed"
    assert (state, _) == cold(repo)


def test_a_tampered_or_garbage_cache_is_ignored(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    truth = cold(repo)
    (path,) = cache_dir(repo).glob("*.json")
    head, payload = path.read_bytes().split(b"\n", 1)
    obj = json.loads(payload)
    obj["state"]["goal"] = "forged"
    # the same key, a forged state, the old digest: the digest no longer matches
    path.write_bytes(head + b"\n" + json.dumps(obj).encode())
    assert warm(repo) == truth
    for garbage in (b"", b"\x00\xff" * 100, head, b"git-ckpt sealed v2 00\n{}"):
        path.write_bytes(garbage)
        assert warm(repo) == truth
    # a whole file of another key (another task's log tip) is never used for this one
    start(repo, "u")
    settle(repo)  # a daemon writes its cache files after its answer
    (other,) = [p for p in cache_dir(repo).glob("*.json") if p != path]
    path.write_bytes(other.read_bytes())
    assert warm(repo) == truth and warm(repo, "u")[0]["task"] == "u"
    path.unlink()
    path.mkdir()  # not even a file: the read works, the cache is skipped
    assert warm(repo) == truth


def test_a_forged_cache_with_a_valid_seal_but_a_stale_key_is_ignored(repo: Path) -> None:
    """The seal only proves who wrote the file: its key is checked against the refs."""
    start(repo)
    cold(repo)
    (path,) = cache_dir(repo).glob("*.json")
    ckpt(repo, "step", "start", "t", "s1")  # the log moves on: the file's key is stale
    obj = json.loads(path.read_bytes().split(b"\n", 1)[1])
    obj["state"]["goal"] = "forged"
    obj["key"]["events"] = "f" * 40  # a log tip that is not the ref's, nor on its chain
    write_sealed(str(path), json.dumps(obj))  # sealed with this user's own key
    state, _ = warm(repo)
    assert state is not None and state["goal"] == "g" and state["current_step"] == "s1"


def reseal_without_the_key(path: Path, old: bytes, new: bytes) -> None:
    """Edit a cache file and seal it again as anyone can: its header's words, then the
    sha256 of the payload (the seal of format v1; issue 26 item 6)."""
    head, payload = path.read_bytes().split(b"\n", 1)
    assert old in payload
    payload = payload.replace(old, new)
    words = head.rsplit(b" ", 1)[0]
    path.write_bytes(words + b" " + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def test_a_cache_edited_and_sealed_again_is_never_shown(repo: Path) -> None:
    """Issue 26 item 6: the goal edited in `.git/agent/state/*.json` and the file sealed
    again by hand was shown by `task show` and `resume --brief-only` (the brief a
    compaction hook gives the agent). The seal is keyed with a secret outside the
    repository: such a file is ignored and the state read from the refs."""
    start(repo)
    ckpt(repo, "create", "-t", "t", "-m", "c1")
    ckpt(repo, "step", "start", "t", "s1")
    assert ckpt_json(repo, "task", "show", "t")["goal"] == "g"
    settle(repo)  # the cache files a served call writes after its answer
    (path,) = cache_dir(repo).glob("*.json")
    reseal_without_the_key(path, b'"goal":"g"', b'"goal":"forged"')
    assert ckpt_json(repo, "task", "show", "t")["goal"] == "g"
    brief = ckpt(repo, "resume", "--brief-only", "t").stdout
    assert "**Goal:** g\n" in brief and "forged" not in brief
    # the key is the user's, outside the repository, readable by the user alone
    key = Path(os.environ["XDG_CONFIG_HOME"]) / "git-ckpt" / "cache-key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_text().strip()) == 64


def test_without_a_key_nothing_is_cached(repo: Path, monkeypatch: Any) -> None:
    """A user's config dir where no key can be made (here a file): no cache file is
    written or read, and the state comes from the refs each time."""
    blocked = repo.parent / "not-a-dir"
    blocked.write_text("a file\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocked))
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    assert ckpt_json(repo, "task", "show", "t")["current_step"] == "s1"
    settle(repo)
    assert list(cache_dir(repo).glob("*.json")) == []


def test_moved_refs_invalidate_it(repo: Path) -> None:
    start(repo)
    calls(repo, 5)
    before = warm(repo)
    old_tip = git(repo, "rev-parse", "refs/agent/events/t")
    ckpt(repo, "step", "start", "t", "s1")  # a new event
    moved = warm(repo)
    assert moved[0]["current_step"] == "s1" and moved == cold(repo)
    new_tip = git(repo, "rev-parse", "refs/agent/events/t")
    git(repo, "update-ref", "refs/agent/events/t", old_tip)  # the log rewound
    assert warm(repo) == before == cold(repo)
    git(repo, "update-ref", "refs/agent/events/t", new_tip)  # and forward again
    assert warm(repo) == moved
    ckpt(repo, "create", "-t", "t", "-m", "next")  # a new checkpoint (and note)
    after = warm(repo)
    assert after == cold(repo) and after[0]["current_step"] == "s1"
    forge_event(repo, "t", "step.start", {"step": "s9"})  # refused by replay: named
    skipped = warm(repo)[1]
    assert [s["type"] for s in skipped] == ["step.start"]
    assert warm(repo) == cold(repo)


def test_fetched_events_invalidate_it(tmp_path: Path) -> None:
    _, a, b = remote_and_clones(tmp_path)
    start(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    assert warm(b)[0]["current_step"] is None
    ckpt(b, "event", "t", "--type", "note", "--json", '{"n": 1}')  # b's log diverges
    warm(b)
    ckpt(a, "step", "start", "t", "s1")
    ckpt(a, "push")
    ckpt(b, "fetch")  # a union merge brings a's step.start into b's log
    state = warm(b)
    assert state[0]["current_step"] == "s1" and state == cold(b)


OPS = st.lists(
    st.sampled_from(
        [
            "call",
            "start s1",
            "start s2",
            "done s1",
            "fail s2",
            "light",
            "full",
            "forged start",
            "forged update",
            "rewind",
        ]
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_a_cache_hit_is_always_the_cold_state(tmp_path_factory: Any, ops: list[str]) -> None:
    repo = tmp_path_factory.mktemp("r")
    git(repo, "init", "-q")
    (repo / "f").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    start(repo)
    history = [git(repo, "rev-parse", "refs/agent/events/t")]
    for op in ops:
        _apply(repo, op, history)
        history.append(git(repo, "rev-parse", "refs/agent/events/t"))
        assert warm(repo) == warm(repo)  # a hit
        hit = warm(repo)
        assert hit == cold(repo), op


def _apply(repo: Path, op: str, history: list[str]) -> None:
    kind, _, arg = op.partition(" ")
    if kind == "call":
        calls(repo, 2)
    elif kind in ("start", "done", "fail"):
        ckpt(repo, "step", kind, "t", arg, ok=False)
    elif kind in ("light", "full"):
        ckpt(repo, "create", "-t", "t", *(["--light"] if kind == "light" else []), ok=False)
    elif op == "forged start":
        forge_event(repo, "t", "step.start", {"step": "s3"})
    elif op == "forged update":
        forge_event(repo, "t", "state.update", {"patch": {"todo": ["x"]}})
    elif kind == "rewind" and len(history) > 1:
        git(repo, "update-ref", "refs/agent/events/t", history[len(history) // 2])


def test_concurrent_writers_never_leave_a_torn_cache(repo: Path) -> None:
    start(repo)
    code = (
        "import sys, git_agentckpt\n"
        "ck = git_agentckpt.open(sys.argv[1])\n"
        "for _ in range(40): ck.state('t')\n"
        "print('ok')\n"
    )
    readers = [
        subprocess.Popen([sys.executable, "-c", code, str(repo)], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for i, step in enumerate(["s1", "s2", "s3"]):
        ckpt(repo, "step", "start", "t", step)
        calls(repo, 3 + i)
    outs = [p.communicate(timeout=120)[0] for p in readers]
    assert outs == ["ok\n"] * 3
    assert [p.name for p in cache_dir(repo).iterdir() if p.name.endswith(".tmp")] == []
    assert len(list(cache_dir(repo).glob("*.json"))) == 1
    assert StateCache(str(repo / ".git"))._read("t") is not None  # whole, digest matches
    assert warm(repo) == cold(repo)
    assert warm(repo)[0]["current_step"] == "s3"


def test_a_cache_that_cannot_be_written_is_skipped(repo: Path) -> None:
    """A git dir the cache cannot be written to (here its directory is a file) reads
    the state from the refs, every time."""
    start(repo)
    settle(repo)  # the cache files a served call writes after its answer
    agent = repo / ".git" / "agent"
    shutil.rmtree(agent / "state")
    (agent / "state").write_text("not a directory\n")
    ckpt(repo, "step", "start", "t", "s1")
    state, _ = warm(repo)
    assert state is not None and state["current_step"] == "s1"
    assert (agent / "state").read_text() == "not a directory\n"
