"""Issue 10, item 9: every constraint runs at resume time (trusted commands only), as a
record the resume flow builds its brief and report from; a failing `block` one means
"not ready" (exit status 14)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git
from helpers import ckpt, ckpt_json, write

import git_agentckpt
from git_agentckpt.contracts.engine import evaluate_for_resume
from git_agentckpt.errors import Exit
from git_agentckpt.store.refs import TaskName

CONTRACT = """\
constraints:
  - id: seed42
    text: Experiments use seed 42
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: notes
    text: Keep a lab notebook
    severity: warn
    check: {kind: file_exists, file: NOTES.md}
  - id: raw
    text: Raw data is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
  - id: smoke
    text: The smoke test passes
    check: {kind: command, argv: ["touch", "smoke-ran"]}
  - id: prose
    text: Be kind to reviewers
"""


def setup(repo: Path) -> None:
    write(repo / ".gitignore", "data/\n")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "config.json", '{"train": {"seed": 42}}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    write(repo / "data" / "raw" / "x.csv", "1\n")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--constraint", "seed42")


def log_size(repo: Path) -> int:
    return len(ckpt(repo, "log", "t", "--json").stdout.splitlines())


def test_every_constraint_runs_without_logging_and_a_block_failure_is_not_ready(
    repo: Path,
) -> None:
    setup(repo)
    write(repo / "config.json", '{"train": {"seed": 7}}\n')
    write(repo / "data" / "raw" / "x.csv", "2\n")  # an ignored file, watched by content
    tree = ckpt_json(repo, "create", "-t", "t")["tree"]
    before = log_size(repo)
    ck = git_agentckpt.open(str(repo))
    run = evaluate_for_resume(ck, TaskName("t"), tree)
    status = {r.id: (r.severity, r.status) for r in run.results}
    assert status == {
        "seed42": ("block", "fail"),
        "notes": ("warn", "fail"),
        "raw": ("block", "fail"),
        "smoke": ("block", "untrusted"),  # never run without this user's approval
        "prose": ("block", "unchecked"),
    }
    assert not (repo / "smoke-ran").exists()
    assert [r.id for r in run.failing] == ["seed42", "notes", "raw"]
    assert run.blocking == ("seed42", "raw") and not run.ready
    assert run.exit_status == Exit.NOT_READY and int(Exit.NOT_READY) == 14
    doc = json.loads(json.dumps(run.to_json()))
    assert doc["ready"] is False and doc["blocking"] == ["seed42", "raw"]
    assert doc["failing"] == ["seed42", "notes", "raw"]
    assert doc["contract"] == ".agent/contracts/constraints.yaml"
    seed = next(c for c in doc["constraints"] if c["id"] == "seed42")
    assert set(seed) == {"id", "severity", "status", "detail"} and "7" in seed["detail"]
    assert log_size(repo) == before  # no constraint.check, no violation, no drift alarm


def test_passing_constraints_are_ready(repo: Path) -> None:
    setup(repo)
    write(repo / "NOTES.md", "notes\n")
    tree = ckpt_json(repo, "create", "-t", "t")["tree"]
    run = evaluate_for_resume(git_agentckpt.open(str(repo)), TaskName("t"), tree)
    assert run.ready and run.blocking == () and run.exit_status == Exit.OK
    assert [r.id for r in run.failing] == []


def test_without_a_contract_there_is_nothing_to_run(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    tree = ckpt_json(repo, "create", "-t", "t")["tree"]
    run = evaluate_for_resume(git_agentckpt.open(str(repo)), TaskName("t"), tree)
    assert run.ready and run.results == () and run.to_json()["contract"] is None
