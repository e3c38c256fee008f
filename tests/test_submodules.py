"""Submodules on resume (issue 11, item 4): a submodule whose HEAD moved is brought back
to the recorded commit when its work tree is clean, or the resume stops for a person
naming it; the resume checkpoint never records the drifted gitlink as its start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write


@pytest.fixture
def with_sub(repo: Path, tmp_path: Path) -> tuple[Path, str, str]:
    """`repo` with a local submodule `sub` at its second commit: (repo, first, second)."""
    upstream = tmp_path / "sub"
    upstream.mkdir()
    git(upstream, "init", "-q")
    write(upstream / "lib.py", "v = 1\n")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "one")
    first = git(upstream, "rev-parse", "HEAD")
    write(upstream / "lib.py", "v = 2\n")
    git(upstream, "commit", "-qam", "two")
    second = git(upstream, "rev-parse", "HEAD")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../sub", "sub")
    git(repo, "commit", "-qm", "submodule")
    return repo, first, second


def resume(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "resume", "t", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


def gitlink(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", f"{commit}:sub")


def test_a_moved_clean_submodule_is_checked_out_back(with_sub: tuple[Path, str, str]) -> None:
    repo, first, second = with_sub
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    git(repo / "sub", "checkout", "-q", first)
    code, out = resume(repo)
    assert code == 10  # drift: a person decides
    code, out = resume(repo, "--restore")
    assert code == 0, out.get("message")
    assert out["verify"]["decision"] == "restore"
    assert git(repo / "sub", "rev-parse", "HEAD") == second
    files = out["brief"]["recovery"]["files"]
    assert {"path": "sub", "action": "checked out", "why": "restore"} in files
    assert "`sub`: checked out (restore)" in out["brief_markdown"]
    made = out["resume_checkpoint"]["commit"]
    assert gitlink(repo, made) == second  # the recorded commit, not the drifted one
    code, again = resume(repo)
    assert code == 0 and again["verify"]["source_drift"] == []


def test_a_dirty_moved_submodule_stops_and_is_named(with_sub: tuple[Path, str, str]) -> None:
    repo, first, second = with_sub
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    git(repo / "sub", "checkout", "-q", first)
    write(repo / "sub" / "lib.py", "v = 'local work'\n")
    write(repo / "src" / "app.py", "print('drifted')\n")
    tips = len(ckpt_json(repo, "list", "t"))
    code, out = resume(repo, "--restore")
    assert code == 10, out.get("message")
    assert "sub (dirty submodule)" in out["message"]
    assert git(repo / "sub", "rev-parse", "HEAD") == first  # never discarded
    assert (repo / "sub" / "lib.py").read_text() == "v = 'local work'\n"
    files = out["verify"]["files"]
    assert {"path": "sub", "action": "left", "why": "dirty submodule"} in files
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"  # the rest restored
    # no resume checkpoint: the drifted gitlink is never recorded as the start
    listed = ckpt_json(repo, "list", "t")
    assert all(c["trigger"] != "resume" for c in listed)
    assert len(listed) == tips + 1  # only the safety checkpoint of --restore
    assert ckpt_json(repo, "task", "show", "t")["status"] == "not_ready"  # a person decides
    # once the person cleaned it up, the same resume brings it back
    git(repo / "sub", "checkout", "-q", "--", "lib.py")
    code, out = resume(repo, "--restore")
    assert code == 0, out.get("message")
    assert git(repo / "sub", "rev-parse", "HEAD") == second
    assert gitlink(repo, out["resume_checkpoint"]["commit"]) == second


def test_a_submodule_missing_the_commit_is_left_and_named(
    with_sub: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, _first, second = with_sub
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    git(repo / "sub", "commit", "-q", "--allow-empty", "-m", "three")
    third = git(repo / "sub", "rev-parse", "HEAD")
    ckpt(repo, "create", "-t", "t", "-m", "sub at three")
    git(repo / "sub", "reset", "-q", "--hard", second)
    git(repo / "sub", "reflog", "expire", "--expire=now", "--all")
    git(repo / "sub", "gc", "-q", "--prune=now")
    code, out = resume(repo, "--restore")
    assert code == 10, out.get("message")
    assert f"commit {third[:12]} is not in it" in out["message"]
    assert git(repo / "sub", "rev-parse", "HEAD") == second


def test_restore_command_reports_each_submodule(with_sub: tuple[Path, str, str]) -> None:
    repo, first, second = with_sub
    ckpt(repo, "task", "start", "t", "--goal", "g")
    base = ckpt_json(repo, "create", "-t", "t")
    git(repo / "sub", "checkout", "-q", first)
    dry = ckpt_json(repo, "restore", base["id"], "--dry-run")
    assert dry["submodules"] == [
        {"path": "sub", "commit": second, "action": "check out", "why": "restore"}
    ]
    assert git(repo / "sub", "rev-parse", "HEAD") == first  # a dry run changes nothing
    done = ckpt_json(repo, "restore", base["id"])
    assert done["submodules"][0]["action"] == "checked out" and done["skipped"] == []
    assert done["safety_checkpoint"] is not None  # undoes it: the drifted gitlink is kept
    assert git(repo / "sub", "rev-parse", "HEAD") == second
    ckpt(repo, "restore", done["safety_checkpoint"]["id"])
    assert git(repo / "sub", "rev-parse", "HEAD") == first
