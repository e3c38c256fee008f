"""Path checks see files that snapshots never hold (gitignored raw data, secrets)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, write

from git_agentckpt.contracts.watch import base_dir

CONTRACT = """\
constraints:
  - id: raw
    text: Raw data under data/raw is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
  - id: frozen
    text: The reference outputs do not change
    severity: warn
    check: {kind: protected_paths, paths: ["reference/**"]}
"""


@pytest.fixture
def research(repo: Path) -> Path:
    write(repo / ".gitignore", "data/\nreference/*.bin\n")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / "reference" / "expected.txt", "tracked\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract, ignored data")
    write(repo / "data" / "raw" / "train.csv", "a,b\n1,2\n")
    write(repo / "reference" / "weights.bin", "w0\n")
    return repo


def check(repo: Path) -> tuple[int, dict[str, object]]:
    result = ckpt(repo, "check", "t", "--json", ok=False)
    return result.exit_code, json.loads(result.stdout)


def status_of(doc: dict[str, object], cid: str) -> str:
    rows = doc["constraints"]
    assert isinstance(rows, list)
    return str(next(r["status"] for r in rows if r["id"] == cid))


def test_a_write_to_gitignored_raw_data_is_a_violation(research: Path) -> None:
    ckpt(research, "task", "start", "t", "--goal", "train")
    code, doc = check(research)
    assert code == 0 and status_of(doc, "raw") == "pass"
    write(research / "data" / "raw" / "train.csv", "a,b\n1,999\n")  # a new size: no clock needed
    code, doc = check(research)
    assert code == 1
    assert doc["blocking_failures"] == ["raw"]


def test_new_deleted_and_protected_ignored_files_are_seen(research: Path) -> None:
    ckpt(research, "task", "start", "t", "--goal", "train")
    write(research / "data" / "raw" / "extra.csv", "new\n")
    assert check(research)[1]["blocking_failures"] == ["raw"]
    os.unlink(research / "data" / "raw" / "extra.csv")
    os.unlink(research / "data" / "raw" / "train.csv")
    assert check(research)[1]["blocking_failures"] == ["raw"]  # a deletion is a write too
    write(research / "reference" / "weights.bin", "w1, retrained\n")
    _, doc = check(research)
    assert status_of(doc, "frozen") == "fail"


def test_a_task_started_before_the_contract_is_watched_from_its_first_check(
    repo: Path,
) -> None:
    write(repo / ".gitignore", "data/\n")
    write(repo / "data" / "raw" / "x.csv", "1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ignore data")
    ckpt(repo, "task", "start", "t", "--goal", "g")  # no contract yet: nothing recorded
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    assert check(repo)[0] == 0  # the first check records what is there
    write(repo / "data" / "raw" / "x.csv", "2\n")
    assert check(repo)[1]["blocking_failures"] == ["raw"]


def test_touching_a_tracked_file_without_changing_it_is_no_write(research: Path) -> None:
    ckpt(research, "task", "start", "t", "--goal", "train")
    later = time.time() + 100
    os.utime(research / "reference" / "expected.txt", (later, later))  # same content
    _, doc = check(research)
    assert status_of(doc, "frozen") == "pass"


@pytest.mark.parametrize(
    ("glob", "base"),
    [
        ("data/raw/**", "data/raw"),
        ("data/raw", "data/raw"),
        ("/build", "build"),
        ("a/b/*.csv", "a/b"),
        ("*.log", None),
        ("**/x", None),
        ("!data/x", None),
    ],
)
def test_the_directory_walked_for_a_glob(glob: str, base: str | None) -> None:
    assert base_dir(glob) == base
