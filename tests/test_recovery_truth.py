"""Recovery tells the truth (issue 10): each test states what the brief must say after a
recovery did something, on a real repository, and fails on the code before the five
resume steps returned records of what they did."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, ckpt_json, forge_event, write


def resume(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "resume", "t", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


def files_of(out: dict[str, Any]) -> list[dict[str, str]]:
    return list(out["brief"]["recovery"].get("files") or [])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def start(repo: Path, *steps: str, constraint: str | None = None) -> None:
    args = ["task", "start", "t", "--goal", "Reproduce table 2"]
    for s in steps or ("s1:first", "s2:second"):
        args += ["--step", s]
    if constraint:
        args += ["--constraint", constraint]
    ckpt(repo, *args)


def commit_all(repo: Path, message: str = "setup") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


# -- 1. the brief says, file by file, what recovery did ---------------------------------


def test_the_brief_names_each_restored_and_deleted_file_and_the_safety_checkpoint(
    repo: Path,
) -> None:
    start(repo)
    write(repo / "src" / "app.py", "print('drifted')\n")
    write(repo / "src" / "new.py", "new = 1\n")
    code, out = resume(repo, "--restore")
    assert code == 0, out["message"]
    assert {"path": "src/app.py", "action": "restored", "why": "restore"} in files_of(out)
    assert {"path": "src/new.py", "action": "deleted", "why": "restore"} in files_of(out)
    safety = out["verify"]["safety_checkpoint"]["id"]
    assert out["brief"]["recovery"]["safety_checkpoint"] == safety
    md = out["brief_markdown"]
    assert "`src/app.py`: restored (restore)" in md and "`src/new.py`: deleted (restore)" in md
    assert safety in md and "git ckpt restore" in md
    # the safety checkpoint holds what was undone
    tree = ckpt_json(repo, "show", safety)["checkpoint"]["tree"]
    assert git(repo, "cat-file", "-p", f"{tree}:src/app.py") == "print('drifted')"


# -- 2. rollback is controlled and keeps what a person accepted ------------------------


def key_input_task(repo: Path) -> None:
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "env.key_inputs", '["cfg.json"]')
    write(repo / "cfg.json", '{"lr": 0.1}\n')
    commit_all(repo)
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    write(repo / "results" / "s1.csv", "lr,score\n0.1,0.9\n")
    ckpt(repo, "step", "done", "t", "s1", "--output", '{"score": 0.9}')


def test_accepting_a_changed_key_input_keeps_it_and_names_the_steps_that_used_the_old(
    repo: Path,
) -> None:
    key_input_task(repo)
    old = sha(repo / "cfg.json")
    write(repo / "cfg.json", '{"lr": 0.2}\n')
    new = sha(repo / "cfg.json")
    code, out = resume(repo, "--accept-drift")
    assert code == 0, out["message"]
    assert (repo / "cfg.json").read_text() == '{"lr": 0.2}\n'  # what the person accepted
    assert (repo / "results" / "s1.csv").exists()  # s1's output is never deleted silently
    assert out["assertions"].get("rollback") is None
    assert ckpt_json(repo, "task", "show", "t")["done"] == ["s1"]
    accepted = out["assertions"]["accepted_inputs"]
    assert [a["file"] for a in accepted] == ["cfg.json"]
    assert accepted[0]["pinned_sha256"] == old and accepted[0]["sha256_now"] == new
    assert accepted[0]["done_steps_that_used_the_pinned_value"] == ["s1"]
    assert "cfg.json" in out["brief_markdown"] and "s1" in out["brief_markdown"]
    # the resume checkpoint re-pins the accepted content
    pins = ckpt_json(repo, "show", out["resume_checkpoint"]["id"])["assertions"]
    assert {"kind": "file_sha256", "file": "cfg.json", "sha256": new} in [p["check"] for p in pins]


def test_an_accepted_key_input_stays_accepted_at_every_later_resume(repo: Path) -> None:
    """Issue 25, item 2: the next resume used to check the *old* pin again, roll back to
    the task's first checkpoint (cfg.json rewritten, done s1 back to pending) and say
    "ready"; and the accepting resume printed `passed=False` beside "0 failing"."""
    key_input_task(repo)
    ckpt(repo, "step", "start", "t", "s2")
    write(repo / "cfg.json", '{"lr": 0.2}\n')
    first = ckpt(repo, "resume", "t", "--accept-drift", ok=False)
    assert first.exit_code == 0, first.output
    assert "passed=True" in first.stdout and "passed=False" not in first.stdout
    form = json.loads(ckpt(repo, "resume", "t", "--json").stdout)["brief"]["restatement_form"]
    said = form.replace("<the goal, in your own words>", "reproduce table 2")
    said = said.replace("<ids of the done steps, or none>", "s1")
    said = said.replace("<id of the next step, or none>", "s2")
    ckpt(repo, "confirm", "t", "--restatement", "-", input=said)
    for _ in range(2):  # every later resume, not just the next one
        code, out = resume(repo)
        assert code == 0, out["message"]
        assert out["assertions"]["passed"] is True and out["assertions"]["rollback"] is None
        assert (repo / "cfg.json").read_text() == '{"lr": 0.2}\n'
        assert ckpt_json(repo, "task", "show", "t")["done"] == ["s1"]


def test_a_changed_ignored_key_input_with_no_covering_checkpoint_stops_and_says_why(
    repo: Path,
) -> None:
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "env.key_inputs", '["data/train.csv"]')
    write(repo / ".gitignore", "*.log\nbuild/\ndata/\n")
    write(repo / "data" / "train.csv", "a,b\n1,2\n")
    commit_all(repo)
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    old = sha(repo / "data" / "train.csv")
    write(repo / "data" / "train.csv", "a,b\n9,9\n")
    new = sha(repo / "data" / "train.csv")
    code, out = resume(repo)
    assert code == 11 and out["outcome"] == "assertions_failed"
    message = out["message"]
    assert "data/train.csv" in message and old[:12] in message and new[:12] in message
    assert "done steps that ran with the pinned value: s1" in message
    assert ckpt_json(repo, "task", "show", "t")["done"] == ["s1"]  # nothing rolled back


def test_rollback_goes_to_the_newest_checkpoint_that_asserts_the_failed_file(
    repo: Path,
) -> None:
    start(repo)
    write(repo / "model.py", "GOOD\n")
    target = ckpt_json(repo, "create", "-t", "t", "--assert", "ok@file_contains:model.py=GOOD")
    write(repo / "notes.md", "unrelated\n")
    ckpt_json(repo, "create", "-t", "t")  # asserts nothing about model.py: no evidence
    write(repo / "model.py", "BAD\n")
    ckpt_json(repo, "create", "-t", "t", "--assert", "ok@file_contains:model.py=GOOD")
    code, out = resume(repo)
    assert code == 0, out["message"]
    rollback = out["assertions"]["rollback"]
    assert [t["checkpoint"] for t in rollback["tried"]] == [target["commit"]]
    assert rollback["target"]["commit"] == target["commit"]
    assert (repo / "model.py").read_text() == "GOOD\n"
    assert {"path": "model.py", "action": "restored", "why": "rollback"} in files_of(out)
    assert out["brief"]["recovery"]["rolled_back_to"] == target["id"]


# -- 3. the brief never endorses a redo -------------------------------------------------


def test_a_stray_start_of_a_done_step_is_flagged_not_the_next_step(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    forge_event(repo, "t", "step.start", {"step": "s1"})  # e.g. from a fetched log
    code, out = resume(repo, "--brief-only")
    assert code == 0
    brief = out["brief"]
    assert brief["next_step"] == "s2"
    assert [s["status"] for s in brief["steps"]] == ["done", "pending"]
    drift = brief["recovery"]["suspected_drift"]
    assert any("step.start of a done step" in d for d in drift)
    assert "**Next step:** s2" in out["brief_markdown"]


# -- 6. .agent/ is never reverted; a removed constraint stays in force ------------------


CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
"""


def test_restore_keeps_a_constraint_added_mid_task_and_lists_a_removed_one(repo: Path) -> None:
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    commit_all(repo)
    start(repo)
    ckpt(repo, "create", "-t", "t", "-m", "work")
    added = CONTRACT.replace(
        "constraints:\n",
        "constraints:\n  - id: no-net\n    text: Never download data during a run\n"
        "    severity: warn\n",
    ).replace("  - id: seed42\n    text: Experiments must use seed 42\n    severity: block\n", "")
    write(repo / ".agent" / "contracts" / "constraints.yaml", added)
    write(repo / "src" / "app.py", "print('drifted')\n")
    code, out = resume(repo, "--restore")
    assert code == 0, out["message"]
    assert "no-net" in (repo / ".agent" / "contracts" / "constraints.yaml").read_text()
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    assert {
        "path": ".agent/contracts/constraints.yaml",
        "action": "kept",
        "why": ".agent",
    } in files_of(out)
    brief = out["brief"]
    by_id = {c["id"]: c for c in brief["constraints"]}
    assert by_id["no-net"]["text"] == "Never download data during a run"
    assert by_id["seed42"]["text"] == "Experiments must use seed 42"
    assert "removed" in by_id["seed42"]["source"]
    assert brief["constraints_added_since_start"] == ["no-net"]
    assert brief["constraints_removed_since_start"] == ["seed42"]
    md = out["brief_markdown"]
    assert "[no-net] (warn) Never download data during a run" in md
    assert "[seed42] (block) Experiments must use seed 42" in md


def test_the_brief_only_does_not_call_the_starting_constraints_added(repo: Path) -> None:
    """`resume --brief-only` (what a compaction hook injects) compares the contract with
    the task's last checkpoint, not with nothing: a constraint bound at `task start` is
    not "added since the starting checkpoint"; one added to the contract since is."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    commit_all(repo)
    start(repo)
    out = ckpt_json(repo, "resume", "t", "--brief-only")
    assert "added to the contract since" not in out["brief_markdown"]
    assert "[seed42] (block) Experiments must use seed 42" in out["brief_markdown"]
    added = CONTRACT.replace(
        "constraints:\n",
        "constraints:\n  - id: no-net\n    text: Never download data during a run\n",
    )
    write(repo / ".agent" / "contracts" / "constraints.yaml", added)
    out = ckpt_json(repo, "resume", "t", "--brief-only")
    assert "(added to the contract since the starting checkpoint: no-net)" in out["brief_markdown"]


# -- 7. prose rules reach the brief verbatim --------------------------------------------


def test_the_prose_of_constraints_md_is_in_every_brief_verbatim_and_never_trimmed(
    repo: Path,
) -> None:
    ckpt(repo, "init")
    prose = (
        "# Rules of this project\n\nNever push to main on a Friday.\n"
        "- Results tables keep four decimals.\n"
    )
    write(repo / ".agent" / "contracts" / "constraints.md", prose)
    commit_all(repo)
    start(repo)
    for i in range(20):
        ckpt(
            repo,
            "event",
            "t",
            "--type",
            "tool.call",
            "--json",
            json.dumps({"output": "x" * 300, "i": i}),
        )
    code, out = resume(repo, "--max-brief-tokens", "60")
    assert code == 0
    assert out["brief"]["prose_rules"] == prose
    assert prose.rstrip("\n") in out["brief_markdown"]


# -- 8. usage is cumulative; the brief says the budget and why the session stopped --------


def test_resume_keeps_the_usage_and_says_the_budget_left_and_why_it_stopped(repo: Path) -> None:
    start(repo)
    ckpt(repo, "tick", "t", "--tokens-used", "97000", "--token-budget", "100000")
    ckpt(repo, "event", "t", "--type", "quota.exceeded", "--json", '{"error": "token quota cut"}')
    code, out = resume(repo)
    assert code == 0
    note = ckpt_json(repo, "show", out["resume_checkpoint"]["id"])["state"]
    assert note["usage"]["tokens_used"] == 97000  # not reset to 0
    budget = out["brief"]["budget"]
    assert budget["left"]["tokens_left"] == 3000
    assert "quota.exceeded" in budget["last_stop"] and "token quota cut" in budget["last_stop"]
    md = out["brief_markdown"]
    assert "tokens used: 97000 of 100000 (3000 left)" in md
    assert "the last session stopped: #" in md and "token quota cut" in md


# -- 11. resume protects work: tracked files are source; large files stop ---------------


def test_a_tracked_file_matching_a_regenerable_glob_is_source_not_deleted(repo: Path) -> None:
    write(repo / "pkg.egg-info" / "PKG-INFO", "Name: pkg\n")
    write(repo / "app.pyc", "tracked bytecode\n")
    commit_all(repo)
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "snapshot.regenerable", '["*.pyc", "*.egg-info/"]')
    start(repo)
    write(repo / "pkg.egg-info" / "PKG-INFO", "Name: pkg\nVersion: 2\n")
    code, out = resume(repo)
    assert code == 10, out["message"]  # source drift: a person decides
    assert out["verify"]["source_drift"] == [
        {"path": "pkg.egg-info/PKG-INFO", "change": "modified"}
    ]
    assert (repo / "pkg.egg-info" / "PKG-INFO").read_text() == "Name: pkg\nVersion: 2\n"


def test_regenerable_output_the_checkpoint_holds_is_brought_back_not_deleted(
    repo: Path,
) -> None:
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "snapshot.regenerable", '["out/"]')
    commit_all(repo)
    write(repo / "out" / "table.csv", "a,1\n")  # untracked output, not ignored: snapshotted
    start(repo)
    write(repo / "out" / "table.csv", "a,2\n")
    write(repo / "out" / "stray.csv", "x\n")
    code, out = resume(repo)
    assert code == 0, out["message"]
    assert (repo / "out" / "table.csv").read_text() == "a,1\n"
    assert not (repo / "out" / "stray.csv").exists()
    assert {"path": "out/table.csv", "action": "brought back", "why": "regenerable"} in files_of(
        out
    )
    assert {"path": "out/stray.csv", "action": "cleaned", "why": "regenerable"} in files_of(out)


def test_a_changed_large_file_stops_with_its_sha_and_never_rolls_back(repo: Path) -> None:
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "snapshot.max_file_size", "1000")
    commit_all(repo)
    start(repo)
    write(repo / "src.py", "work = 1\n")
    (repo / "model.bin").write_bytes(b"w" * 4000)
    ckpt(repo, "create", "-t", "t", "-m", "with the model")
    old = sha(repo / "model.bin")
    (repo / "model.bin").write_bytes(b"v" * 4000)
    code, out = resume(repo)
    assert code == 11, out["message"]
    assert "model.bin" in out["message"] and old[:12] in out["message"]
    assert out["assertions"].get("rollback") is None
    assert (repo / "src.py").read_text() == "work = 1\n"  # source work is never deleted


# -- 12. smaller ones ------------------------------------------------------------------


def test_a_finished_task_says_there_is_nothing_to_confirm(repo: Path) -> None:
    start(repo, "s1:only")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    code, out = resume(repo)
    assert code == 0 and out["outcome"] == "finished"
    assert "confirm" not in out["message"] or "nothing to confirm" in out["message"]
    assert out["brief"]["confirm_command"] is None
    assert "git ckpt confirm" not in out["brief_markdown"]
    assert "Next step:** none" in out["brief_markdown"]


def test_the_brief_shows_the_agents_own_last_work_not_bookkeeping(repo: Path) -> None:
    start(repo)
    ckpt(
        repo,
        "event",
        "t",
        "--type",
        "tool.call",
        "--json",
        '{"input": "pytest -q", "output": "3 passed"}',
    )
    for i in range(6):
        ckpt(repo, "create", "-t", "t", "--light", "-m", f"light {i}")
    code, out = resume(repo)
    assert code == 0
    work = out["brief"]["recent_work"]
    assert any("tool.call" in line and "3 passed" in line for line in work)
    assert not any("checkpoint." in line for line in work)


def two_clones(tmp_path: Path) -> tuple[Path, Path]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    write(a / "README.md", "shared\n")
    commit_all(a, "initial")
    git(a, "push", "-q", "origin", "HEAD:refs/heads/main")
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(b))
    return a, b


def test_another_clones_committed_checkpoint_is_not_called_aborted(tmp_path: Path) -> None:
    a, b = two_clones(tmp_path)
    start(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    theirs = ckpt_json(a, "create", "-t", "t", "-m", "a's work")  # the chains diverge
    ckpt(b, "create", "-t", "t", "-m", "b's work")
    ckpt(a, "push")
    ckpt(b, "fetch", ok=False)  # exit 5: diverged checkpoint refs stay apart
    code, out = resume(b)
    assert code == 0, out["message"]
    assert out["locate"]["aborted_checkpoints"] == []
    assert out["locate"]["committed_elsewhere"] == [theirs["commit"]]
    text = ckpt(b, "resume", "t", ok=False).stdout
    assert "aborted" not in text and "is another clone's" in text


def test_the_log_marks_events_merged_from_another_clone(tmp_path: Path) -> None:
    a, b = two_clones(tmp_path)
    start(a)
    ckpt(a, "push")
    ckpt(b, "fetch")
    ckpt(a, "event", "t", "--type", "note", "--json", '{"n": "from a"}')
    ckpt(b, "event", "t", "--type", "note", "--json", '{"n": "from b"}')
    ckpt(a, "push")
    ckpt(b, "fetch")
    lines = ckpt(b, "log", "t").stdout.splitlines()
    ours = [line for line in lines if "note" in line and "*" not in line.split()[0]]
    merged = [line for line in lines if line.split()[0].endswith("*") and "note" in line]
    assert len(ours) == 1 and len(merged) == 1 and "note" in merged[0]
    assert any("merged from another clone" in line for line in lines)


def test_a_stray_start_of_a_done_step_does_not_move_the_resume_point(repo: Path) -> None:
    start(repo)
    ckpt(repo, "step", "start", "t", "s1")
    done = ckpt_json(repo, "step", "done", "t", "s1")
    forge_event(repo, "t", "step.start", {"step": "s1"})  # a drift signal, not an open step
    after = ckpt_json(repo, "create", "-t", "t", "-m", "later work")
    code, out = resume(repo)
    assert code == 0, out["message"]
    assert out["locate"]["open_steps"] == []
    assert out["locate"]["start"]["commit"] == after["commit"] != done["commit"]
    assert "s1 was started and not finished" not in out["brief_markdown"]
    assert out["brief"]["next_step"] == "s2"
