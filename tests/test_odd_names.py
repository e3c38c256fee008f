"""File names that are not UTF-8, and type changes (issue 11, items 8 and 10).

A file named b"caf\\xe9.txt" (Latin-1, as an old program writes it) goes
through every command: in-process, through real `git ckpt`, through the warm
server. Text output quotes names as git does (`core.quotePath`); JSON carries
them losslessly (a string beginning with `"` is git's quoted form, and
`diff --json` adds `path_bytes_b64`); stored records give the bytes back.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git
from daemon_helpers import ok, running_status, serving, status
from helpers import ckpt, ckpt_json, real_ckpt
from test_repo_layouts import assert_snapshot_is_plumbing

from git_agentckpt.paths import from_json, fs_bytes, quote, to_json, unquote

LATIN1 = b"caf\xe9.txt"  # not UTF-8
UTF8 = "caf\u00e9.txt".encode()  # the same word in UTF-8
TABBED = b"tab\there.txt"
SHOWN = '"caf\\351.txt"'  # how git prints LATIN1 (core.quotePath, the default)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The per-worktree daemon on for this test (tests/daemon_helpers.py)."""
    yield from serving(monkeypatch, tmp_path)


def put(repo: Path, name: bytes, data: bytes) -> None:
    with open(os.path.join(os.fsencode(repo), name), "wb") as fh:
        fh.write(data)


def read(repo: Path, name: bytes) -> bytes:
    return (repo / os.fsdecode(name)).read_bytes()


def exists(repo: Path, name: bytes) -> bool:
    return os.path.lexists(os.path.join(os.fsencode(repo), name))


@pytest.fixture
def odd(repo: Path) -> Iterator[Path]:
    """A task whose second checkpoint adds three odd names."""
    ckpt(repo, "init")
    git(repo, "add", ".agent")
    git(repo, "commit", "-q", "-m", "ckpt")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    put(repo, LATIN1, b"latin\n")
    put(repo, UTF8, b"utf8\n")
    put(repo, TABBED, b"tab\n")
    ckpt(repo, "create", "-t", "t", "-m", "odd names")
    yield repo


def git_raw(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True).stdout


def test_paths_round_trip() -> None:
    for name in (LATIN1, UTF8, TABBED, b'"quoted"', b"back\\slash", b"\x7f\x01"):
        path = os.fsdecode(name)
        assert fs_bytes(path) == name
        assert fs_bytes(from_json(to_json(path))) == name
        assert fs_bytes(unquote(quote(path))) == name
    assert quote(os.fsdecode(LATIN1)) == SHOWN
    assert to_json("plain/name.txt") == "plain/name.txt"
    assert quote(os.fsdecode(UTF8), non_ascii=False) == "caf\u00e9.txt"


def test_create_list_show_log(odd: Path, tmp_path: Path) -> None:
    listed = ckpt(odd, "list")
    assert "odd names" in listed.stdout
    shown = ckpt(odd, "show", "t")
    assert "checkpoint 2 of t: odd names" in shown.stdout
    assert ckpt(odd, "log", "t").exit_code == 0
    assert all(json.loads(line) for line in ckpt(odd, "log", "t", "--json").stdout.splitlines())
    commit = git(odd, "rev-parse", "refs/agent/checkpoints/t")
    names = git_raw(odd, "ls-tree", "-z", "--name-only", commit).split(b"\0")
    assert LATIN1 in names and UTF8 in names and TABBED in names
    assert_snapshot_is_plumbing(odd, odd / ".git", commit, tmp_path)


def test_diff_prints_names_as_git_does(odd: Path) -> None:
    ours = ckpt(odd, "diff", "t~1", "t").stdout
    theirs = git(
        odd, "diff", "--name-status", "refs/agent/checkpoints/t~1", "refs/agent/checkpoints/t"
    )
    assert ours.strip() == theirs
    assert f"A\t{SHOWN}" in ours
    # core.quotePath=false: UTF-8 names as they are; a name that is not UTF-8 stays quoted
    git(odd, "config", "core.quotePath", "false")
    lines = ckpt(odd, "diff", "t~1", "t").stdout.splitlines()
    assert "A\tcaf\u00e9.txt" in lines and f"A\t{SHOWN}" in lines and 'A\t"tab\\there.txt"' in lines


def test_diff_json_is_lossless(odd: Path) -> None:
    files = ckpt_json(odd, "diff", "t~1", "t")["files"]
    by_bytes = {}
    for f in files:
        raw = fs_bytes(from_json(f["path"]))
        by_bytes[raw] = f
        if "path_bytes_b64" in f:
            assert base64.b64decode(f["path_bytes_b64"]) == raw
    assert set(by_bytes) == {LATIN1, UTF8, TABBED}
    assert by_bytes[LATIN1]["path"] == SHOWN and "path_bytes_b64" in by_bytes[LATIN1]
    assert by_bytes[UTF8]["path"] == "caf\u00e9.txt" and "path_bytes_b64" not in by_bytes[UTF8]


def test_restore_and_dry_run(odd: Path) -> None:
    for name in (LATIN1, UTF8, TABBED):
        os.unlink(os.path.join(os.fsencode(odd), name))
    dry = ckpt(odd, "restore", "t", "--dry-run").stdout
    assert f"would write  {SHOWN}" in dry
    assert not exists(odd, LATIN1)
    planned = ckpt_json(odd, "restore", "t", "--dry-run")["written"]
    assert {fs_bytes(from_json(p)) for p in planned} == {LATIN1, UTF8, TABBED}
    done = ckpt(odd, "restore", "t")
    assert f"wrote  {SHOWN}" in done.stdout
    assert read(odd, LATIN1) == b"latin\n"


def test_resume_brief_and_report(odd: Path) -> None:
    os.unlink(os.path.join(os.fsencode(odd), LATIN1))
    stopped = ckpt(odd, "resume", "t", ok=False)
    assert stopped.exit_code == 10, stopped.output
    assert f"deleted  {SHOWN}" in stopped.stdout
    resumed = ckpt(odd, "resume", "t", "--restore")
    assert resumed.exit_code == 0
    assert f"`{SHOWN}`: restored (restore)" in resumed.stdout  # the brief
    assert exists(odd, LATIN1)
    report = ckpt_json(odd, "report", "t")
    files = report["verify"]["files"]
    assert SHOWN in [f["path"] for f in files]
    # the stored files are UTF-8 and name the file as git would
    rid = report["id"]
    for name, form in (("report.md", json.dumps(SHOWN)), ("brief.md", SHOWN)):
        text = git_raw(odd, "show", f"refs/agent/reports/t:{rid}/{name}").decode("utf-8")
        assert form in text  # report.md quotes the report's JSON: the name as a JSON string
    # the events name it too: stored byte for byte, shown quoted by `log --json`
    events = [json.loads(line) for line in ckpt(odd, "log", "t", "--json").stdout.splitlines()]
    drifted = [e["data"]["source_drift"] for e in events if e["type"] == "recovery.verify"]
    assert drifted and all(d == [{"change": "deleted", "path": SHOWN}] for d in drifted)
    assert ckpt(odd, "log", "t").exit_code == 0
    stored = json.loads(git_raw(odd, "show", f"refs/agent/reports/t:{rid}/report.json"))
    kept = [f["path"] for f in stored["verify"]["files"]]
    assert os.fsdecode(LATIN1) in kept  # read back byte for byte


def test_large_file_with_a_latin1_name_is_pinned_and_checked(odd: Path) -> None:
    ckpt(odd, "config", "set", "snapshot.max_file_size", "10")
    big = b"big\xe9.bin"
    put(odd, big, b"x" * 100)
    ckpt(odd, "create", "-t", "t", "-m", "big")
    assertions = ckpt_json(odd, "show", "t")["assertions"]
    assert fs_bytes(from_json(assertions[0]["check"]["file"])) == big
    clean = ckpt(odd, "resume", "t")
    assert "3 assertions 1 checked, passed=True" in clean.stdout
    put(odd, big, b"y" * 100)
    changed = ckpt(odd, "resume", "t", ok=False)
    assert changed.exit_code == 11, changed.output
    assert "big\\351.bin" in changed.output


def test_through_real_git(odd: Path) -> None:
    diff = real_ckpt(odd, "diff", "t~1", "t")
    assert diff.returncode == 0 and f"A\t{SHOWN}" in diff.stdout
    os.unlink(os.path.join(os.fsencode(odd), LATIN1))
    dry = real_ckpt(odd, "restore", "t", "--dry-run")
    assert dry.returncode == 0 and f"would write  {SHOWN}" in dry.stdout
    resumed = real_ckpt(odd, "resume", "t", "--restore")
    assert resumed.returncode == 0, resumed.stderr
    assert f"`{SHOWN}`: restored" in resumed.stdout and exists(odd, LATIN1)


def test_through_the_daemon(odd: Path, served: None) -> None:
    ok(odd, "daemon", "start")
    running_status(odd)
    added, start = (c["id"] for c in ckpt_json(odd, "list", "t"))
    before = status(odd)["served"]
    os.unlink(os.path.join(os.fsencode(odd), LATIN1))
    assert f"would write  {SHOWN}" in ok(odd, "restore", "t", "--dry-run")
    assert f"wrote  {SHOWN}" in ok(odd, "restore", "t")
    assert exists(odd, LATIN1)
    assert f"A\t{SHOWN}" in ok(odd, "diff", start, added)
    assert status(odd)["served"] == before + 3


def test_type_change_is_one_change(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    (repo / "README.md").unlink()
    (repo / "README.md").symlink_to("src/app.py")
    ckpt(repo, "create", "-t", "t")
    ours = ckpt(repo, "diff", "t~1", "t").stdout
    theirs = git(
        repo, "diff", "--name-status", "refs/agent/checkpoints/t~1", "refs/agent/checkpoints/t"
    )
    assert ours.strip() == theirs == "T\tREADME.md"
    (changed,) = ckpt_json(repo, "diff", "t~1", "t")["files"]
    assert changed["status"] == "T" and changed["old"] and changed["new"]
    # restore still brings the file back over the link
    ckpt(repo, "restore", "t~1")
    assert not (repo / "README.md").is_symlink()
    assert (repo / "README.md").read_text() == "hello\n"
