"""Filters and line endings (issue 11, item 2): restore writes the bytes `git checkout`
would, and resume's verification uses git's notion of unchanged.

Three shapes, each on a real repository made here: a clean/smudge filter (rot13 by
`tr`, its own inverse, so a file written as stored is cleaned again by the next
checkpoint), `*.txt text eol=crlf`, and `core.autocrlf=true`. The reference is git
itself: a `git worktree add` of the checkpoint commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write

ROT13 = "tr A-Za-z N-ZA-Mn-za-m"
SHAPES = ("filter", "eol=crlf", "autocrlf")
FILE = {"filter": "data.dat", "eol=crlf": "notes.txt", "autocrlf": "notes.txt"}


def shape(repo: Path, kind: str) -> str:
    """Configure `kind`, commit it, and give the file the bytes git checks out; its path."""
    if kind == "filter":
        write(repo / ".gitattributes", "*.dat filter=rot13\n")
        git(repo, "config", "filter.rot13.clean", ROT13)
        git(repo, "config", "filter.rot13.smudge", ROT13)
    elif kind == "eol=crlf":
        write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    else:
        git(repo, "config", "core.autocrlf", "true")
    path = FILE[kind]
    write(repo / path, "Hello World\nsecond line\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", kind)
    (repo / path).unlink()
    git(repo, "checkout", "--", path)  # exactly what git writes for it
    return path


def checked_out(repo: Path, tmp_path: Path, commit: str, path: str) -> bytes:
    """The bytes `git checkout` of `commit` writes at `path`."""
    where = tmp_path / f"checkout-{commit[:8]}"
    git(repo, "worktree", "add", "-q", "--detach", str(where), commit)
    return (where / path).read_bytes()


def stored(repo: Path, commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "cat-file", "blob", f"{commit}:{path}"], cwd=repo, capture_output=True, check=True
    ).stdout


@pytest.mark.parametrize("kind", SHAPES)
def test_restore_writes_what_git_checkout_writes(repo: Path, tmp_path: Path, kind: str) -> None:
    path = shape(repo, kind)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t", "-m", "good")
    expected = checked_out(repo, tmp_path, first["commit"], path)
    assert expected != stored(repo, first["commit"], path)  # git converts this file
    assert (repo / path).read_bytes() == expected
    (repo / path).write_bytes(b"Changed\r\n" if kind != "filter" else b"Changed\n")
    done = ckpt_json(repo, "restore", first["id"])
    assert done["written"] == [path]
    assert (repo / path).read_bytes() == expected
    # the next checkpoint stores the very blob the first one did (not cleaned twice)
    again = ckpt_json(repo, "create", "-t", "t", "-m", "after restore")
    assert git(repo, "rev-parse", f"{again['commit']}:{path}") == git(
        repo, "rev-parse", f"{first['commit']}:{path}"
    )
    assert again["tree"] == first["tree"]


def test_restore_converts_by_the_attributes_of_the_checkpoint(repo: Path, tmp_path: Path) -> None:
    """A `.gitattributes` restored with the files decides their bytes, as in checkout."""
    write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    write(repo / "a.txt", "one\r\ntwo\r\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    (repo / ".gitattributes").unlink()
    write(repo / "a.txt", "changed\n")
    ckpt(repo, "restore", first["id"])
    assert (repo / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (repo / "a.txt").read_bytes() == checked_out(repo, tmp_path, first["commit"], "a.txt")


def test_odd_names_are_converted_too(repo: Path, tmp_path: Path) -> None:
    """Names with a newline, a space, a leading quote or space go through the batch."""
    write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    names = ["new\nline.txt", "with space.txt", '"quoted.txt', " lead.txt", "d/x.txt"]
    for name in names:
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_bytes(b"one\r\ntwo\r\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    for name in names:
        (repo / name).write_bytes(b"changed\n")
    ckpt(repo, "restore", first["id"])
    for name in names:
        assert (repo / name).read_bytes() == b"one\r\ntwo\r\n", name
    assert ckpt_json(repo, "create", "-t", "t")["tree"] == first["tree"]


def logging_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` first on PATH that logs each call, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls.log"
    script = bin_dir / "git"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("kind", ["plain", "eol=crlf"])
def test_conversion_runs_git_once_and_only_when_an_attribute_applies(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    if kind == "eol=crlf":
        write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    for i in range(20):
        write(repo / f"d{i % 4}" / f"f{i}.txt", f"line {i}\n")
    first = ckpt_json(repo, "task", "start", "t", "--goal", "g")
    for i in range(20):
        write(repo / f"d{i % 4}" / f"f{i}.txt", "changed\n")
    ckpt(repo, "create", "-t", "t")  # the current tree is known: no safety snapshot below
    log = logging_git(tmp_path, monkeypatch)
    done = ckpt_json(repo, "restore", first["id"])
    assert len(done["written"]) == 20
    calls = log.read_text().splitlines() if log.exists() else []  # the daemon: none at all
    converting = [c for c in calls if "cat-file" in c or "check-attr" in c]
    if kind == "plain":
        assert converting == []  # nothing applies: no process at all
    else:
        assert len(converting) == 2  # one check-attr, one cat-file for the 20 files
        assert (repo / "d0" / "f0.txt").read_bytes() == b"line 0\r\n"


def test_a_failing_smudge_filter_stops_before_anything_is_written(repo: Path) -> None:
    path = shape(repo, "filter")
    first = ckpt_json(repo, "task", "start", "t", "--goal", "g")
    (repo / path).write_bytes(b"Changed\n")
    write(repo / "src" / "app.py", "print('changed')\n")
    git(repo, "config", "filter.rot13.smudge", "no-such-smudge-program")
    result = ckpt(repo, "restore", first["id"], ok=False)
    assert result.exit_code == 1, result.output
    assert f"filter 'rot13' failed on '{path}'" in result.stderr
    assert "no-such-smudge-program" in result.stderr and "nothing was written" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (repo / path).read_bytes() == b"Changed\n"
    assert (repo / "src" / "app.py").read_text() == "print('changed')\n"


def test_a_missing_lfs_like_process_filter_names_the_path(repo: Path) -> None:
    """A long-running `process` filter (as git-lfs installs) that cannot start: the
    error names the path and the filter, and nothing is written."""
    write(repo / ".gitattributes", "*.bin filter=lfs -text\n")
    git(repo, "config", "filter.lfs.clean", "cat")
    git(repo, "config", "filter.lfs.smudge", "cat")
    write(repo / "model.bin", "weights v1\n")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    first = ckpt_json(repo, "create", "-t", "t")
    write(repo / "model.bin", "weights v2\n")
    write(repo / "src" / "app.py", "print('changed')\n")
    past = time.time() - 3600  # not racily clean: the next snapshot runs no filter
    for path in (repo / "model.bin", repo / "src" / "app.py"):
        os.utime(path, (past, past))
    ckpt(repo, "create", "-t", "t")  # the current tree is a checkpoint's: no safety needed
    git(repo, "config", "filter.lfs.process", "git-lfs-not-installed filter-process")
    git(repo, "config", "filter.lfs.required", "true")
    result = ckpt(repo, "restore", first["id"], ok=False)
    assert result.exit_code == 1, result.output
    assert "filter 'lfs' failed on 'model.bin'" in result.stderr
    assert "git-lfs-not-installed" in result.stderr
    assert (repo / "model.bin").read_text() == "weights v2\n"
    assert (repo / "src" / "app.py").read_text() == "print('changed')\n"


# -- verification: git's notion of unchanged -----------------------------------------------


def resume(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "resume", "t", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("kind", SHAPES)
def test_an_unchanged_converted_file_is_clean_for_resume(repo: Path, kind: str) -> None:
    """The private index holds a later version, so `git status` and the expected tree
    disagree and verification settles it by the file: hashed as `git add` would."""
    path = shape(repo, kind)
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    baseline = ckpt_json(repo, "list", "t")[0]
    original = (repo / path).read_bytes()
    (repo / path).write_bytes(original.replace(b"Hello", b"Howdy"))
    ckpt(repo, "create", "-t", "t", "-m", "later")
    (repo / path).write_bytes(original)  # back to what the baseline holds, as git wrote it
    assert git(repo, "status", "--porcelain", "--", path) == ""  # git: unchanged
    code, out = resume(repo, "--from", baseline["id"])
    assert code == 0, out.get("message")
    assert out["verify"]["source_drift"] == []
    assert (repo / path).read_bytes() == original


def test_regenerable_output_comes_back_with_its_line_endings(repo: Path, tmp_path: Path) -> None:
    write(repo / ".gitattributes", "*.csv text eol=crlf\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attributes")
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "snapshot.regenerable", '["out/"]')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "settings")
    write(repo / "out" / "table.csv", "a,1\r\nb,2\r\n")  # untracked output, snapshotted
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    start = ckpt_json(repo, "list", "t")[0]
    write(repo / "out" / "table.csv", "a,9\n")
    code, out = resume(repo)
    assert code == 0, out.get("message")
    files = out["brief"]["recovery"]["files"]
    assert {"path": "out/table.csv", "action": "brought back", "why": "regenerable"} in files
    assert (repo / "out" / "table.csv").read_bytes() == b"a,1\r\nb,2\r\n"
    assert (repo / "out" / "table.csv").read_bytes() == checked_out(
        repo, tmp_path, start["commit"], "out/table.csv"
    )


def test_rollback_tests_candidates_on_the_bytes_git_checks_out(repo: Path) -> None:
    """A sha256 pinned from a CRLF file holds for the checkpoint that has it: the
    candidate's scratch copy is converted as checkout would, not written as stored."""
    write(repo / ".gitattributes", "*.txt text eol=crlf\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attributes")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:x")
    good = b"GOOD\r\n"
    pin = f"good@file_sha256:model.txt={hashlib.sha256(good).hexdigest()}"
    (repo / "model.txt").write_bytes(good)
    c1 = ckpt_json(repo, "create", "-t", "t", "--assert", pin)
    (repo / "model.txt").write_bytes(b"BAD\r\n")
    ckpt_json(repo, "create", "-t", "t", "--assert", pin)
    code, out = resume(repo)
    assert code == 0, out.get("message")
    assert out["assertions"]["rollback"]["target"]["commit"] == c1["commit"]
    assert (repo / "model.txt").read_bytes() == good
