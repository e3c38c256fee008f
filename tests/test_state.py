"""Task state: start, steps, updates that may not delete or reword, replay after crashes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import git
from helpers import BIN_DIR, KILLED, ckpt, ckpt_json, write

SEED42 = "constraints:\n  - id: seed42\n    text: Experiments use seed 42\n"


def start(repo: Path) -> None:
    # a constraint id given to `task start` must be defined by the contract
    write(repo / ".agent" / "contracts" / "constraints.yaml", SEED42)
    ckpt(
        repo,
        "task",
        "start",
        "t",
        "--goal",
        "reproduce table 2",
        "--step",
        "s1:read papers",
        "--step",
        "s2:change model",
        "--constraint",
        "seed42",
        "--model",
        "m1",
        "--param",
        "temp=0.2",
    )


def test_task_start_and_show(repo: Path) -> None:
    start(repo)
    state = ckpt_json(repo, "task", "show", "t")
    assert state["goal"] == "reproduce table 2"
    assert [s["id"] for s in state["steps"]] == ["s1", "s2"]
    assert state["constraints"] == ["seed42"]
    assert state["status"] == "active"
    assert state["env"]["model"] == {"name": "m1", "version": None}
    assert state["env"]["params"] == {"temp": 0.2}
    text = ckpt(repo, "task", "show", "t").stdout
    assert "reproduce table 2" in text and "s2: change model" in text
    assert ckpt(repo, "task", "start", "t", "--goal", "again", ok=False).exit_code == 2


def test_step_lifecycle(repo: Path) -> None:
    start(repo)
    ev = ckpt_json(repo, "step", "start", "t", "s1")
    assert ev["type"] == "step.start" and ev["data"]["mode"] == "start"
    assert ckpt_json(repo, "task", "show", "t")["current_step"] == "s1"
    done = ckpt_json(repo, "step", "done", "t", "s1", "--output", '{"papers": 3}')
    assert done["trigger"] == "step_end" and done["kind"] == "full" and done["step"] == "s1"
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", done["commit"]))
    s1 = next(s for s in note["steps"] if s["id"] == "s1")
    assert s1["status"] == "done" and s1["outputs"] == {"papers": 3}
    assert note["done"] == ["s1"] and note["todo"] == ["s2"]
    # done steps do not start again
    assert ckpt(repo, "step", "start", "t", "s1", ok=False).exit_code == 2
    ckpt(repo, "step", "start", "t", "s2")
    ckpt(repo, "step", "fail", "t", "s2", "--output", '{"error": "oom"}')
    assert (
        next(s for s in ckpt_json(repo, "task", "show", "t")["steps"] if s["id"] == "s2")["status"]
        == "failed"
    )
    retry = ckpt_json(repo, "step", "start", "t", "s2")
    assert retry["data"]["mode"] == "retry"


def test_step_done_killed_before_its_transaction_leaves_the_step_in_progress(
    repo: Path,
) -> None:
    """`step done` commits its `step.end` and its checkpoint in one transaction: killed
    before it, nothing of either is visible and the step is still in progress."""
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    before = git(repo, "for-each-ref", "refs/agent/", "refs/notes/agent/")
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "checkpoint.objects"}
    killed = subprocess.run(
        [os.path.join(BIN_DIR, "git-ckpt"), "step", "done", "t", "s1"], cwd=repo, env=env
    )
    assert killed.returncode in KILLED
    assert git(repo, "for-each-ref", "refs/agent/", "refs/notes/agent/") == before
    last = ckpt(repo, "log", "t", "--json").stdout.splitlines()[-1]
    assert json.loads(last)["type"] == "step.start"
    state = ckpt_json(repo, "task", "show", "t")
    s1 = next(s for s in state["steps"] if s["id"] == "s1")
    assert s1["status"] == "in_progress"
    assert ckpt_json(repo, "step", "start", "t", "s1")["data"]["mode"] == "restart"


def test_state_updates_never_delete_or_reword(repo: Path) -> None:
    start(repo)
    ok = ckpt_json(
        repo,
        "create",
        "-t",
        "t",
        "--state",
        '{"steps": [{"id": "s3", "title": "write report"}], "constraints": ["api"]}',
    )
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", ok["commit"]))
    assert [s["id"] for s in note["steps"]] == ["s1", "s2", "s3"]
    assert note["constraints"] == ["seed42", "api"]
    bad = ckpt(
        repo,
        "create",
        "-t",
        "t",
        "--state",
        '{"steps": [{"id": "s1", "title": "other"}]}',
        ok=False,
    )
    assert bad.exit_code == 2 and "rewords step 's1'" in bad.stderr
    bad = ckpt(repo, "create", "-t", "t", "--state", '{"constraints": []}', ok=False)
    # constraints union: an empty list removes nothing, so this is accepted
    assert bad.exit_code == 0
    bad = ckpt(repo, "create", "-t", "t", "--state", '{"steps": "nope"}', ok=False)
    assert bad.exit_code == 2


def test_env_files_and_usage_recorded(repo: Path) -> None:
    ckpt(repo, "init")
    cfg = repo / ".agent" / "ckpt.toml"
    cfg.write_text(cfg.read_text().replace("files = []", 'files = ["README.md"]'))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = ckpt_json(repo, "create", "-t", "t", "--tokens-used", "1200", "--token-budget", "5000")
    note = json.loads(git(repo, "notes", "--ref=agent/state", "show", made["commit"]))
    import hashlib

    assert note["env"]["files"]["README.md"] == hashlib.sha256(b"hello\n").hexdigest()
    assert note["usage"] == {"tokens_used": 1200, "token_budget": 5000}


def test_init_never_overwrites(repo: Path) -> None:
    out = ckpt_json(repo, "init")
    assert sorted(out["created"]) == [
        ".agent/ckpt.toml",
        ".agent/contracts/constraints.md",
        ".agent/contracts/constraints.yaml",
    ]
    (repo / ".agent" / "ckpt.toml").write_text("# mine\n")
    again = ckpt_json(repo, "init")
    assert again["created"] == [] and len(again["kept"]) == 3
    assert (repo / ".agent" / "ckpt.toml").read_text() == "# mine\n"
    import tomllib

    ckpt(repo, "init")  # still fine
    (repo / ".agent" / "ckpt.toml").unlink()
    ckpt(repo, "init")
    parsed = tomllib.loads((repo / ".agent" / "ckpt.toml").read_text())
    assert ".env" in parsed["snapshot"]["secret_paths"]


def test_a_start_whose_snapshot_fails_leaves_nothing_behind(repo: Path) -> None:
    """The task.start is logged with the first checkpoint's prepare, in one commit: a start
    killed (or failing) before that leaves no event, and can simply be run again."""
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "checkpoint.objects"}
    argv = ["task", "start", "t", "--goal", "g", "--step", "s1:one"]
    killed = subprocess.run([os.path.join(BIN_DIR, "git-ckpt"), *argv], cwd=repo, env=env)
    assert killed.returncode in KILLED
    assert git(repo, "for-each-ref", "refs/agent/") == ""  # no event, no checkpoint
    done = ckpt_json(repo, "task", "start", "t", "--goal", "another goal")
    assert done["trigger"] == "task_start"
    assert ckpt_json(repo, "task", "show", "t")["goal"] == "another goal"


def test_a_start_killed_before_its_transaction_leaves_nothing(repo: Path) -> None:
    """`task start` is its first checkpoint's transaction, `task.start` included: killed
    before it commits, there is no task, and the same or another start succeeds."""
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "checkpoint.objects"}
    argv = ["task", "start", "t", "--goal", "g", "--step", "s1:one"]
    killed = subprocess.run([os.path.join(BIN_DIR, "git-ckpt"), *argv], cwd=repo, env=env)
    assert killed.returncode in KILLED
    assert git(repo, "for-each-ref", "refs/agent/", "refs/notes/agent/") == ""
    done = ckpt_json(repo, "task", "start", "t", "--goal", "another goal")
    assert done["trigger"] == "task_start"
    state = ckpt_json(repo, "task", "show", "t")
    assert state["goal"] == "another goal" and state["steps"] == []
    types = [json.loads(x)["type"] for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]
    assert types == ["task.start", "checkpoint.prepare", "checkpoint.commit"]
    again = ckpt(repo, *argv, ok=False)
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_the_state_events_since_the_tip_are_those_a_full_read_finds(repo: Path) -> None:
    """events_since_tip parses only the commits that can hold a state event (or the tip's
    prepare): it must find exactly what reading the whole log finds."""
    import git_agentckpt
    from git_agentckpt.model import STATE_EVENTS, NewEvent
    from git_agentckpt.store.refs import TaskName
    from git_agentckpt.store.state import events_since_tip

    start(repo)
    ck = git_agentckpt.open(str(repo))
    t = TaskName("t")
    ck.log.append(t, [NewEvent("tool.call", input={"i": i}) for i in range(50)])
    ck.step_start("t", "s1")
    ck.log.append(
        t, [NewEvent("tool.call", input='a text with step.end" in it'), NewEvent("model.call")]
    )
    tip = ck.create("t", message="mid")  # the tip: only what follows its prepare counts
    ck.log.append(
        t,
        [
            NewEvent("tool.call"),
            NewEvent("step.end", links={"step": "s1"}, data={"status": "failed"}),
        ],
    )
    ck.log.append(t, [NewEvent("tool.call", input={"i": i}) for i in range(30)])
    ck.step_start("t", "s2")
    everything = ck.log.read(t)
    after = next(
        i
        for i, e in enumerate(everything)
        if e.links.get("checkpoint") == tip.commit and e.type == "checkpoint.prepare"
    )
    expected = [e for e in everything[after + 1 :] if e.type in STATE_EVENTS]
    found = events_since_tip(ck.log, t, ck.store.tip(t))
    assert [e.id for e in found] == [e.id for e in expected]
    assert [e.type for e in found] == ["step.end", "step.start"]
    assert [e.type for e in events_since_tip(ck.log, t, None)][:2] == ["task.start", "step.start"]
