"""The contract engine: trust-gated commands, reports, assertions and `run_check_now`."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import write

from git_agentckpt.api import Checkpointer
from git_agentckpt.contracts.approvals import pending_commands
from git_agentckpt.contracts.checks import CheckContext
from git_agentckpt.contracts.engine import (
    ConstraintReport,
    evaluate,
    evaluate_assertions,
    key_input_assertions,
    make_command_runner,
    repo_identity,
    run_check_now,
)
from git_agentckpt.contracts.schema import (
    ContractError,
    assertion_from_spec,
    load_contract_text,
    parse_check,
)
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.errors import CorruptError, NotFound, UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import snapshot_and_changes

CONTRACT = """\
constraints:
  - {id: seed, text: seed 42, check: {kind: json_value, file: c.json, path: seed, equals: 42}}
  - {id: api, text: api frozen, check: {kind: protected_paths, paths: ["src/**"]}}
  - {id: soft, text: a warning, severity: warn, check: {kind: file_exists, file: nope}}
  - {id: cmd, text: a command, severity: warn, check: {kind: command, argv: [touch, ran]}}
  - {id: prose, text: be careful}
"""


def test_repo_identity_is_the_resolved_common_dir(repo: Path, tmp_path: Path) -> None:
    assert repo_identity(GitRepo.discover(str(repo))) == os.path.realpath(repo / ".git")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert repo_identity(GitRepo.discover(str(tmp_path / "wt"))) == os.path.realpath(repo / ".git")


def test_command_runner_runs_only_trusted_commands_redacted(repo: Path) -> None:
    git_repo = GitRepo.discover(str(repo))
    store = TrustStore()
    runner = make_command_runner(git_repo, store, lambda s: s.replace("SECRET", "[redacted]"))
    check = parse_check(
        {"kind": "command", "argv": ["sh", "-c", "touch ran; echo SEC''RET >&2; exit 3"]}
    )
    result = runner(check)
    assert result.status == "untrusted" and not (repo / "ran").exists()
    store.approve(repo_identity(git_repo), check.params["argv"])  # type: ignore[arg-type]
    result = runner(check)
    assert result.status == "fail" and (repo / "ran").exists()
    assert "exit 3" in result.detail and "[redacted]" in result.detail
    assert "SECRET" not in result.detail
    slow = parse_check({"kind": "command", "argv": ["sleep", "5"], "timeout": 0.2})
    store.approve(repo_identity(git_repo), ["sleep", "5"])
    assert "timed out" in runner(slow).detail


def test_unreadable_trust_store_fails_closed(repo: Path) -> None:
    store = TrustStore()
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json")
    runner = make_command_runner(GitRepo.discover(str(repo)), store, str)
    result = runner(parse_check({"kind": "command", "argv": ["touch", "ran"]}))
    assert result.status == "error" and not (repo / "ran").exists()
    with pytest.raises(CorruptError):
        pending_commands(GitRepo.discover(str(repo)), load_contract_text(CONTRACT, "c.yaml"), store)


def test_changed_paths_between_trees(repo: Path) -> None:
    git_repo = GitRepo.discover(str(repo))
    base = git_repo.read_commit(git_repo.head() or "").tree
    write(repo / "src/app.py", "changed\n")
    write(repo / "new/file.txt", "x\n")
    (repo / "README.md").unlink()
    tree, changed = snapshot_and_changes(git_repo, (), base)
    assert changed == {"src/app.py", "new/file.txt", "README.md"}
    assert snapshot_and_changes(git_repo, (), tree) == (tree, frozenset())


def test_evaluate_counts_and_blocking(tmp_path: Path) -> None:
    write(tmp_path / "c.json", '{"seed": 42}')
    contract = load_contract_text(CONTRACT, "constraints.yaml")
    ctx = CheckContext(tmp_path, changed_paths=frozenset({"src/a.py"}))
    report = evaluate(contract, ctx)
    assert report.statuses == {
        "seed": "pass",
        "api": "fail",
        "soft": "fail",
        "cmd": "untrusted",
        "prose": "unchecked",
    }
    assert report.counts == {"pass": 1, "fail": 2, "error": 0, "unchecked": 1, "untrusted": 1}
    assert report.blocking_failures == ("api",)  # warn failures never block
    assert report.results[1].line == 3 and report.results[1].kind == "protected_paths"
    assert report.to_json()["blocking_failures"] == ["api"]
    assert evaluate(None, ctx) == ConstraintReport(None)
    unknown = evaluate(contract, CheckContext(tmp_path))  # changed paths unknown: error blocks
    assert unknown.statuses["api"] == "error" and unknown.blocking_failures == ("api",)


def test_evaluate_assertions_from_a_note(tmp_path: Path) -> None:
    write(tmp_path / "cfg.yaml", "lr: 0.1\n")
    digest = hashlib.sha256(b"lr: 0.1\n").hexdigest()
    note: dict[str, Any] = {
        "v": 1,
        "assertions": [
            {"id": "cfg", "check": {"kind": "file_sha256", "file": "cfg.yaml", "sha256": digest}},
            {"id": "gone", "text": "absent", "check": {"kind": "file_exists", "file": "x"}},
            {"id": "bad", "check": {"kind": "nonsense"}},
            {"check": {"kind": "file_exists", "file": "cfg.yaml"}},
        ],
    }
    items = [assertion_from_spec("lr@yaml_value:cfg.yaml#lr=0.1"), *note["assertions"]]
    results = evaluate_assertions(items, CheckContext(tmp_path))
    assert [(r.id, r.status) for r in results] == [
        ("lr", "pass"),
        ("cfg", "pass"),
        ("gone", "fail"),
        ("bad", "error"),
        ("#5", "error"),
    ]
    assert "unknown check kind 'nonsense'" in results[3].detail
    assert results[2].text == "absent" and results[2].to_json()["kind"] == "file_exists"


def test_key_input_assertions_catch_a_changed_config(tmp_path: Path) -> None:
    write(tmp_path / "configs/exp.yaml", "seed: 42\n")
    write(tmp_path / "data/train.csv", "a\n")
    (tmp_path / "configs_exp.yaml").write_text("other\n")
    paths = ["configs/exp.yaml", "data", "missing.txt", "configs_exp.yaml"]
    made = key_input_assertions(str(tmp_path), paths)
    assert [a["id"] for a in made] == [
        "key-configs_exp.yaml",
        "key-data",
        f"key-configs_exp.yaml-{hashlib.sha256(b'configs_exp.yaml').hexdigest()[:8]}",
    ]
    assert made[0]["check"] == {
        "kind": "file_sha256",
        "file": "configs/exp.yaml",
        "sha256": hashlib.sha256(b"seed: 42\n").hexdigest(),
    }
    assert made[1]["check"] == {"kind": "file_exists", "file": "data"}
    ctx = CheckContext(tmp_path)
    assert {r.status for r in evaluate_assertions(made, ctx)} == {"pass"}
    write(tmp_path / "configs/exp.yaml", "seed: 7\n")
    results = evaluate_assertions(made, ctx)
    assert [r.status for r in results] == ["fail", "pass", "pass"]
    assert "configs/exp.yaml: sha256 is" in results[0].detail
    for bad in ("/etc/passwd", "../x", ""):
        with pytest.raises(UsageError, match="key_inputs"):
            key_input_assertions(str(tmp_path), [bad])


def test_pending_commands_lists_each_untrusted_argv_once(repo: Path) -> None:
    text = CONTRACT + "  - {id: again, text: t, check: {kind: command, argv: [touch, ran]}}\n"
    text += "  - {id: other, text: t, check: {kind: command, argv: [make], timeout: 5}}\n"
    contract = load_contract_text(text, "constraints.yaml")
    git_repo = GitRepo.discover(str(repo))
    store = TrustStore()
    pending = pending_commands(git_repo, contract, store)
    assert [(p.constraint, p.argv, p.timeout) for p in pending] == [
        ("cmd", ("touch", "ran"), 60.0),
        ("other", ("make",), 5.0),
    ]
    assert pending[0].to_json()["display"] == "touch ran"
    store.approve(repo_identity(git_repo), ["make"])
    assert [p.constraint for p in pending_commands(git_repo, contract, store)] == ["cmd"]
    assert pending_commands(git_repo, None, store) == []


def test_run_check_now_finds_the_task(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck = Checkpointer.open(str(repo))
    outcome = run_check_now(ck, None)  # no contract, no task
    assert (outcome.task, outcome.report.contract, outcome.exit_status) == (None, None, 0)
    with pytest.raises(NotFound):
        run_check_now(ck, "nosuch")
    ck.task_start("a", "g")
    assert run_check_now(ck, None).task == "a"  # the single active task
    ck.task_start("b", "g")
    with pytest.raises(UsageError, match="2 active tasks"):
        run_check_now(ck, None)
    monkeypatch.setenv("GIT_CKPT_TASK", "b")
    outcome = run_check_now(ck, None)
    assert outcome.task == "b" and len(outcome.events) == 1
    assert [e.type for e in ck.events("b")][-1] == "constraint.check"


def test_run_check_now_refuses_to_run_without_its_constraints(repo: Path) -> None:
    write(
        repo / ".agent/contracts/constraints.yaml",
        "constraints:\n  - {id: x, text: t, check: {kind: nope}}\n",
    )
    with pytest.raises(ContractError, match=r"constraints\.yaml:2"):
        run_check_now(Checkpointer.open(str(repo)), None)


def test_run_check_now_leaves_index_and_head_alone(repo: Path) -> None:
    write(repo / ".agent/contracts/constraints.yaml", CONTRACT)
    write(repo / "c.json", '{"seed": 42}')
    index = (repo / ".git/index").read_bytes()
    head = git(repo, "rev-parse", "HEAD")
    outcome = run_check_now(Checkpointer.open(str(repo)), None)
    assert outcome.report.contract == ".agent/contracts/constraints.yaml"
    assert outcome.changed == 2 and outcome.baseline == head
    assert (repo / ".git/index").read_bytes() == index
    assert git(repo, "status", "--porcelain") == "?? .agent/\n?? c.json".strip()
    assert not (repo / "ran").exists()
