"""Issue 25: a task that never contradicts itself. Every move is checked against one state
machine (`lifecycle.py`) before anything is written; the diagram in the docs is that
table; a not-ready resume stays not ready; impossible moves are refused; a state update
that races a checkpoint is never lost; restore logs its intent before it writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import BIN_DIR, KILLED, ckpt, ckpt_json, write

import git_agentckpt
from git_agentckpt import lifecycle
from git_agentckpt.model import NewEvent
from git_agentckpt.store.refs import TaskName

DOCS = Path(__file__).resolve().parent.parent / "docs" / "state-machine.md"
CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments use seed 42
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: raw
    text: Raw data is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
"""


def agent_refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "refs/agent/", "refs/notes/agent/")


def types(repo: Path) -> list[str]:
    return [json.loads(x)["type"] for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]


def steps(repo: Path) -> dict[str, str]:
    return {s["id"]: s["status"] for s in ckpt_json(repo, "task", "show", "t")["steps"]}


def contract_task(repo: Path) -> None:
    write(repo / ".gitignore", "data/\n")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    args = ["--goal", "reproduce table 2", "--step", "s1:read", "--step", "s2:train"]
    ckpt(repo, "task", "start", "t", *args, "--constraint", "seed42")


def restatement(form: str) -> str:
    """The brief's form filled in as an agent would (each constraint line keeps the
    checked value the form gives it)."""
    lines = []
    for line in form.splitlines():
        if line.startswith("- seed42:"):
            line = line.replace("<this constraint, in your own words>", "experiments use seed 42")
        elif line.startswith("- raw:"):
            line = line.replace("<this constraint, in your own words>", "raw data is read-only")
        lines.append(line)
    return (
        "\n".join(lines)
        .replace("<the goal, in your own words>", "reproduce table 2")
        .replace("<ids of the done steps, or none>", "none")
        .replace("<id of the next step, or none>", "s1")
    )


@pytest.mark.mode("once", reason="reads a file and a pure table")
def test_the_docs_draw_the_table_the_code_enforces() -> None:
    text = DOCS.read_text()
    assert lifecycle.diagram() in text
    assert lifecycle.table() in text
    for move in (*lifecycle.TASK_MOVES, *lifecycle.STEP_MOVES):
        assert set(move.sources) <= {*lifecycle.TASK_STATUSES, *lifecycle.STEP_STATUSES, "new"}


@pytest.mark.mode("once", reason="a pure table")
def test_a_refused_move_names_the_status_and_the_moves_allowed_from_it() -> None:
    with pytest.raises(lifecycle.MoveRefused) as caught:
        lifecycle.step_move("s1", "done", "fail")
    line = caught.value.one_line()
    assert line.startswith("step 's1' is done: fail moves only a step that is in_progress")
    assert "from done: redo (`step start --redo`), rollback (`resume`)" in line
    assert lifecycle.step_move("s1", "failed", "retry").target == "in_progress"
    with pytest.raises(lifecycle.MoveRefused, match="task t is active: confirm"):
        lifecycle.task_move("t", "active", "confirm")


def test_a_not_ready_resume_stays_not_ready_until_its_block_constraint_passes(
    repo: Path,
) -> None:
    """Item 1: `confirm` used to reactivate a not-ready task with the violation still
    there, and `step start` then went on."""
    contract_task(repo)
    write(repo / "data" / "raw" / "x.csv", "written where it must not be\n")
    out = ckpt(repo, "resume", "t", "--json", ok=False)
    assert out.exit_code == 14, out.output
    form = json.loads(out.stdout)["brief"]["restatement_form"]
    assert ckpt_json(repo, "task", "show", "t")["status"] == "not_ready"
    refs = agent_refs(repo)
    refused = ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form), ok=False)
    assert refused.exit_code == 14
    assert "block constraint(s) raw still fail" in refused.stderr
    started = ckpt(repo, "step", "start", "t", "s1", "--force", ok=False)
    assert started.exit_code == 14 and "task t is not ready" in started.stderr
    stop = ckpt(repo, "create", "-t", "t", "--force", ok=False)
    assert stop.exit_code == 14
    assert agent_refs(repo) == refs  # nothing written by a refused move
    (repo / "data" / "raw" / "x.csv").unlink()
    ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form))
    assert ckpt_json(repo, "task", "show", "t")["status"] == "active"
    ckpt(repo, "step", "start", "t", "s1")


def test_drift_that_needs_a_person_stays_open_until_a_person_decides(repo: Path) -> None:
    """Item 5 at the store: a resume stopped for drift leaves the task not ready; no
    checkpoint records the drifted files, and the next resume still asks."""
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    write(repo / "src" / "app.py", "print('drifted')\n")
    first = ckpt(repo, "resume", "t", ok=False)
    assert first.exit_code == 10
    assert ckpt_json(repo, "task", "show", "t")["status"] == "not_ready"
    made = ckpt(repo, "create", "-t", "t", "--force", ok=False)
    assert made.exit_code == 14 and "a person decides" in made.stderr
    assert "recovery" in ckpt_json(repo, "task", "show", "t")
    again = ckpt(repo, "resume", "t", ok=False)
    assert again.exit_code == 10 and "src/app.py" in again.output
    accepted = ckpt(repo, "resume", "t", "--accept-drift", "--json", ok=False)
    assert accepted.exit_code == 0, accepted.output
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"


def test_impossible_moves_are_refused_and_write_nothing(repo: Path) -> None:
    """Item 4: `step fail` of a done step, `step done` of a step never started, a state
    patch that reopens or completes a step, `create -t TYPO`."""
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x", "--step", "s2:y")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    before = agent_refs(repo)
    failed = ckpt(repo, "step", "fail", "t", "s1", ok=False)
    assert failed.exit_code == 2
    assert "step 's1' is done: fail moves only a step that is in_progress" in failed.stderr
    never = ckpt(repo, "step", "done", "t", "s2", ok=False)
    assert never.exit_code == 2
    assert "step 's2' is pending: done moves only a step that is in_progress" in never.stderr
    assert "from pending: start (`step start`), skip (`create --state`)" in never.stderr
    patch = '{"steps": [{"id": "s1", "status": "pending"}]}'
    reopened = ckpt(repo, "create", "-t", "t", "--state", patch, ok=False)
    assert reopened.exit_code == 2 and "cannot move step 's1' from done to pending" in (
        reopened.stderr
    )
    typo = ckpt(repo, "create", "-t", "tt", ok=False)
    assert typo.exit_code == 3 and "did you mean 't'?" in typo.stderr
    assert agent_refs(repo) == before
    assert "event #" not in ckpt(repo, "task", "show", "t").output  # nothing skipped
    assert steps(repo) == {"s1": "done", "s2": "pending"}
    redo = ckpt_json(repo, "step", "start", "t", "s1", "--redo")
    assert redo["data"] == {"mode": "redo", "redo": True}
    assert steps(repo)["s1"] == "in_progress"


def test_a_done_task_is_reopened_by_a_redo(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    assert ckpt_json(repo, "task", "show", "t")["status"] == "done"
    refused = ckpt(repo, "step", "start", "t", "s1", ok=False)
    assert refused.exit_code == 2 and "--redo" in refused.stderr
    ckpt(repo, "step", "start", "t", "s1", "--redo")
    shown = ckpt_json(repo, "task", "show", "t")
    assert shown["status"] == "active" and shown["current_step"] == "s1"


@pytest.mark.mode("inline", reason="races a writer inside this process's checkpoint")
def test_a_state_event_logged_while_a_checkpoint_is_computed_is_never_lost(
    repo: Path,
) -> None:
    """Item 3: a `step start` appended between a checkpoint's read of the state and its
    commit used to vanish (the note carried the old state, replay started after it). The
    checkpoint's transaction expects the log tip it computed from: it fails, and the
    checkpoint is computed again with the step started."""
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    ck = git_agentckpt.open(str(repo))
    other = git_agentckpt.open(str(repo))  # another process's writer, racing without the lock
    t = TaskName("t")
    original = ck.store.create
    raced: list[int] = []

    def create(task: TaskName, draft: Any) -> Any:
        plan = draft.plan

        def racing_plan() -> Any:
            planned = plan()
            if not raced:
                raced.append(1)
                start = NewEvent("step.start", links={"step": "s1"}, data={"mode": "start"})
                other.log.append(t, [start])
            return planned

        return original(task, type(draft)(**{**draft.__dict__, "plan": racing_plan}))

    ck.store.create = create  # type: ignore[method-assign]
    made = ck.create("t", message="raced")
    assert raced
    state = json.loads(git(repo, "notes", "--ref=agent/state", "show", made.commit))
    assert state["steps"][0]["status"] == "in_progress" and state["current_step"] == "s1"
    assert steps(repo) == {"s1": "in_progress"}
    assert types(repo)[-3:] == ["step.start", "checkpoint.prepare", "checkpoint.commit"]


def test_restore_logs_its_intent_before_it_writes(repo: Path) -> None:
    """Item 9: `workspace.restore` (the target, what will be written, the safety
    checkpoint) before the first file, `workspace.restored` after the last."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    target = ckpt_json(repo, "create", "-t", "t")
    write(repo / "src" / "app.py", "print('changed')\n")
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "restore.logged"}
    argv = [os.path.join(BIN_DIR, "git-ckpt"), "restore", target["id"]]
    assert subprocess.run(argv, cwd=repo, env=env).returncode in KILLED
    assert (repo / "src" / "app.py").read_text() == "print('changed')\n"  # nothing written
    intent = json.loads(ckpt(repo, "log", "t", "--json").stdout.splitlines()[-1])
    assert intent["type"] == "workspace.restore"
    assert intent["links"]["checkpoint"] == target["commit"]
    assert intent["data"]["written"] == 1 and intent["data"]["safety"]
    ckpt(repo, "restore", target["id"])
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    assert types(repo)[-2:] == ["workspace.restore", "workspace.restored"]


def test_the_constraints_in_force_are_the_ones_enforced(repo: Path) -> None:
    """Item 8: `task show` said only the ids named at `task start` were in force, while
    the brief, `check` and `confirm` enforce every constraint of the contract."""
    contract_task(repo)
    shown = ckpt(repo, "task", "show", "t").stdout
    assert "constraints in force: seed42, raw" in shown
    doc = ckpt_json(repo, "task", "show", "t")
    assert doc["constraints"] == ["seed42"]
    assert doc["constraints_in_force"] == ["seed42", "raw"]
