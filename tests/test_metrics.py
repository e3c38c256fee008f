"""Issue 15: `git ckpt metrics`, on hand-built logs with known answers and on a real
interrupted run (a process SIGKILLed mid-step, resumed, confirmed, continued)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import (
    BIN_DIR,
    KILLED,
    ckpt,
    ckpt_json,
    forge_event,
    real_ckpt,
    remote_and_clones,
    write,
)

import git_agentckpt
from git_agentckpt.metrics.figures import git_blob_id

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
"""
SEED = '{"train": {"seed": %d}}\n'


def setup_task(repo: Path, steps: int = 6) -> None:
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", SEED % 42)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    args = ["task", "start", "t", "--goal", "reproduce table 2", "--constraint", "seed42"]
    for i in range(1, steps + 1):
        args += ["--step", f"s{i}:step {i}"]
    ckpt(repo, *args)


def event(repo: Path, type_: str, payload: dict[str, Any]) -> None:
    ckpt(repo, "event", "t", "--type", type_, "--json", json.dumps(payload))


def resume(repo: Path, *args: str) -> str:
    """`git ckpt resume t`, which must be ready: its restatement form."""
    out = ckpt(repo, "resume", "t", "--json", *args)
    return str(json.loads(out.stdout)["brief"]["restatement_form"])


def restatement(form: str, done: str, next_step: str) -> str:
    return (
        form.replace("<the goal, in your own words>", "reproduce table 2")
        .replace("<this constraint, in your own words>", "every experiment runs with seed 42")
        .replace("<ids of the done steps, or none>", done)
        .replace("<id of the next step, or none>", next_step)
    )


def only_resume(repo: Path, *args: str) -> dict[str, Any]:
    data = ckpt_json(repo, "metrics", "t", *args)
    assert [t["task"] for t in data["tasks"]] == ["t"]
    [resume] = data["tasks"][0]["resumes"]
    return resume  # type: ignore[no-any-return]


@pytest.fixture
def hand_built(repo: Path) -> Path:
    """Before the interruption: s1 (a Bash tool call), s2 (one violation, then fixed),
    s3 started, a quota stop. Resume; a rejected restatement, then a confirmed one; 150
    tokens; then s3 again (expected), the same tool call, README.md rewritten as it was,
    s4 with a violation two steps after the resume (and a drift alarm, then a passing
    check), config.json away and back across checkpoints, a forged start of done s1."""
    setup_task(repo)
    ckpt(repo, "step", "start", "t", "s1")
    event(repo, "tool.call", {"tool": "Bash", "input": {"command": "ls data"}})
    ckpt(repo, "step", "done", "t", "s1")
    ckpt(repo, "check", "t")  # pass
    ckpt(repo, "step", "start", "t", "s2")
    write(repo / "config.json", SEED % 7)
    ckpt(repo, "check", "t", ok=False)  # 1 violation before the interruption
    write(repo / "config.json", SEED % 42)
    ckpt(repo, "check", "t")
    ckpt(repo, "step", "done", "t", "s2")
    ckpt(repo, "step", "start", "t", "s3")
    event(repo, "quota.exceeded", {"error": "429 quota"})
    form = resume(repo)
    wrong = restatement(form, "s1, s2", "s1")  # plans to redo done s1: refused
    assert ckpt(repo, "confirm", "t", "--restatement", "-", input=wrong, ok=False).exit_code
    ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form, "s1, s2", "s3"))
    event(repo, "model.call", {"usage": {"input_tokens": 100, "output_tokens": 50}})
    ckpt(repo, "step", "start", "t", "s3")  # step 1 after the resume: the unfinished one
    event(repo, "tool.call", {"tool": "Bash", "input": {"command": "ls data"}})  # repeated
    path = str(repo / "README.md")
    event(repo, "tool.call", {"tool": "Write", "input": {"file_path": path, "content": "hello\n"}})
    ckpt(repo, "step", "done", "t", "s3")
    ckpt(repo, "check", "t")  # pass
    ckpt(repo, "step", "start", "t", "s4")  # step 2 after the resume
    write(repo / "config.json", SEED % 7)
    ckpt(repo, "create", "-t", "t", "-m", "seed changed")
    ckpt(repo, "check", "t", ok=False)  # the violation, and a constraint_regressed alarm
    write(repo / "config.json", SEED % 42)
    ckpt(repo, "check", "t")  # passes: the alarm's answer, 0 steps later
    ckpt(repo, "step", "done", "t", "s4")
    forge_event(repo, "t", "step.start", {"step": "s1"})  # step 3: a redo of a done step
    return repo


def test_hand_built_log_gives_the_known_answers(hand_built: Path) -> None:
    r = only_resume(hand_built)
    assert r["attempts"] == 1 and r["outcome"] == "ready"
    assert r["interruption"]["type"] == "quota.exceeded" and r["interruption"]["stop_signal"]
    assert r["window"] == {
        "size": 10,
        "steps_after": 3,
        "steps_before": 3,
        "passed": False,
        "closed_by": None,
    }
    v = r["violations"]
    assert (v["after"], v["before"]) == (1, 1)
    assert v["after_items"] == [
        {"seq": v["after_items"][0]["seq"], "constraint": "seed42", "step_index": 2, "step": "s4"}
    ]
    assert v["checks_after"] == 3 and v["checks_before"] == 3
    assert v["after_constraints"] == v["before_constraints"] == ["seed42"]
    red = r["redone"]
    assert [(s["step"], s["kind"], s["expected"]) for s in red["steps"]] == [
        ("s3", "unfinished", True),
        ("s1", "done", False),
    ]
    assert (red["unfinished"], red["done"], red["rolled_back"]) == (1, 0 + 1, 0)
    assert sorted((f["path"], f["how"]) for f in red["files"]) == [
        ("README.md", "write_event"),
        ("config.json", "checkpoint_tree"),
    ]
    assert [c["tool"] for c in red["tool_calls"]] == ["Bash"] and red["tool_calls_count"] == 1
    said = r["restatement"]
    assert said["outcome"] == "after_retries" and said["tries"] == 2
    go = r["getting_going"]
    assert go["tokens_to_first_step"] == 150 and go["tokens_source"] == "model.call"
    assert go["first_step"] == "s3"
    assert 0 <= go["gap_seconds"] <= go["seconds_to_confirm"] <= go["seconds_to_first_step"]
    drift = r["drift"]
    [alarm] = [a for a in drift["items"] if a["signal"] == "constraint_regressed"]
    assert alarm["subject"] == "seed42" and alarm["steps_to_pass"] == 0
    assert alarm["passed_seq"] > alarm["seq"] and alarm["seconds_to_pass"] >= 0
    assert r["verdict"] == "attention" and "1 done step(s) redone" in r["verdict_line"]
    assert r["recorded"] is False  # the window of 10 steps has not passed


def test_a_smaller_window_closes_and_cuts(hand_built: Path) -> None:
    r = only_resume(hand_built, "--window", "2")
    assert r["window"]["steps_after"] == 2 and r["window"]["passed"]
    assert r["window"]["closed_by"] == "steps" and r["window"]["steps_before"] == 2
    assert r["violations"]["after"] == 1  # step 2 is inside
    assert r["violations"]["before"] == 1  # s2 and s3 before the interruption
    assert [s["step"] for s in r["redone"]["steps"]] == ["s3"]  # the forged s1 is step 3
    bad = ckpt(hand_built, "metrics", "t", "--window", "0", ok=False)
    assert bad.exit_code == 2 and "--window" in bad.output


def test_totals_and_text_output(hand_built: Path) -> None:
    data = ckpt_json(hand_built, "metrics", "--all")
    row = data["tasks"][0]
    assert row["steps"] == {"executions": 6, "distinct": 4, "redone": 2, "ratio": 1.5}
    t = data["totals"]
    assert t["tasks"] == 1 and t["resumes"] == 1
    assert (t["violations_after"], t["violations_before"]) == (1, 1)
    assert (t["redone_done"], t["redone_unfinished"], t["files_rewritten"]) == (1, 1, 2)
    assert t["tool_calls_repeated"] == 1 and t["confirmed_after_retries"] == 1
    assert t["tokens_to_first_step"] == 150 and t["step_executions"] == 6
    text = ckpt(hand_built, "metrics").output
    assert "violations: 1 after (3 check(s)), 1 before (3 check(s))" in text
    assert "seed42 at step 2 (s4)" in text
    assert "s1 done (NOT expected)" in text and "s3 unfinished (expected)" in text
    assert "restatement: confirmed after retries (tries: 2)" in text
    assert "README.md (write_event)" in text and "verdict: resume " in text


def test_confirmed_by_a_person_and_tokens_from_tick(repo: Path, person_at_terminal: None) -> None:
    setup_task(repo, steps=2)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "tick", "t", "--tokens-used", "1000")
    event(repo, "quota.exceeded", {"error": "429"})
    resume(repo)
    ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    ckpt(repo, "tick", "t", "--tokens-used", "1600")
    ckpt(repo, "step", "start", "t", "s1")
    r = only_resume(repo)
    assert r["restatement"]["outcome"] == "by_person" and r["restatement"]["tries"] == 1
    go = r["getting_going"]
    assert (go["tokens_to_first_step"], go["tokens_source"]) == (600, "tick")
    assert [(s["step"], s["kind"]) for s in r["redone"]["steps"]] == [("s1", "unfinished")]


def test_metrics_are_recorded_once_the_window_passed(repo: Path) -> None:
    setup_task(repo, steps=12)
    ckpt(repo, "step", "start", "t", "s1")
    event(repo, "quota.exceeded", {"error": "429"})
    form = resume(repo)
    ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form, "none", "s1"))
    ck = git_agentckpt.open(str(repo))

    def recorded() -> list[Any]:
        return [e for e in ck.events("t") if e.type == "recovery.metrics"]

    for i in range(1, 11):  # the 10 steps of the window
        ck.step_start("t", f"s{i}")
        ck.step_done("t", f"s{i}")
    assert recorded() == []  # the window is still open: an 11th step may start in it
    ck.step_start("t", "s11")
    [ev] = recorded()
    figures = ev.data["figures"]
    assert ev.data["window"] == 10 and figures["recorded"] is True
    assert ev.data["reports"] == figures["reports"] == [ev.data["report"]]
    assert figures["window"]["closed_by"] == "steps" and figures["window"]["steps_after"] == 10
    assert figures["redone"]["unfinished"] == 1 and figures["report"] == ev.data["report"]
    ck.step_done("t", "s11")
    ck.step_start("t", "s12")
    assert len(recorded()) == 1  # idempotent
    r = only_resume(repo)
    assert r["recorded"] is True and r["window"]["passed"]
    refused = ckpt(repo, "event", "t", "--type", "recovery.metrics", "--json", "{}", ok=False)
    assert refused.exit_code != 0  # a tool-only type


def test_real_interrupted_run(repo: Path) -> None:
    """s1 done; s2 writes results and is SIGKILLed inside `step done` (its checkpoint
    built, its transaction not yet run); resume stops for the file, resumes with
    --restore, the agent confirms, redoes s2 and finishes s3. Every figure is there;
    exact where determined."""
    setup_task(repo, steps=3)
    assert real_ckpt(repo, "step", "start", "t", "s1").returncode == 0
    assert real_ckpt(repo, "step", "done", "t", "s1").returncode == 0
    assert real_ckpt(repo, "step", "start", "t", "s2").returncode == 0
    write(repo / "results.csv", "seed,score\n42,0.91\n")
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "checkpoint.objects"}
    killed = subprocess.run(
        [os.path.join(BIN_DIR, "git-ckpt"), "step", "done", "t", "s2"],
        cwd=repo,
        env=env,
        capture_output=True,
    )
    assert killed.returncode in KILLED
    assert ckpt(repo, "resume", "t", ok=False).exit_code == 10  # results.csv: a person decides
    form = resume(repo, "--restore")
    ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form, "s1", "s2"))
    event(repo, "model.call", {"usage": {"input_tokens": 1200, "output_tokens": 300}})
    ckpt(repo, "step", "start", "t", "s2")
    write(repo / "results.csv", "seed,score\n42,0.91\n")
    ckpt(repo, "step", "done", "t", "s2")
    ckpt(repo, "step", "start", "t", "s3")
    ckpt(repo, "step", "done", "t", "s3")  # the task is finished: its window passed
    proc = real_ckpt(repo, "metrics", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    [r] = data["tasks"][0]["resumes"]
    assert r["attempts"] == 2 and len(r["reports"]) == 2  # the stopped one, then --restore
    assert r["interruption"]["type"] == "step.start" and not r["interruption"]["stop_signal"]
    assert r["window"]["closed_by"] == "task_finished" and r["recorded"] is True
    assert (r["window"]["steps_after"], r["window"]["steps_before"]) == (2, 2)
    assert [(s["step"], s["kind"]) for s in r["redone"]["steps"]] == [("s2", "unfinished")]
    assert r["redone"]["files_count"] == 0 and r["redone"]["tool_calls_count"] == 0
    assert r["violations"]["after"] == r["violations"]["before"] == 0
    assert r["restatement"] == {
        "outcome": "first_try",
        "tries": 1,
        "confirmed_at": r["restatement"]["confirmed_at"],
    }
    go = r["getting_going"]
    assert go["tokens_to_first_step"] == 1500 and go["first_step"] == "s2"
    assert isinstance(go["seconds_to_confirm"], float) and go["seconds_to_confirm"] > 0
    assert r["drift"] == {"alarms": 0, "items": []}
    assert r["verdict"] == "ok" and r["resume_checkpoint"] and r["from_checkpoint"]
    row = data["tasks"][0]
    assert row["steps"]["executions"] == 4 and row["steps"]["ratio"] == round(4 / 3, 4)
    blob = git(repo, "rev-parse", f"{r['from_checkpoint']}:config.json")
    assert blob == git_blob_id((SEED % 42).encode())  # the file figure's hash is git's


def test_a_fetched_trail_gives_the_same_figures(tmp_path: Path) -> None:
    """Clone b never ran the task: its metrics come from the fetched log, reports and
    checkpoints alone, and equal clone a's."""
    _, a, b = remote_and_clones(tmp_path)
    setup_task(a, steps=3)
    ckpt(a, "step", "start", "t", "s1")
    event(a, "tool.call", {"tool": "Write", "input": {"file_path": str(a / "f"), "content": "x\n"}})
    event(a, "quota.exceeded", {"error": "429"})
    form = resume(a)
    ckpt(a, "confirm", "t", "--restatement", "-", input=restatement(form, "none", "s1"))
    ckpt(a, "step", "start", "t", "s1")
    event(a, "tool.call", {"tool": "Write", "input": {"file_path": str(a / "f"), "content": "x\n"}})
    ckpt(a, "push")
    ckpt(b, "fetch")
    ours, theirs = ckpt_json(a, "metrics", "t"), ckpt_json(b, "metrics", "t")
    ours.pop("elapsed_ms"), theirs.pop("elapsed_ms")
    assert ours == theirs
    [r] = theirs["tasks"][0]["resumes"]
    assert [f["path"] for f in r["redone"]["files"]] == ["f"]  # a's path, relative to a
    assert r["redone"]["tool_calls_count"] == 1 and r["report"]
    missing = ckpt(b, "metrics", "nobody", ok=False)
    assert missing.exit_code == 3 and "nobody" in missing.output


def test_a_step_undone_by_a_rollback_counts_as_rolled_back(repo: Path) -> None:
    """s1 ended with model.py broken; the resume rolls back to the checkpoint before it
    (the only one whose assertion holds), so s1 is done again: redone, not expected."""
    setup_task(repo, steps=2)
    write(repo / "model.py", "GOOD\n")
    ckpt(repo, "create", "-t", "t", "--assert", "ok@file_contains:model.py=GOOD")
    ckpt(repo, "step", "start", "t", "s1")
    write(repo / "model.py", "BAD\n")
    ckpt(repo, "step", "done", "t", "s1")
    ckpt(repo, "create", "-t", "t", "--assert", "ok@file_contains:model.py=GOOD")
    event(repo, "quota.exceeded", {"error": "429"})
    out = json.loads(ckpt(repo, "resume", "t", "--json").stdout)
    assert out["brief"]["recovery"]["steps_reset_to_pending"] == ["s1"]
    form = str(out["brief"]["restatement_form"])
    ckpt(repo, "confirm", "t", "--restatement", "-", input=restatement(form, "none", "s1"))
    ckpt(repo, "step", "start", "t", "s1")
    r = only_resume(repo)
    assert [(s["step"], s["kind"], s["expected"]) for s in r["redone"]["steps"]] == [
        ("s1", "rolled_back", False)
    ]
    assert r["redone"]["rolled_back"] == 1 and r["verdict"] == "attention"
