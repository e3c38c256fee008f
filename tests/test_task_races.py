"""Issue 25, item 3: no acknowledged move is ever lost. Two processes run random
sequences of `step start/done/fail`, `create` (light and full), `event`, `resume` and
`confirm` on one task at once; afterwards every call that was acknowledged is in the
log, and the task's state is exactly the replay of the log, from its start, in the
order the log holds (a state update that landed while a checkpoint was computed used
to vanish from the state that checkpoint recorded)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import BIN_DIR, ckpt, ckpt_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import git_agentckpt
from git_agentckpt.model import apply_event
from git_agentckpt.store.refs import TaskName

STEPS = ("s1", "s2", "s3")
OPS = st.one_of(
    st.tuples(st.sampled_from(["start", "done", "fail"]), st.sampled_from(STEPS)),
    st.tuples(st.sampled_from(["create", "light", "event", "resume", "confirm"]), st.just("")),
)
# A checkpoint's state is read, then redacted, then committed: the driver makes that
# stretch last 50 ms, so that the other writer lands in it as often as not (the race
# of item 3 is otherwise a few hundred microseconds wide).
DRIVER = r"""
import json, sys, time
import git_agentckpt
import git_agentckpt.store.checkpoints as checkpoints
redact_state = checkpoints.redact_state
def slow_redact_state(redactor, state):
    time.sleep(0.05)
    return redact_state(redactor, state)
checkpoints.redact_state = slow_redact_state
from git_agentckpt.errors import CkptError
from git_agentckpt.recovery.confirming import confirm
from git_agentckpt.recovery.flow import ResumeOptions, resume
repo, ops = sys.argv[1], json.loads(sys.argv[2])
acked = []
for op, step in ops:
    ck = git_agentckpt.open(repo)
    try:
        if op == "start":
            acked.append(["event", ck.step_start("t", step, force=True).id])
        elif op == "done":
            acked.append(["checkpoint", ck.step_done("t", step).commit])
        elif op == "fail":
            acked.append(["event", ck.step_fail("t", step).id])
        elif op in ("create", "light"):
            acked.append(["checkpoint", ck.create("t", light=op == "light", force=True).commit])
        elif op == "event":
            acked.append(["event", ck.event("t", "tool.call", {"input": "ls"}).id])
        elif op == "resume":
            out = resume(ck, "t", ResumeOptions(accept_drift=True))
            made = out.report.get("resume_checkpoint")
            if made:
                acked.append(["checkpoint", made["commit"]])
        elif op == "confirm":
            confirm(ck, "t", None, by_human=True)
            acked.append(["confirm", ""])
    except CkptError:
        pass  # a refused move: nothing acknowledged
print(json.dumps(acked))
"""


def run_two(repo: Path, first: list[Any], second: list[Any]) -> list[list[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(repo), json.dumps(ops)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for ops in (first, second)
    ]
    acked: list[list[str]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        acked += json.loads(out)
    return acked


def replayed(repo: Path) -> dict[str, Any]:
    """The task's state replayed from its start, in log order: state events applied as
    the state machine takes them, a step-end checkpoint marking its step done, a resume
    checkpoint standing for the state it recorded."""
    ck = git_agentckpt.open(str(repo))
    state: dict[str, Any] | None = None
    for ev in ck.log.read(TaskName("t")):
        if ev.type == "checkpoint.prepare":
            trigger, commit = ev.data.get("trigger"), str(ev.links["checkpoint"])
            if trigger in ("step_end", "resume", "task_start"):
                state = ck.store.state_note(commit)
            continue
        try:
            state = apply_event(state, ev)
        except Exception:  # a move replay skips: the store's read skips it too
            continue
    assert state is not None
    return state


def summary(state: dict[str, Any]) -> tuple[Any, ...]:
    steps = tuple((s["id"], s["status"]) for s in state["steps"])
    return state["status"], state.get("current_step"), steps


# One checkpoint whose state read is held open (a file barrier in `redact_state`, called
# right after the state is read, in this version and the ones before) until another
# process has logged its move: the interleaving of item 3, every time.
HELD = r"""
import os, sys, time
import git_agentckpt
import git_agentckpt.store.checkpoints as checkpoints
repo, barrier = sys.argv[1], sys.argv[2]
redact_state = checkpoints.redact_state
def held(redactor, state):
    if not os.path.exists(barrier + ".read"):
        open(barrier + ".read", "w").close()
        deadline = time.time() + 60
        while not os.path.exists(barrier + ".moved") and time.time() < deadline:
            time.sleep(0.01)
    return redact_state(redactor, state)
checkpoints.redact_state = held
print(git_agentckpt.open(repo).create("t", message="held").commit)
"""


@pytest.mark.mode("inline", reason="two processes call the API; the daemon is not involved")
@pytest.mark.parametrize("move", ["start", "fail"])
def test_a_move_logged_while_a_checkpoint_reads_the_state_is_kept(
    repo: Path, tmp_path: Path, move: str
) -> None:
    """`step start` (or `step fail`) asked for after a checkpoint read the state and
    before it committed: it waits for the task's lock (or, from a writer that takes none,
    makes the checkpoint's transaction fail and be computed again); both are
    acknowledged, and the move is in the state (and in the checkpoint's note when it came
    first)."""
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    if move == "fail":
        ckpt(repo, "step", "start", "t", "s1")
    barrier = str(tmp_path / "barrier")
    holder = subprocess.Popen(
        [sys.executable, "-c", HELD, str(repo), barrier], stdout=subprocess.PIPE, text=True
    )
    for _ in range(6000):
        if Path(barrier + ".read").exists():
            break
        time.sleep(0.01)
    mover = subprocess.Popen([os.path.join(BIN_DIR, "git-ckpt"), "step", move, "t", "s1"], cwd=repo)
    with contextlib.suppress(subprocess.TimeoutExpired):
        mover.wait(timeout=2)  # logged at once, or waiting for the task's lock
    Path(barrier + ".moved").touch()
    out, _ = holder.communicate(timeout=120)
    assert holder.returncode == 0 and out.strip()  # the checkpoint is acknowledged
    assert mover.wait(timeout=120) == 0  # and so is the move
    want = "in_progress" if move == "start" else "failed"
    assert ckpt_json(repo, "task", "show", "t")["steps"][0]["status"] == want
    # the checkpoint's note holds the move when the move came first in the log
    order = [e.type for e in git_agentckpt.open(str(repo)).log.read(TaskName("t"))]
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", out.strip()))
    first = order.index(f"step.{'start' if move == 'start' else 'end'}", 3)
    recorded = note["steps"][0]["status"] == want
    assert recorded == (first < len(order) - 2)


@pytest.mark.mode("inline", reason="two processes call the API; the daemon is not involved")
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(OPS, min_size=3, max_size=8), st.lists(OPS, min_size=3, max_size=8))
def test_two_writers_never_lose_an_acknowledged_move(
    tmp_path_factory: pytest.TempPathFactory, first: list[Any], second: list[Any]
) -> None:
    repo = tmp_path_factory.mktemp("race") / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    ckpt(repo, "task", "start", "t", "--goal", "g", *(f"--step={s}:{s}" for s in STEPS))
    acked = run_two(repo, first, second)
    lines = ckpt(repo, "log", "t", "--json").stdout.splitlines()
    logged = {json.loads(line)["id"] for line in lines}
    chain = set(git(repo, "rev-list", "--first-parent", "refs/agent/checkpoints/t").split())
    for kind, ident in acked:
        if kind == "event":
            assert ident in logged
        elif kind == "checkpoint":
            assert ident in chain
    shown = ckpt_json(repo, "task", "show", "t")
    assert summary(shown) == summary(replayed(repo))
