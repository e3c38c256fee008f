"""`git ckpt check` and `git ckpt trust` on real repositories."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, write

from git_agentckpt.contracts.engine import repo_identity
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.errors import UsageError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.recovery import person

CONTRACT = ".agent/contracts/constraints.yaml"


def contract(repo: Path, text: str, commit: bool = True) -> None:
    write(repo / CONTRACT, text)
    if commit:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "contract")


def check_json(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "check", *args, "--json", ok=False)
    return result.exit_code, json.loads(result.stdout)


def statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in doc["constraints"]}


def events(repo: Path, task: str = "t") -> list[dict[str, Any]]:
    out = ckpt(repo, "log", task, "--json").stdout
    return [json.loads(line) for line in out.splitlines()]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


RAW_SHA = sha("a,b\n1,2\n")
ALL_KINDS = f"""\
constraints:
  - id: api-frozen
    text: Do not modify the public API under src/api
    check: {{kind: protected_paths, paths: ["src/api/**"]}}
  - id: raw-data
    text: Raw data is read-only
    check: {{kind: forbidden_paths, paths: ["data/raw/"]}}
  - id: readme
    text: The README exists
    check: {{kind: file_exists, file: README.md}}
  - id: seed-said
    text: The README states the seed
    check: {{kind: file_contains, file: README.md, text: "seed 42"}}
  - id: seed-line
    text: The README has a seed line
    check: {{kind: file_matches, file: README.md, regex: "^seed [0-9]+$"}}
  - id: data-pinned
    text: The data file is the one we agreed on
    check: {{kind: file_sha256, file: data/raw/x.csv, sha256: {RAW_SHA}}}
  - id: seed-json
    text: Experiments must use seed 42
    check: {{kind: json_value, file: config.json, path: train.seed, equals: 42}}
  - id: seed-yaml
    text: The YAML config uses seed 42
    check: {{kind: yaml_value, file: config.yaml, path: train.seed, equals: 42}}
  - id: seed-toml
    text: The TOML config uses seed 42
    check: {{kind: toml_value, file: exp.toml, path: exp.seed, equals: 42}}
  - id: small
    text: Change at most 2 files
    check: {{kind: max_changed_files, max: 2}}
  - id: smoke
    text: The smoke command passes
    check: {{kind: command, argv: ["grep", "-q", "seed 42", "README.md"], timeout: 10}}
  - id: notes
    text: Write down what you tried
"""


@pytest.fixture
def research(repo: Path) -> Path:
    write(repo / "README.md", "Experiments use seed 42.\nseed 42\n")
    write(repo / "src/api/public.py", "def f(): ...\n")
    write(repo / "data/raw/x.csv", "a,b\n1,2\n")
    write(repo / "config.json", json.dumps({"train": {"seed": 42}}))
    write(repo / "config.yaml", "train:\n  seed: 42\n")
    write(repo / "exp.toml", "[exp]\nseed = 42\n")
    contract(repo, ALL_KINDS)
    TrustStore().approve(
        repo_identity(GitRepo.discover(str(repo))), ["grep", "-q", "seed 42", "README.md"]
    )
    ckpt(repo, "task", "start", "t", "--goal", "reproduce table 2")
    return repo


def test_every_check_kind_passes_then_fails(research: Path) -> None:
    repo = research
    status, doc = check_json(repo)
    assert status == 0, doc
    assert set(statuses(doc).values()) == {"pass", "unchecked"}
    assert statuses(doc)["notes"] == "unchecked"
    assert doc["counts"] == {"pass": 11, "fail": 0, "error": 0, "unchecked": 1, "untrusted": 0}

    write(repo / "src/api/public.py", "def g(): ...\n")
    write(repo / "data/raw/x.csv", "a,b\n1,3\n")
    write(repo / "README.md", "Experiments use seed 7.\n")
    write(repo / "config.json", json.dumps({"train": {"seed": 7}}))
    write(repo / "config.yaml", "train:\n  seed: '42'\n")
    write(repo / "exp.toml", "[exp]\nseed = 42.5\n")
    status, doc = check_json(repo)
    assert status == 1
    got = statuses(doc)
    assert got.pop("notes") == "unchecked"
    assert got.pop("readme") == "pass"
    assert set(got.values()) == {"fail"}, got
    details = {c["id"]: c["detail"] for c in doc["constraints"]}
    assert "src/api/public.py" in details["api-frozen"]
    assert "data/raw/x.csv" in details["raw-data"]
    assert "6 files changed" in details["small"]
    assert "exit 1" in details["smoke"]
    (repo / "README.md").unlink()
    status, doc = check_json(repo)
    assert statuses(doc)["readme"] == "fail"
    assert set(doc["blocking_failures"]) == set(got) | {"readme"}


def test_protected_paths_compare_with_the_task_baseline_not_head(research: Path) -> None:
    repo = research
    write(repo / "src/api/public.py", "def g(): ...\n")
    git(repo, "commit", "-q", "-am", "change the api")
    status, doc = check_json(repo)
    assert statuses(doc)["api-frozen"] == "fail" and status == 1
    baseline = git(repo, "rev-parse", "HEAD~1")
    assert doc["baseline"] == baseline
    ckpt(repo, "create", "-m", "later")  # a later checkpoint keeps the task's baseline
    assert statuses(check_json(repo)[1])["api-frozen"] == "fail"


def test_without_a_task_check_compares_with_head_and_logs_nothing(repo: Path) -> None:
    contract(
        repo,
        'constraints:\n  - {id: app, text: t, check: {kind: protected_paths, paths: ["src/**"]}}\n',
    )
    status, doc = check_json(repo)
    assert (status, doc["task"], doc["events"]) == (0, None, [])
    write(repo / "src/app.py", "changed\n")
    status, doc = check_json(repo)
    assert status == 1 and doc["baseline"] == git(repo, "rev-parse", "HEAD")
    assert git(repo, "for-each-ref", "refs/agent/") == ""
    text = ckpt(repo, "check", ok=False).stdout
    assert "no task: not logged" in text


def test_block_and_warn_severities(repo: Path) -> None:
    contract(
        repo,
        "constraints:\n"
        "  - {id: w, text: warn only, severity: warn, check: {kind: file_exists, file: nope}}\n",
    )
    ckpt(repo, "task", "start", "t", "--goal", "g")
    result = ckpt(repo, "check", ok=False)
    assert result.exit_code == 0
    assert "fail       warn   w: warn only" in result.stdout
    contract(
        repo,
        "constraints:\n"
        "  - {id: w, text: warn only, severity: warn, check: {kind: file_exists, file: nope}}\n"
        "  - {id: b, text: must block, severity: block, check: {kind: file_exists, file: nope}}\n",
    )
    result = ckpt(repo, "check", "t", ok=False)
    assert result.exit_code == 1
    assert "blocking: b" in result.stdout


def test_check_writes_check_and_violation_events(research: Path) -> None:
    repo = research
    write(repo / "config.json", json.dumps({"train": {"seed": 7}}))
    check_json(repo)
    log = events(repo)
    checks = [e for e in log if e["type"] == "constraint.check"]
    violations = [e for e in log if e["type"] == "constraint.violation"]
    assert len(checks) == 1
    data = checks[0]["data"]
    assert data["counts"] == {"pass": 10, "fail": 1, "error": 0, "unchecked": 1, "untrusted": 0}
    recorded = {c["id"]: c["status"] for c in data["constraints"]}
    assert (recorded["seed-json"], recorded["api-frozen"], recorded["notes"]) == (
        "fail",
        "pass",
        "unchecked",
    )
    assert data["blocking_failures"] == ["seed-json"]
    assert data["changed_files"] == 1
    assert [v["data"]["constraint"] for v in violations] == ["seed-json"]
    violation = violations[0]["data"]
    assert (violation["severity"], violation["status"]) == ("block", "fail")
    assert "expected 42" in violation["detail"]


def test_malformed_contract_exits_2_naming_file_and_line(research: Path) -> None:
    repo = research
    contract(
        repo,
        "constraints:\n  - id: x\n    text: t\n    check: {kind: nonsense, file: a}\n",
        commit=False,
    )
    result = ckpt(repo, "check", ok=False)
    assert result.exit_code == 2
    assert "constraints.yaml:4: constraints[0].check.kind: unknown check kind" in result.stderr
    write(repo / CONTRACT, "constraints:\n  - id: x\n    text: [unclosed\n")
    result = ckpt(repo, "check", "--json", ok=False)
    assert result.exit_code == 2
    assert json.loads(result.stdout)["exit"] == 2
    assert "constraints.yaml:" in json.loads(result.stdout)["error"]
    assert not [e for e in events(repo) if e["type"] == "constraint.check"]


def test_untrusted_command_is_never_executed(repo: Path) -> None:
    contract(
        repo,
        "constraints:\n"
        "  - {id: evil, text: looks harmless, check: {kind: command, argv: [touch, pwned]}}\n",
    )
    ckpt(repo, "task", "start", "t", "--goal", "g")
    status, doc = check_json(repo)
    assert statuses(doc) == {"evil": "untrusted"}
    assert status == 0  # untrusted is reported, never blocking
    assert not (repo / "pwned").exists()
    assert "git ckpt trust" in doc["constraints"][0]["detail"]


def test_trusted_command_runs_and_one_byte_change_loses_trust(repo: Path) -> None:
    contract(
        repo,
        "constraints:\n  - {id: mk, text: makes it, check: {kind: command, argv: [touch, made]}}\n",
    )
    TrustStore().approve(repo_identity(GitRepo.discover(str(repo))), ["touch", "made"])
    status, doc = check_json(repo)
    assert (status, statuses(doc)) == (0, {"mk": "pass"})
    assert (repo / "made").exists()
    contract(
        repo,
        "constraints:\n  - {id: mk, text: makes it, check: {kind: command, argv: [touch, madE]}}\n",
    )
    status, doc = check_json(repo)
    assert statuses(doc) == {"mk": "untrusted"}
    assert not (repo / "madE").exists()


def test_trust_is_refused_without_a_terminal(repo: Path) -> None:
    contract(repo, "constraints:\n  - {id: c, text: t, check: {kind: command, argv: [make, x]}}\n")
    result = ckpt(repo, "trust", input="y\n", ok=False)
    assert result.exit_code == 2
    assert "stdin is not a terminal" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert TrustStore().list() == []


def test_trust_approves_at_a_terminal_lists_and_revokes(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    contract(
        repo,
        "constraints:\n"
        "  - {id: a, text: t, check: {kind: command, argv: [make, test]}}\n"
        '  - {id: b, text: t, check: {kind: command, argv: [echo, "\\e[2Jgotcha"]}}\n',
    )
    monkeypatch.setattr(person, "stdin_is_terminal", lambda: True)
    result = ckpt(repo, "trust", input="y\nn\n")
    assert "make test" in result.stdout
    assert "echo $'\\e[2Jgotcha'" in result.stdout and "\x1b" not in result.stdout
    repo_id = repo_identity(GitRepo.discover(str(repo)))
    entries = TrustStore().list(repo_id)
    assert [e.argv for e in entries] == [("make", "test")]
    assert "nothing to approve" not in result.stdout
    listed = json.loads(ckpt(repo, "trust", "--list", "--json").stdout)
    assert [e["argv"] for e in listed] == [["make", "test"]]
    assert ckpt(repo, "trust", input="n\n").stdout.count("fingerprint:") == 1  # only b pending
    fp = entries[0].fingerprint
    assert ckpt(repo, "trust", "--revoke", fp[:12]).exit_code == 0
    assert TrustStore().list(repo_id) == []
    assert ckpt(repo, "trust", "--revoke", fp[:12], ok=False).exit_code == 3
    assert ckpt(repo, "trust", "--list", "--revoke", fp, ok=False).exit_code == 2


def test_trust_with_nothing_pending(repo: Path) -> None:
    assert "nothing to approve" in ckpt(repo, "trust").stdout
    assert "no approved command" in ckpt(repo, "trust", "--list").stdout


def test_drift_recommendation_is_printed(research: Path) -> None:
    repo = research
    ckpt(repo, "check")
    write(repo / "config.json", json.dumps({"train": {"seed": 7}}))
    result = ckpt(repo, "check", ok=False)
    assert "drift suspected (constraint_regressed): constraint seed-json" in result.stdout
    assert "recommended: git ckpt resume --brief-only t" in result.stdout
    again = ckpt(repo, "check", ok=False)
    assert "drift suspected" not in again.stdout and "recommended" not in again.stdout


def test_task_argument_and_option_must_agree(research: Path) -> None:
    assert ckpt(research, "check", "t", "-t", "t").exit_code == 0
    assert ckpt(research, "check", "t", "-t", "u", ok=False).exit_code == 2
    assert ckpt(research, "check", "nosuch", ok=False).exit_code == 3


def test_trust_lists_and_approves_command_assertions_of_checkpoints(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command assertion (maybe fetched from another clone) runs on resume only once
    this user approved it; `trust` offers it like a contract's command."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "create", "-t", "t", "--assert", "made@command:touch assertion-ran")
    before = ckpt(repo, "resume", "t", "--json", ok=False)
    assert not (repo / "assertion-ran").exists()  # untrusted: never run
    assert "untrusted" in before.stdout
    monkeypatch.setattr(person, "stdin_is_terminal", lambda: True)
    offered = ckpt(repo, "trust", input="y\n")
    assert "assertion made (assertion of task t, checkpoint" in offered.stdout
    assert "touch assertion-ran" in offered.stdout
    entries = TrustStore().list(repo_identity(GitRepo.discover(str(repo))))
    assert [e.argv for e in entries] == [("touch", "assertion-ran")]
    after = ckpt(repo, "resume", "t", "--json", ok=False)
    assert after.exit_code == 0, after.stdout
    assert (repo / "assertion-ran").exists()
    assert "nothing to approve" in ckpt(repo, "trust").stdout


def test_the_python_facade_cannot_approve_a_command_without_a_person(repo: Path) -> None:
    import git_agentckpt

    contract(repo, "constraints:\n  - {id: a, text: t, check: {kind: command, argv: [make]}}\n")
    ck = git_agentckpt.open(str(repo))
    (pending,) = ck.pending_approvals()
    with pytest.raises(UsageError, match="needs a person at a terminal"):
        ck.approve(pending, note="by an agent")
    assert ck.approvals() == []
