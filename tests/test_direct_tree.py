"""A snapshot in the daemon with no git reading the private index (`git/direct_tree.py`,
issue 12): plain edits are written into the last tree here, the private index is left
behind at those paths, and every later user of the index (git's own path in the daemon, a
snapshot or a verification outside it) first brings it up to the last tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import write
from test_private_index import checkpoint_tree, listing
from test_watcher import full_scans, snapshot_equals_full_scan, watched_repo

from git_agentckpt.daemon.barrier import InProcess
from git_agentckpt.git import watch_view
from git_agentckpt.git.repo import GitRepo

pytestmark = pytest.mark.mode(
    "inline",
    reason="the watcher runs in this process, as in a daemon child",
)


def _agent(root: Path) -> str:
    return str(root / ".git" / "agent")


def _index_stat(root: Path) -> tuple[int, int]:
    st = (root / ".git" / "agent" / "index").stat()
    return st.st_ino, st.st_mtime_ns


def _private_index(root: Path) -> list[str]:
    """The private index as `mode oid\tpath` lines, sorted."""
    env = {**os.environ, "GIT_INDEX_FILE": str(root / ".git" / "agent" / "index")}
    out = subprocess.run(
        ["git", "ls-files", "-s"], cwd=root, env=env, capture_output=True, text=True, check=True
    ).stdout
    return sorted(
        f"{x.split()[0]} {x.split()[1]}\t{x.split(chr(9), 1)[1]}" for x in out.splitlines()
    )


def _tree(root: Path, tree: str) -> list[str]:
    """A tree as `mode oid\tpath` lines, sorted."""
    rows = (x.split("\t", 1) for x in listing(root, tree))
    return sorted(f"{meta.split()[0]} {meta.split()[2]}\t{path}" for meta, path in rows)


def _edit_plainly(root: Path) -> None:
    write(root / "a.py", "edited\n")
    write(root / "brand/new.py", "new\n")
    os.symlink("a.py", root / "link")
    (root / "d/c.py").chmod(0o755)
    (root / "d/f/g.py").unlink()


def test_plain_edits_leave_the_private_index_alone() -> None:
    with watched_repo() as (root, _, _):
        snapshot_equals_full_scan(root, "first")
        before = _index_stat(root)
        _edit_plainly(root)
        snapshot_equals_full_scan(root, "plain edits")
        assert _index_stat(root) == before, "git wrote the private index"
        stamp = watch_view.read_stamp(_agent(root))
        assert stamp is not None and stamp.tree == checkpoint_tree(root)
        assert set(stamp.behind) == {"a.py", "brand/new.py", "link", "d/c.py", "d/f/g.py"}
        assert full_scans(root) == 1
        # the mode git gives: the owner's execute bit only
        assert "100755 blob" in next(x for x in listing(root, stamp.tree) if x.endswith("d/c.py"))


def test_git_s_path_first_brings_the_index_up_to_the_last_tree() -> None:
    """A nested repository is git's to read: before it runs, the index gets the entries
    the direct snapshots wrote, so the tree it writes keeps them."""
    with watched_repo() as (root, _, _):
        snapshot_equals_full_scan(root, "first")
        _edit_plainly(root)
        snapshot_equals_full_scan(root, "plain edits")
        sub = root / "sub"
        sub.mkdir()
        git(sub, "init", "-q")
        write(sub / "s.txt", "s\n")
        git(sub, "add", "-A")
        git(sub, "commit", "-q", "-m", "s")
        snapshot_equals_full_scan(root, "nested")
        stamp = watch_view.read_stamp(_agent(root))
        assert stamp is not None and stamp.behind == ()
        assert _private_index(root) == _tree(root, checkpoint_tree(root))
        assert full_scans(root) == 1


def test_outside_the_daemon_a_lagging_index_gives_the_right_answers() -> None:
    from git_agentckpt.git import compare

    with watched_repo() as (root, _, live):
        snapshot_equals_full_scan(root, "first")
        _edit_plainly(root)
        snapshot_equals_full_scan(root, "plain edits")
        last = checkpoint_tree(root)
        watch_view.activate(None)
        repo = GitRepo.discover(str(root))
        assert compare.compare_worktree(repo, last, []) == ([], last)
        assert _private_index(root) == _tree(root, last)  # caught up on the way
        write(root / "a.py", "edited again\n")
        changes, _ = compare.compare_worktree(repo, last, [])
        assert [(c.status, c.path) for c in changes] == [("M", "a.py")]
        snapshot_equals_full_scan(root, "outside the daemon")
        watch_view.activate(InProcess(live))
        write(root / "b.txt", "b\n")
        snapshot_equals_full_scan(root, "back in the daemon")


def test_a_converting_attribute_is_applied_as_git_add_applies_it() -> None:
    with watched_repo() as (root, _, _):
        write(root / ".gitattributes", "*.dat text\n")
        snapshot_equals_full_scan(root, "first")
        (root / "w.dat").write_bytes(b"one\r\ntwo\r\n")
        snapshot_equals_full_scan(root, "CRLF normalized")
        stamp = watch_view.read_stamp(_agent(root))
        assert stamp is not None and "w.dat" in stamp.behind  # written directly
        blob = GitRepo.discover(str(root)).tree_entry(stamp.tree, "w.dat")
        assert blob is not None
        assert git(root, "cat-file", "blob", blob[0]) == "one\ntwo"  # LF, as git add stores it


def test_a_crash_before_the_stamp_loses_nothing() -> None:
    """The stamp is written last: a snapshot that died before it is done again."""
    with watched_repo() as (root, _, _):
        snapshot_equals_full_scan(root, "first")
        stamp = watch_view.read_stamp(_agent(root))
        write(root / "a.py", "edited\n")
        snapshot_equals_full_scan(root, "edited")
        assert stamp is not None
        watch_view.write_stamp(_agent(root), stamp)  # as if the last one never finished
        write(root / "b.txt", "b\n")
        snapshot_equals_full_scan(root, "after the lost stamp")
