"""`tick` derives its signals from the log's index of key events (store/log_index.py),
without walking the log: the same counts a walk of the whole log finds, and a tick
after thousands of tool calls reads only the commits added since the last read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, walked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import git_agentckpt
from git_agentckpt.model import NewEvent
from git_agentckpt.store.checkpoints import Checkpoint
from git_agentckpt.store.refs import TaskName
from git_agentckpt.tick import _scan
from git_agentckpt.triggers import Signals


def walked_scan(
    ck: Any, task: TaskName, tip: Checkpoint | None, last_full: Checkpoint | None
) -> tuple[int, int, bool]:
    """The walk of the whole log that tick did before the index (the reference)."""
    calls = steps = 0
    owed: bool | None = None
    before_tip = False
    for ev in ck.log.iter_back(task):
        if ev.type == "checkpoint.prepare":
            commit = ev.links.get("checkpoint")
            before_tip = before_tip or (tip is not None and commit == tip.commit)
            if last_full is not None and commit == last_full.commit:
                break
        if ev.type in ("tool.call", "model.call") and not before_tip:
            calls += 1
        elif ev.type == "step.end":
            steps += 1
        elif ev.type == "trigger.decision" and owed is None:
            owed = bool((ev.data.get("decision") or {}).get("full_pending"))
    return calls, steps, bool(owed)


def both(repo: Path) -> tuple[tuple[int, int, bool], tuple[int, int, bool]]:
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")
    chain = list(ck.store.chain(t))
    tip = chain[0] if chain else None
    full = next((c for c in chain if c.kind == "full"), None)
    return _scan(ck, t, tip, full), walked_scan(ck, t, tip, full)


OPS = st.lists(
    st.sampled_from(["call", "model", "start", "fail", "light", "full", "tick", "decision"]),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_the_index_counts_what_a_walk_counts(tmp_path_factory: Any, ops: list[str]) -> None:
    repo = tmp_path_factory.mktemp("r")
    git(repo, "init", "-q")
    (repo / "f").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:a", "--step", "s2:b")
    log = git_agentckpt.open(str(repo)).log
    for op in ops:
        if op in ("call", "model"):
            log.append(TaskName("t"), [NewEvent(f"{op if op == 'model' else 'tool'}.call")] * 2)
        elif op == "start":
            ckpt(repo, "step", "start", "t", "s1", ok=False)
        elif op == "fail":
            ckpt(repo, "step", "fail", "t", "s1", ok=False)
        elif op in ("light", "full"):
            ckpt(repo, "create", "-t", "t", *(["--light"] if op == "light" else []), ok=False)
        elif op == "tick":
            ckpt(repo, "tick", "t")
        else:
            data = {"decision": {"full_pending": True}}
            log.append(TaskName("t"), [NewEvent("trigger.decision", data=data)])
        indexed, walked = both(repo)
        assert indexed == walked, op


def test_a_tick_after_many_calls_reads_only_the_new_commits(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:a")
    log = git_agentckpt.open(str(repo)).log
    for i in range(300):
        log.append(TaskName("t"), [NewEvent("tool.call", input={"i": i})])
    from git_agentckpt.tick import derive_signals

    derive_signals(git_agentckpt.open(str(repo)), TaskName("t"), Signals(now=0.0), set())
    log.append(TaskName("t"), [NewEvent("tool.call")])
    with walked() as seen:
        signals = derive_signals(
            git_agentckpt.open(str(repo)), TaskName("t"), Signals(now=0.0), set()
        )
    assert signals.calls_since == 301
    assert len(seen) <= 3, len(seen)
