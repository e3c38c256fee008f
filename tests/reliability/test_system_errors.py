"""Issue 9, item 6: errors from the system are not bugs, and a full disk loses nothing.

A small tmpfs holds the repository (or the remote); it is filled, remounted
read-only, or the repository is made unwritable for another user. Every command
then exits 7 with one line that names the path and the fix, never 70 and never
a traceback; every ref, event and note written before is intact (`git fsck`, the
event count, the refs); once the cause is gone the same command succeeds.
Where mounting is not possible (not root) the tests are skipped, saying why.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git
from helpers import ckpt

from git_agentckpt.cli.main import cli
from git_agentckpt.errors import CorruptError, Exit
from git_agentckpt.git.repo import GitRepo

SYSTEM = 7  # Exit.SYSTEM: "the system refused", documented in the man page
BIN = os.path.dirname(sys.executable)


def _mount(*args: str) -> str | None:
    """Run mount; None on success, else why it failed."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root (the full-disk and read-only tests run as root)"
    if shutil.which("mount") is None:
        return "no mount command on this system"
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if proc.returncode == 0 else f"mount {' '.join(args)}: {proc.stderr.strip()}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs, unmounted after the test (skipped, with the reason, where impossible)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    problem = _mount("-t", "tmpfs", "-o", "size=6m", "tmpfs", str(disk))
    if problem:
        pytest.skip(problem)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int = 0) -> Path:
    """Write one file until the disk is full but `leave` bytes; return it."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    target = max(0, st.f_bavail * st.f_frsize - leave)
    with open(filler, "wb", buffering=0) as fh:  # unbuffered: close has nothing to flush
        try:
            while target > 0 or not leave:
                chunk = min(1 << 16, target) if leave else 1 << 16
                fh.write(b"\0" * chunk)
                fh.flush()
                target -= chunk
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    if leave:
        return filler
    for n in range(1000):  # small files take the last blocks and some inodes
        try:
            (disk / f"filler.{n}").write_bytes(b"\0" * 512)
        except OSError:
            break
    return filler


def free(disk: Path) -> None:
    for path in disk.glob("filler*"):
        path.unlink()


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def snapshot(repo: Path) -> tuple[str, int]:
    """Every ref with its value, and the number of events of task t."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    events = ckpt(repo, "log", "t", "--json").stdout.splitlines()
    return refs, len(events)


def assert_refused(repo: Path, args: list[str], words: str) -> None:
    result = ckpt(repo, *args, ok=False)
    err = result.stderr.strip()
    assert result.exit_code == SYSTEM, f"git ckpt {' '.join(args)}: {result.exit_code} {err}"
    assert len(err.splitlines()) == 1 and err.startswith("git ckpt: error:"), err
    assert words in err and "run the command again" in err and "Traceback" not in err, err
    assert "internal error" not in err and "doesn't exist" not in err, err


def assert_intact(repo: Path, before: tuple[str, int]) -> None:
    assert snapshot(repo) == before
    fsck = subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    tip = git(repo, "rev-parse", "refs/agent/checkpoints/t")
    state = json.loads(git(repo, "notes", "--ref=agent/state", "show", tip))
    assert state["task"] == "t"


# Each command, as run on a full disk and then again once space was freed.
COMMANDS = [
    ["create", "-t", "t", "-m", "on a full disk"],
    ["create", "-t", "t", "--light"],
    ["event", "t", "--type", "tool.call", "--json", '{"n": 1}'],
    ["step", "start", "t", "s1"],
    ["step", "done", "t", "s1"],
    ["task", "start", "t2", "--goal", "another"],
    ["fetch"],
    ["push"],
]


def test_a_full_disk_is_reported_and_loses_nothing(small_disk: Path) -> None:
    repo = make_repo(small_disk / "repo")
    remote = small_disk / "remote.git"
    git(small_disk, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    ckpt(repo, "step", "start", "t", "s1")  # so that `step start` below restarts it
    ckpt(repo, "event", "t", "--type", "tool.call")
    ckpt(repo, "push")
    (repo / "work.txt").write_text("changed before the disk filled\n")
    before = snapshot(repo)
    fill(small_disk)
    for args in COMMANDS:
        if args[0] in ("fetch", "push"):  # nothing new to write: they may well succeed
            result = ckpt(repo, *args, ok=False)
            assert result.exit_code in (0, SYSTEM), result.stderr
            assert result.exit_code == 0 or "is full" in result.stderr
        else:
            assert_refused(repo, args, "is full")
        assert_intact(repo, before)
    free(small_disk)
    for args in COMMANDS:
        ckpt(repo, *args)
    after = snapshot(repo)
    assert after[1] > before[1]
    assert_intact(repo, after)
    assert git(remote, "rev-parse", "refs/agent/events/t") == git(
        repo, "rev-parse", "refs/agent/events/t"
    )


def test_a_push_to_a_remote_whose_disk_is_full(small_disk: Path, repo: Path) -> None:
    remote = small_disk / "remote.git"
    git(small_disk, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "push")
    (repo / "big.bin").write_bytes(os.urandom(1 << 20))
    ckpt(repo, "create", "-t", "t")
    remote_before = git(remote, "for-each-ref")
    fill(small_disk)
    result = ckpt(repo, "push", ok=False)
    err = result.stderr.strip()
    assert result.exit_code == SYSTEM, err
    assert "git push origin failed" in err and "is full" in err and len(err.splitlines()) == 1
    assert "kept moving" not in err
    assert git(remote, "for-each-ref") == remote_before
    free(small_disk)
    ckpt(repo, "push")
    assert git(remote, "rev-parse", "refs/agent/checkpoints/t") == git(
        repo, "rev-parse", "refs/agent/checkpoints/t"
    )


def test_a_read_only_file_system(small_disk: Path) -> None:
    repo = make_repo(small_disk / "repo")
    remote = small_disk / "remote.git"
    git(small_disk, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    ckpt(repo, "push")
    # push left the mirror equal to the remote: drop it, so that fetch has to write
    for ref in git(repo, "for-each-ref", "--format=%(refname)", "refs/ckpt-remotes/").split():
        git(repo, "update-ref", "-d", ref)
    before = snapshot(repo)
    problem = _mount("-o", "remount,ro", str(small_disk))
    if problem:
        pytest.skip(problem)
    try:
        for args in COMMANDS:
            assert_refused(repo, args, "read-only file system")
        for args in (["list"], ["task", "show", "t"], ["log", "t"], ["doctor"]):
            ckpt(repo, *args)  # reading needs no write
        assert_intact(repo, before)
    finally:
        assert _mount("-o", "remount,rw", str(small_disk)) is None
    for args in COMMANDS:
        ckpt(repo, *args)


def test_permission_denied_names_the_path(repo: Path) -> None:
    """As root chmod stops nothing: the commands run as root without CAP_DAC_OVERRIDE
    (setpriv), so a directory without write permission refuses them as it would a user.
    The repository is moved to a short path: a long one is shortened in the message."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    short = Path(tempfile.mkdtemp(prefix="perm-"))
    shutil.move(repo, short / "repo")
    repo.symlink_to(short / "repo")  # the fixture's path still leads to it
    repo = short / "repo"
    ckpt(repo, "task", "start", "t", "--goal", "g")

    def without_override(*args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "GIT_CKPT_SERVER": "off",
            "PATH": BIN + os.pathsep + os.environ["PATH"],
        }
        drop = "--bounding-set=-dac_override,-dac_read_search"
        return subprocess.run(
            [str(setpriv), drop, "git", "ckpt", *args],
            cwd=repo, env=env, capture_output=True, text=True,
        )  # fmt: skip

    (repo / "work.txt").write_text("something to snapshot\n")
    for unwritable, args in (
        (repo / ".git" / "agent", ["create", "-t", "t"]),
        (repo / ".git" / "objects", ["event", "t", "--type", "tool.call"]),
    ):
        before = git(repo, "for-each-ref")
        subprocess.run(["chmod", "-R", "a-w", str(unwritable)], check=True)
        try:
            result = without_override(*args)
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(unwritable)], check=True)
        err = result.stderr.strip()
        assert result.returncode == SYSTEM, err
        assert "permission denied" in err and str(unwritable) in err, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert git(repo, "for-each-ref") == before
        again = without_override(*args)
        assert again.returncode == 0, again.stderr


def test_paths_too_long(repo: Path, tmp_path: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    too_long = str(tmp_path / ("x" * 300))
    for args, words in (
        (["-C", too_long, "list"], "-C"),
        (["create", "-t", "t", "--state", too_long], "--state"),
        (["event", "t", "--type", "tool.call", "--json", too_long], "--json payload"),
        (["step", "done", "t", "s1", "--output", too_long], "--output"),
    ):
        result = ckpt(repo, *args, ok=False) if args[0] != "-C" else _bare_cli(*args)
        err = result.stderr.strip()
        assert result.exit_code == int(Exit.USAGE), err
        assert words in err and ("too long" in err or "File name too long" in err), err
        assert len(err) < 400 and len(err.splitlines()) == 1, err  # the path is shortened
    # a constraint on a path the file system cannot hold is an error of that check
    contracts = repo / ".agent" / "contracts"
    contracts.mkdir(parents=True)
    (contracts / "constraints.yaml").write_text(
        "constraints:\n  - id: deep\n    text: t\n"
        f"    check: {{kind: file_exists, file: {'d' * 300}}}\n"
    )
    checked = ckpt(repo, "check", "t", ok=False)
    assert checked.exit_code == int(Exit.FAILED), checked.output
    assert "error" in checked.stdout and "deep" in checked.stdout


def _bare_cli(*args: str) -> Result:
    """The CLI without helpers.ckpt's own `-C repo` (the test passes its own -C)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cas_ref_tells_races_and_failures_apart(repo: Path) -> None:
    """libgit2's error class, not its message text: a held lock and a moved ref are lost
    races (False: read again), a missing object is corrupt, a full disk is SystemRefused."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    gr = GitRepo.discover(str(repo))
    ref = "refs/agent/events/t"
    tip = gr.read_ref(ref)
    assert tip is not None
    parent_free = gr.commit(gr.empty_tree(), [tip], "next\n")
    lock = repo / ".git" / (ref + ".lock")
    lock.write_text("")
    assert gr.cas_ref(ref, parent_free, tip, "held") is False  # GIT_ELOCKED
    lock.unlink()
    other = gr.commit(gr.empty_tree(), [tip], "other\n")
    assert gr.cas_ref(ref, other, tip, "moved") is True
    assert gr.cas_ref(ref, parent_free, tip, "lost") is False  # it is `other` now
    missing = "1" * 40
    with pytest.raises(CorruptError, match="not stored"):
        gr.cas_ref(ref, missing, other, "missing")
    assert gr.read_ref(ref) == other


def test_space_for_the_event_but_not_for_the_snapshot(small_disk: Path) -> None:
    """`step done` whose checkpoint cannot be written logs nothing either (its step.end is
    in the checkpoint's transaction): the step is still in progress, and the same
    command, run again, completes it."""
    repo = make_repo(small_disk / "repo")
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one")
    ckpt(repo, "step", "start", "t", "s1")
    (repo / "result.bin").write_bytes(os.urandom(1 << 20))  # needs ~1 MiB in objects/
    before = snapshot(repo)
    filler = fill(small_disk, leave=64 << 10)  # room for the event, not for the result
    assert_refused(repo, ["step", "done", "t", "s1"], "is full")
    assert snapshot(repo)[1] == before[1]  # no step.end without its checkpoint
    state = json.loads(ckpt(repo, "task", "show", "t", "--json").stdout)
    assert state["steps"][0]["status"] != "done"
    refs_now = snapshot(repo)[0].splitlines()
    assert [r for r in refs_now if "checkpoints" in r] == [
        r for r in before[0].splitlines() if "checkpoints" in r
    ]
    filler.unlink()
    free(small_disk)
    ckpt(repo, "step", "done", "t", "s1")
    state = json.loads(ckpt(repo, "task", "show", "t", "--json").stdout)
    assert state["steps"][0]["status"] == "done"
    assert git(repo, "cat-file", "-t", "refs/agent/checkpoints/t:result.bin") == "blob"


def test_a_timeline_on_a_full_disk_names_the_file(small_disk: Path, repo: Path) -> None:
    """Issue 26, item 12: was "cannot write" with exit 2, as if the command line were wrong."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    page = small_disk / "page.html"
    fill(small_disk)
    assert_refused(repo, ["timeline", "t", "--html", str(page)], f"the disk holding {page} is full")
    assert not page.exists() and not list(small_disk.glob(".timeline-*"))
    free(small_disk)
    ckpt(repo, "timeline", "t", "--html", str(page))
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_importing_an_endless_file_stops_before_memory_does(repo: Path) -> None:
    """Issue 26, item 12: `/dev/zero` is one line without end; reading it whole ended in
    MemoryError, reported as a bug (exit 70)."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    before = git(repo, "for-each-ref")
    result = ckpt(repo, "import", "claude-code", "/dev/zero", "-t", "t", ok=False)
    err = result.stderr.strip()
    assert result.exit_code == SYSTEM, err
    assert err == (
        "git ckpt: error: cannot read transcript '/dev/zero': line 1 is longer than 64 MiB, "
        "more than is read into memory; give the path of the session's .jsonl file "
        "(one JSON record a line)"
    )
    assert git(repo, "for-each-ref") == before


@pytest.mark.mode("inline", reason="makes this process's reads run out of memory")
def test_memory_the_system_refuses_is_no_bug(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A MemoryError anywhere is the system refusing memory: exit 7, not 70."""
    from git_agentckpt.store.reading import TaskReader

    def out_of_memory(self: TaskReader, task: str | None = None) -> list[object]:
        raise MemoryError

    ckpt(repo, "task", "start", "t", "--goal", "g")
    monkeypatch.setattr(TaskReader, "checkpoints", out_of_memory)
    result = ckpt(repo, "list", ok=False)
    assert result.exit_code == SYSTEM
    assert result.stderr == (
        "git ckpt: error: git ckpt list: out of memory (ENOMEM); free memory and "
        "run the command again; what was recorded before is intact\n"
    )
