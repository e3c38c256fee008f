"""Resume: the five steps and each failure branch, on real repositories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, ckpt_json, forge_event, write

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
"""


def setup_task(repo: Path) -> Any:
    """s1 done, s2 started, a light checkpoint in the middle of s2."""
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(
        repo,
        "task",
        "start",
        "t",
        "--goal",
        "Reproduce table 2 of the paper",
        "--step",
        "s1:read",
        "--step",
        "s2:train",
        "--step",
        "s3:report",
        "--constraint",
        "seed42",
        "--constraint",
        "api-frozen",
    )
    ckpt(repo, "step", "start", "t", "s1")
    s1_done = ckpt_json(repo, "step", "done", "t", "s1", "--output", '{"papers": 2}')
    ckpt(repo, "step", "start", "t", "s2")
    write(repo / "results" / "run1.csv", "1,0.8\n")
    ckpt(repo, "create", "-t", "t", "--light", "-m", "mid s2")
    return s1_done


def resume_json(repo: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = ckpt(repo, "resume", "t", *args, "--json", ok=False)
    return result.exit_code, json.loads(result.stdout)


RESTATEMENT = """Goal: reproduce table 2 of the paper.
Constraints: seed42 - experiments use seed 42; api-frozen - the public API under src/api stays.
s1 is done and not to be redone.
Next step: s2
"""


def test_interrupted_mid_step_resumes_from_before_the_step(repo: Path) -> None:
    s1_done = setup_task(repo)
    (repo / "results" / "run1.csv").unlink()
    (repo / "results").rmdir()
    code, out = resume_json(repo)
    assert code == 0, out
    assert out["locate"]["start"]["commit"] == s1_done["commit"]  # type: ignore[index]
    assert out["locate"]["open_steps"] == ["s2"]  # type: ignore[index]
    assert out["brief"]["next_step"] == "s2"  # type: ignore[index]
    state = ckpt_json(repo, "task", "show", "t")
    assert state["status"] == "recovering"
    assert {s["id"]: s["status"] for s in state["steps"]} == {
        "s1": "done",
        "s2": "pending",
        "s3": "pending",
    }
    # repeatable: a second resume starts from the same point
    code, again = resume_json(repo)
    assert code == 0
    assert again["locate"]["start"]["commit"] == s1_done["commit"]  # type: ignore[index]


def test_ref_moved_without_commit_event_is_rolled_forward(repo: Path) -> None:
    """A trail written by a version that logged `checkpoint.commit` after the ref move
    (or fetched from one), killed in between: the ref is there, its commit event is not."""
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    made = ckpt_json(repo, "create", "-t", "t", "-m", "crashed before step 5")
    git(repo, "update-ref", "refs/agent/events/t", "refs/agent/events/t^")  # both events gone
    data = {"kind": "full", "trigger": "manual", "number": 2, "id": made["id"]}
    forge_event(repo, "t", "checkpoint.prepare", {"checkpoint": made["commit"], **data})
    code, out = resume_json(repo)
    assert code == 0
    assert out["locate"]["rolled_forward"] == [made["commit"]]  # type: ignore[index]
    assert out["locate"]["start"]["commit"] == made["commit"]  # type: ignore[index]
    events = [json.loads(x) for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]
    assert any(
        e["type"] == "checkpoint.commit"
        and e.get("data", {}).get("rolled_forward")
        and e["links"]["checkpoint"] == made["commit"]
        for e in events
    )


def test_prepare_only_checkpoint_is_ignored(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    good = ckpt_json(repo, "create", "-t", "t")
    orphan = git(repo, "commit-tree", "-m", "never committed", "HEAD^{tree}")
    forge_event(repo, "t", "checkpoint.prepare", {"checkpoint": orphan})
    code, out = resume_json(repo)
    assert code == 0
    assert out["locate"]["aborted_checkpoints"] == [orphan]  # type: ignore[index]
    assert out["locate"]["start"]["commit"] == good["commit"]  # type: ignore[index]


def test_regenerable_drift_is_cleaned(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    write(repo / "cache" / "x.pyc", "stale\n")
    write(repo / "pkg" / "__pycache__" / "m.cpython-311.pyc", "stale\n")
    code, out = resume_json(repo)
    assert code == 0
    cleaned = sorted(out["verify"]["cleaned"])  # type: ignore[index]
    assert cleaned == ["cache/x.pyc", "pkg/__pycache__/m.cpython-311.pyc"]
    assert not (repo / "cache" / "x.pyc").exists()


def test_source_drift_stops_then_restore_or_accept(repo: Path, person_at_terminal: None) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    write(repo / "src" / "app.py", "print('drifted')\n")
    code, out = resume_json(repo)
    assert code == 10 and out["outcome"] == "needs_person"
    assert out["verify"]["source_drift"] == [{"path": "src/app.py", "change": "modified"}]  # type: ignore[index]
    assert "--restore" in str(out["message"]) and "--accept-drift" in str(out["message"])
    assert (repo / "src" / "app.py").read_text() == "print('drifted')\n"  # nothing changed
    text = ckpt(repo, "resume", "t", ok=False)
    assert text.exit_code == 10 and "src/app.py" in text.stdout
    code, out = resume_json(repo, "--restore")
    assert code == 0
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    safety = out["verify"]["safety_checkpoint"]["id"]  # type: ignore[index]
    shown = ckpt_json(repo, "show", str(safety))
    assert (
        git(repo, "cat-file", "-p", f"{shown['checkpoint']['tree']}:src/app.py")
        == "print('drifted')"
    )
    ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    # accept the drift instead: the resume checkpoint holds the drifted file
    write(repo / "src" / "app.py", "print('keep me')\n")
    code, out = resume_json(repo, "--accept-drift")
    assert code == 0
    assert out["verify"]["decision"] == "accept_drift"  # type: ignore[index]
    tree = out["resume_checkpoint"]["tree"]  # type: ignore[index]
    assert git(repo, "cat-file", "-p", f"{tree}:src/app.py") == "print('keep me')"
    assert (repo / "src" / "app.py").read_text() == "print('keep me')\n"


def test_resume_restore_is_ready_and_the_brief_names_the_restored_file(repo: Path) -> None:
    """Issue 24's repro: a step started, a tracked file edited, `resume --restore`: ready
    (exit 0), the file as the checkpoint has it, and the brief names it, file by file.
    Through the daemon this exited 10 after every restore: the call's child judged the
    restored tree by the watcher's picture from before its own writes."""
    write(repo / "src" / "m3.py", "original\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "m3")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")
    ckpt(repo, "step", "start", "t", "s1")
    write(repo / "src" / "m3.py", "edited by hand\n")
    out = ckpt(repo, "resume", "t", "--restore", ok=False)
    assert out.exit_code == 0, out.output
    assert (repo / "src" / "m3.py").read_text() == "original\n"
    assert "restored     src/m3.py (restore)" in out.stdout
    assert "still differ" not in out.output
    brief = out.stdout[out.stdout.index("# Recovery brief: t") :]
    assert "src/m3.py" in brief.split("## What recovery did", 1)[1]
    again = ckpt_json(repo, "resume", "t")
    assert again["verify"]["clean"] is True


def test_failing_assertion_rolls_back_two_checkpoints(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    write(repo / "model.py", "GOOD\n")
    c1 = ckpt_json(repo, "create", "-t", "t", "--assert", "good@file_contains:model.py=GOOD")
    write(repo / "model.py", "BAD\n")
    c2 = ckpt_json(repo, "create", "-t", "t", "--assert", "good@file_contains:model.py=GOOD")
    ckpt_json(repo, "create", "-t", "t", "--assert", "good@file_contains:model.py=GOOD")
    code, out = resume_json(repo, "--no-rollback")
    assert code == 11 and out["outcome"] == "assertions_failed"
    code, out = resume_json(repo)
    assert code == 0, out
    rollback = out["assertions"]["rollback"]  # type: ignore[index]
    tried = [t["checkpoint"] for t in rollback["tried"]]
    assert tried == [c2["commit"], c1["commit"]]
    assert rollback["target"]["commit"] == c1["commit"]
    assert (repo / "model.py").read_text() == "GOOD\n"


def test_brief_keeps_every_constraint_under_a_tight_budget(repo: Path) -> None:
    long_rules = [
        f"  - id: rule{i}\n    text: Rule number {i} must always hold for every "
        f"experiment of the project, verbatim clause {i}\n"
        for i in range(12)
    ]
    write(
        repo / ".agent" / "contracts" / "constraints.yaml", "constraints:\n" + "".join(long_rules)
    )
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:first", "--step", "s2:second")
    ckpt(repo, "step", "start", "t", "s1")
    for i in range(30):
        ckpt(
            repo,
            "event",
            "t",
            "--type",
            "tool.call",
            "--json",
            json.dumps({"output": "x" * 200, "i": i}),
        )
    ckpt(repo, "step", "done", "t", "s1", "--output", json.dumps({"big": "y" * 2000}))
    code, out = resume_json(repo, "--max-brief-tokens", "200")
    assert code == 0
    md = str(out["brief_markdown"])
    for i in range(12):
        assert f"verbatim clause {i}" in md
    assert "**Next step:** s2" in md
    brief = out["brief"]
    assert "recent work" in brief["trimmed"] and "outputs" in brief["trimmed"]  # type: ignore[index]
    assert "y" * 2000 not in md
    assert brief["recent_work"] == []  # type: ignore[index]
    code, roomy = resume_json(repo)
    assert "y" * 2000 in str(roomy["brief_markdown"])


def test_confirm_good_and_bad_restatements(repo: Path) -> None:
    setup_task(repo)
    (repo / "results" / "run1.csv").unlink()
    code, _ = resume_json(repo)
    assert code == 0
    # create and step start are refused while recovering
    refused = ckpt(repo, "create", "-t", "t", ok=False)
    assert refused.exit_code == 13 and "git ckpt confirm t" in refused.stderr
    assert ckpt(repo, "step", "start", "t", "s2", ok=False).exit_code == 13
    assert ckpt(repo, "create", "-t", "t", "--force", "--light", ok=False).exit_code == 0
    missing = RESTATEMENT.replace("api-frozen - the public API under src/api stays.", "")
    bad = ckpt(repo, "confirm", "t", "--restatement", "-", input=missing, ok=False)
    assert bad.exit_code == 12 and "api-frozen" in bad.stderr
    assert ckpt_json(repo, "task", "show", "t")["status"] == "recovering"
    redo = RESTATEMENT + "Then I will redo s1 from scratch.\n"
    bad = ckpt(repo, "confirm", "t", "--restatement", "-", input=redo, ok=False)
    assert bad.exit_code == 12 and "s1" in bad.stderr
    wrong_next = RESTATEMENT.replace("Next step: s2", "Next step: s3")
    assert (
        ckpt(repo, "confirm", "t", "--restatement", "-", input=wrong_next, ok=False).exit_code == 12
    )
    good = ckpt(repo, "confirm", "t", "--restatement", "-", input=RESTATEMENT)
    assert "confirmed" in good.stdout
    assert ckpt_json(repo, "task", "show", "t")["status"] == "active"
    ckpt(repo, "step", "start", "t", "s2")
    types = [json.loads(x)["type"] for x in ckpt(repo, "log", "t", "--json").stdout.splitlines()]
    assert "recovery.confirmed" in types and "recovery.rejected" in types


def test_report_holds_all_five_steps(repo: Path) -> None:
    setup_task(repo)
    (repo / "results" / "run1.csv").unlink()
    resume_json(repo)
    ckpt(repo, "confirm", "t", "--restatement", "-", input=RESTATEMENT)
    report = ckpt_json(repo, "report", "t")
    for key in ("locate", "verify", "assertions", "brief", "confirmation", "timings"):
        assert report.get(key) is not None, key
    assert report["confirmation"]["passed"] is True
    assert set(report["timings"]) >= {"locate", "verify", "assertions", "brief"}
    assert "restatement.md" in report["files"] and "brief.md" in report["files"]
    md = git(repo, "show", f"refs/agent/reports/t:{report['id']}/brief.md")
    assert "Experiments must use seed 42" in md
    listed = ckpt_json(repo, "report", "t", "--list")
    assert [r["id"] for r in listed] == [report["id"]]


def test_finished_task_resumes_with_no_next_step(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "done", "t", "s1")
    code, out = resume_json(repo)
    assert code == 0 and out["outcome"] == "finished"
    assert out["brief"]["next_step"] is None  # type: ignore[index]


def test_brief_only_changes_nothing(repo: Path) -> None:
    setup_task(repo)
    before = git(repo, "for-each-ref")
    result = ckpt(repo, "resume", "t", "--brief-only")
    assert "Experiments must use seed 42" in result.stdout
    assert git(repo, "for-each-ref") == before


def test_demo_runs(tmp_path: Path) -> None:
    from git_agentckpt.recovery.demo import run_demo

    lines: list[str] = []
    assert run_demo(str(tmp_path / "demo"), keep=True, echo=lines.append) == 0
    text = "\n".join(lines)
    assert "exit 10" in text and "exit 0: confirmed" in text
    assert "3 assertions: 1 checked (key-config.json), passed=True" in text
    assert "refs/agent/reports/ablation" in text
    assert git(tmp_path / "demo", "rev-parse", "--verify", "refs/agent/reports/ablation")


def test_key_input_assertion_catches_a_changed_config_on_resume(
    repo: Path, person_at_terminal: None
) -> None:
    """Key inputs (here an ignored data file, so not source drift) are pinned by sha256."""
    write(repo / ".gitignore", "*.log\nbuild/\ndata/\n")
    write(repo / "data" / "train.csv", "x,y\n1,2\n")
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "env.key_inputs", '["data/train.csv"]')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "settings")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    shown = ckpt_json(repo, "show", "t")
    assert [a["check"]["kind"] for a in shown["assertions"]] == ["file_sha256"]
    code, out = resume_json(repo)
    assert code == 0 and out["assertions"]["passed"] is True  # type: ignore[index]
    ckpt(repo, "confirm", "t", "--by-human", input="y\n")
    write(repo / "data" / "train.csv", "x,y\n1,3\n")  # the data changed behind the task's back
    code, out = resume_json(repo, "--no-rollback")
    assert code == 11
    failed = [r for r in out["assertions"]["results"] if r["status"] == "fail"]  # type: ignore[index]
    assert len(failed) == 1 and "data/train.csv" in str(failed[0]["detail"])
    assert "data_train.csv" in str(failed[0]["id"]) or "train" in str(failed[0]["id"])


def test_resume_from_a_named_checkpoint_and_assertions_from_a_file(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    write(repo / "checks.yaml", "- id: has-readme\n  check: {kind: file_exists, file: README.md}\n")
    first = ckpt_json(repo, "create", "-t", "t", "--assertions", "checks.yaml")
    assert [a["id"] for a in ckpt_json(repo, "show", "t")["assertions"]] == ["has-readme"]
    ckpt(repo, "create", "-t", "t")
    code, out = resume_json(repo, "--from", "t~1")
    assert code == 0
    assert out["locate"]["start"]["commit"] == first["commit"]  # type: ignore[index]
    assert out["assertions"]["results"][0]["status"] == "pass"  # type: ignore[index]
    bad = ckpt(
        repo,
        "create",
        "-t",
        "t",
        "--force",
        "--assertions",
        "checks.yaml",
        "--assert",
        "bogus:x",
        ok=False,
    )
    assert bad.exit_code == 2


def test_unparsable_contract_stops_resume(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(
        repo / ".agent" / "contracts" / "constraints.yaml",
        "constraints:\n  - id: a\n    text: t\n    check: {kind: nope}\n",
    )
    result = ckpt(repo, "resume", "t", "--json", ok=False)
    assert result.exit_code == 2
    assert "constraints.yaml:4" in result.stderr
    assert json.loads(result.stdout)["exit"] == 2
