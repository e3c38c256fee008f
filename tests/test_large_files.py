"""Untracked files above `[snapshot] max_file_size` are pinned by sha256, never stored."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

from git_agentckpt.git import large
from git_agentckpt.settings import parse_size

CAP = "1k"


def configure(repo: Path, cap: str = CAP) -> None:
    write(repo / ".agent" / "ckpt.toml", f'[snapshot]\nmax_file_size = "{cap}"\n')


def blob_ids(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[0] for line in out.splitlines() if " blob " in line}


def tree_paths(repo: Path, rev: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()


def test_a_large_untracked_file_is_pinned_not_stored(repo: Path) -> None:
    configure(repo)
    big = os.urandom(4096)
    (repo / "model.pt").write_bytes(big)
    write(repo / "notes.txt", "small\n")
    ckpt(repo, "task", "start", "t", "--goal", "train")
    files = tree_paths(repo, "refs/agent/checkpoints/t")
    assert "notes.txt" in files and "model.pt" not in files
    shown = ckpt_json(repo, "show", "t")
    pinned = [a for a in shown["assertions"] if a["check"].get("file") == "model.pt"]
    digest = large.sha256_of(str(repo / "model.pt"))
    assert pinned == [
        {
            "id": "large-model.pt",
            "text": "model.pt is the 4096-byte file this checkpoint saw (not stored: too large)",
            "check": {"kind": "file_sha256", "file": "model.pt", "sha256": digest},
        }
    ]
    # later snapshots do not even read it: it is in the private excludes
    exclude = (repo / ".git" / "agent" / "exclude").read_text()
    assert "/model.pt\n" in exclude
    before = blob_ids(repo)
    (repo / "model.pt").write_bytes(os.urandom(4096))  # a new epoch's weights
    made = ckpt_json(repo, "create", "-t", "t", "-m", "epoch 2")
    assert "model.pt" not in tree_paths(repo, made["commit"])
    new_blobs = blob_ids(repo) - before
    sizes = {
        git(repo, "cat-file", "-s", b) for b in new_blobs
    }  # only small objects (state, notes, events): never the 4096-byte weights
    assert "4096" not in sizes
    again = ckpt_json(repo, "show", "t")
    new_digest = large.sha256_of(str(repo / "model.pt"))
    assert any(a["check"].get("sha256") == new_digest for a in again["assertions"])


def test_resume_sees_a_changed_large_file(repo: Path) -> None:
    configure(repo)
    (repo / "data.bin").write_bytes(os.urandom(3000))
    ckpt(repo, "task", "start", "t", "--goal", "train")
    ok = ckpt(repo, "resume", "t", "--json", ok=False)
    assert ok.exit_code == 0, ok.output
    (repo / "data.bin").write_bytes(os.urandom(3000))
    changed = ckpt(repo, "resume", "t", "--json", ok=False)
    assert changed.exit_code == 11
    assert "large-data.bin" in changed.stdout


def test_tracked_large_files_and_small_ones_stay_in_the_snapshot(repo: Path) -> None:
    configure(repo)
    (repo / "tracked.bin").write_bytes(os.urandom(2048))
    git(repo, "add", "tracked.bin")
    git(repo, "commit", "-qm", "a large file the user tracks")
    (repo / "small.bin").write_bytes(os.urandom(512))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = ckpt_json(repo, "create", "-t", "t")
    files = tree_paths(repo, made["commit"])
    assert "tracked.bin" in files and "small.bin" in files
    assert not large.load(str(repo / ".git" / "agent"))


def test_a_large_file_that_shrinks_or_goes_is_forgotten(repo: Path) -> None:
    configure(repo)
    (repo / "out.bin").write_bytes(os.urandom(2048))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "create", "-t", "t")
    agent = str(repo / ".git" / "agent")
    assert list(large.load(agent)) == ["out.bin"]
    (repo / "out.bin").write_bytes(b"tiny\n")
    made = ckpt_json(repo, "create", "-t", "t")
    assert "out.bin" in tree_paths(repo, made["commit"])  # stored again, as any small file
    assert large.load(agent) == {}
    assert "/out.bin" not in (repo / ".git" / "agent" / "exclude").read_text()
    (repo / "out.bin").write_bytes(os.urandom(2048))
    ckpt(repo, "create", "-t", "t")
    (repo / "out.bin").unlink()
    made = ckpt_json(repo, "create", "-t", "t")
    assert large.load(agent) == {}
    assert not [a for a in ckpt_json(repo, "show", "t")["assertions"] if "out" in a["id"]]


def test_no_cap_stores_everything(repo: Path) -> None:
    configure(repo, "0")
    (repo / "model.pt").write_bytes(os.urandom(4096))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = ckpt_json(repo, "create", "-t", "t")
    assert "model.pt" in tree_paths(repo, made["commit"])


def test_verification_and_check_ignore_the_large_file(repo: Path) -> None:
    configure(repo)
    (repo / "weights.pt").write_bytes(os.urandom(4096))
    ckpt(repo, "task", "start", "t", "--goal", "train")
    done = ckpt(repo, "resume", "t", "--json", ok=False)
    assert done.exit_code == 0, done.output
    verify = json.loads(done.stdout)["verify"]
    assert verify["clean"] is True and verify["source_drift"] == []
    (repo / "weights.pt").write_bytes(os.urandom(4096))  # changed: assertions see it
    changed = ckpt(repo, "resume", "t", "--json", ok=False)
    assert json.loads(changed.stdout)["verify"]["source_drift"] == []
    assert changed.exit_code == 11


def test_special_characters_in_a_large_file_name(repo: Path) -> None:
    configure(repo)
    name = "run [1] #2 *best*.pt"
    (repo / name).write_bytes(os.urandom(2048))
    (repo / "run 1.pt").write_bytes(b"small, and alike in name\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = ckpt_json(repo, "create", "-t", "t")
    files = tree_paths(repo, made["commit"])
    assert name not in files and "run 1.pt" in files
    (repo / name).write_bytes(os.urandom(2048))
    made = ckpt_json(repo, "create", "-t", "t")
    assert name not in tree_paths(repo, made["commit"])
    assert list(large.load(str(repo / ".git" / "agent"))) == [name]


@pytest.mark.parametrize(
    ("text", "size"),
    [(0, 0), ("100MiB", 100 << 20), ("1.5G", int(1.5 * (1 << 30))), ("500k", 500 << 10)],
)
def test_sizes_parse(text: object, size: int) -> None:
    assert parse_size(text, "x") == size


def test_a_bad_size_is_one_clear_error(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    configure(repo, "lots")
    result = ckpt(repo, "create", "-t", "t", ok=False)
    assert result.exit_code == 2
    assert "max_file_size must be a size" in result.output


def test_check_still_sees_a_large_file_under_a_forbidden_glob(repo: Path) -> None:
    """Left out of the snapshot for its size, it still counts as written, like any file."""
    configure(repo)
    write(
        repo / ".agent" / "contracts" / "constraints.yaml",
        "constraints:\n"
        "  - id: raw\n"
        "    text: data/raw is read-only\n"
        "    check: {kind: forbidden_paths, paths: ['data/raw/**']}\n",
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "contract")
    ckpt(repo, "task", "start", "t", "--goal", "train")
    assert ckpt(repo, "check", "t").exit_code == 0
    (repo / "data" / "raw").mkdir(parents=True)
    (repo / "data" / "raw" / "big.bin").write_bytes(os.urandom(4096))
    result = ckpt(repo, "check", "t", "--json", ok=False)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["blocking_failures"] == ["raw"]
