"""Bad input: one line on stderr, a documented exit status, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, real_ckpt
from hypothesis import given
from hypothesis import strategies as st

from git_agentckpt.errors import BadTaskName
from git_agentckpt.store.refs import TaskName, is_valid_task_name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a b",
        "a..b",
        "/a",
        "a/",
        "a//b",
        ".hidden",
        "a/.x",
        "x.lock",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[",
        "a\\b",
        "end.",
        "@",
        "a@{b",
        "tab\tname",
    ],
)
def test_bad_task_names(repo: Path, name: str) -> None:
    result = ckpt(repo, "create", "-t", name, ok=False) if name else None
    if result is not None:
        assert result.exit_code == 2
        assert "invalid task name" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(BadTaskName):
        TaskName(name)


def test_task_prefix_clash(repo: Path) -> None:
    ckpt(repo, "task", "start", "a/b", "--goal", "g")
    result = ckpt(repo, "task", "start", "a", "--goal", "g", ok=False)
    assert result.exit_code == 2 and "cannot exist beside task 'a/b'" in result.stderr


@given(st.text(alphabet=st.characters(codec="ascii", exclude_characters="\x00"), max_size=20))
def test_task_name_agrees_with_git_check_ref_format(name: str) -> None:
    ours = is_valid_task_name(name)
    proc = subprocess.run(
        ["git", "check-ref-format", f"refs/agent/checkpoints/{name}"], capture_output=True
    )
    # git allows a few names we refuse on purpose (none here); we never accept what git refuses
    if ours:
        assert proc.returncode == 0, name


def test_not_a_repository(tmp_path: Path) -> None:
    result = ckpt(tmp_path, "list", ok=False)
    assert result.exit_code == 4
    assert "not a git repository" in result.stderr and "git init" in result.stderr


def test_bare_repository(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    result = ckpt(bare, "create", ok=False)  # needs a work tree
    assert result.exit_code == 4 and "bare repository" in result.stderr
    assert "list, log, show" in result.stderr  # what does work there
    assert ckpt(bare, "list").exit_code == 0  # reading does (a server's trail)


def test_unknown_checkpoint_and_task(repo: Path) -> None:
    assert ckpt(repo, "show", "deadbeef", ok=False).exit_code == 3
    assert ckpt(repo, "task", "show", "nope", ok=False).exit_code == 3
    assert ckpt(repo, "log", "nope", ok=False).exit_code == 3


def test_malformed_state_json(repo: Path) -> None:
    result = ckpt(repo, "create", "-t", "t", "--state", "{not json", ok=False)
    assert result.exit_code == 2 and "not valid JSON" in result.stderr
    (repo / "state.json").write_text("[1, 2]")
    result = ckpt(repo, "create", "-t", "t", "--state", "state.json", ok=False)
    assert result.exit_code == 2 and "JSON object" in result.stderr
    result = ckpt(repo, "create", "-t", "t", "--state", "missing.json", ok=False)
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_note_of_unknown_version_fails_closed(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    made = json.loads(ckpt(repo, "create", "-t", "t", "--json").stdout)
    git(
        repo,
        "notes",
        "--ref=agent/state",
        "add",
        "-f",
        "-m",
        '{"v": 99, "task": "t"}',
        made["commit"],
    )
    result = ckpt(repo, "task", "show", "t", ok=False)
    assert result.exit_code == 6 and "version 99" in result.stderr and "upgrade" in result.stderr
    result = ckpt(repo, "show", "t", "--json", ok=False)
    assert result.exit_code == 6
    assert json.loads(result.stdout)["exit"] == 6


def test_real_git_ckpt_entry_point(repo: Path) -> None:
    version = real_ckpt(repo, "--version")
    assert version.returncode == 0 and version.stdout.startswith("git-ckpt ")
    bad = real_ckpt(repo, "show", "nope")
    assert bad.returncode == 3
    assert "Traceback" not in bad.stderr and bad.stderr.startswith("git ckpt: error:")
    ckpt(repo, "task", "start", "sub", "--goal", "g")
    made = real_ckpt(repo, "create", "-t", "sub")
    assert made.returncode == 0 and len(made.stdout.strip()) == 26


def unpack_all(repo: Path) -> None:
    """Every packed object of `repo` made loose (`git unpack-objects`), its packs gone."""
    pack_dir = repo / ".git" / "objects" / "pack"
    for pack in sorted(pack_dir.glob("*.pack")):
        data = pack.read_bytes()
        for part in pack_dir.glob(pack.stem + ".*"):
            part.unlink()
        subprocess.run(["git", "unpack-objects", "-q"], cwd=repo, input=data, check=True)


def test_an_object_whose_bytes_no_longer_match_its_hash_is_named_not_an_internal_error(
    repo: Path,
) -> None:
    """A stored object edited in place (libgit2 refuses it: hash mismatch) makes the
    reading commands fail with exit 6 and one line naming the object, not an internal
    error."""
    import zlib

    ckpt(repo, "task", "start", "t", "--goal", "g")
    (repo / "a.txt").write_text("hi\n")
    ckpt(repo, "create", "-t", "t", "-m", "one")
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t")
    unpack_all(repo)  # a checkpoint's objects are written as a pack: edit a loose copy
    path = repo / ".git" / "objects" / tip[:2] / tip[2:]
    body = zlib.decompress(path.read_bytes()).replace(b"one", b"ONE")
    path.chmod(0o644)
    path.write_bytes(zlib.compress(body))
    for args in (("list", "t"), ("show", "t"), ("task", "show", "t")):
        out = ckpt(repo, *args, ok=False)
        assert out.exit_code == 6, (args, out.output)
        assert f"object {tip} is damaged (object hash mismatch" in out.output
        assert "internal error" not in out.output
