"""restore: the working tree back to a snapshot, with a safety checkpoint first."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import git
from helpers import ckpt, ckpt_json, write


def test_restore_round_trip_with_safety_checkpoint(repo: Path) -> None:
    write(repo / "results.csv", "a,1\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t", "-m", "good")
    write(repo / "src" / "app.py", "print('broken')\n")
    write(repo / "scratch.txt", "not in any checkpoint\n")
    (repo / "results.csv").unlink()
    write(repo / "debug.log", "ignored stays\n")
    dry = ckpt_json(repo, "restore", str(first["id"]), "--dry-run")
    assert sorted(dry["written"]) == ["results.csv", "src/app.py"]
    assert dry["deleted"] == ["scratch.txt"]
    assert (repo / "scratch.txt").exists()  # dry run changed nothing
    done = ckpt_json(repo, "restore", str(first["id"]))
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"
    assert (repo / "results.csv").read_text() == "a,1\n"
    assert not (repo / "scratch.txt").exists()
    assert (repo / "debug.log").read_text() == "ignored stays\n"
    safety = done["safety_checkpoint"]
    assert safety is not None and safety["trigger"] == "pre_restore"
    listed = [(c["kind"], c["trigger"]) for c in ckpt_json(repo, "list", "t")[:2]]
    assert listed == [("full", "pre_restore"), ("full", "manual")]  # one safety checkpoint
    # the restore can be undone
    ckpt(repo, "restore", str(safety["id"]))
    assert (repo / "scratch.txt").read_text() == "not in any checkpoint\n"
    assert (repo / "src" / "app.py").read_text() == "print('broken')\n"
    # the user's index was never written
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_restore_without_unsaved_work_takes_no_safety(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    write(repo / "src" / "app.py", "print(2)\n")
    ckpt(repo, "create", "-t", "t")
    out = ckpt_json(repo, "restore", str(first["commit"])[:12])
    assert out["safety_checkpoint"] is None
    assert out["written"] == ["src/app.py"]


def test_restore_modes_symlinks_and_nested_dirs(repo: Path) -> None:
    script = repo / "tools" / "run.sh"
    write(script, "#!/bin/sh\necho hi\n")
    os.chmod(script, 0o755)
    os.symlink("tools/run.sh", repo / "run")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    (repo / "run").unlink()
    script.unlink()
    (repo / "tools").rmdir()
    write(repo / "tools", "now a file\n")
    ckpt(repo, "restore", str(first["id"]))
    assert os.access(script, os.X_OK)
    assert os.readlink(repo / "run") == "tools/run.sh"


def test_restore_refuses_writing_through_a_symlinked_dir(repo: Path, tmp_path: Path) -> None:
    write(repo / "out" / "a.txt", "a\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "out" / "a.txt").unlink()
    (repo / "out").rmdir()
    os.symlink(outside, repo / "out")
    result = ckpt(repo, "restore", str(first["id"]), ok=False)
    assert result.exit_code == 2 and "symbolic link" in result.stderr
    assert list(outside.iterdir()) == []
