"""Snapshots in O(changes) (issue 12): with the daemon's work-tree watcher active, a
checkpoint runs `git add -A` on the changed paths only, and its tree is exactly what a
full scan gives, after any sequence of edits, creates, deletes, renames, directory moves,
mode changes, symlinks, nested repositories and `.gitignore` edits. The watcher runs in
this process here (`watcher.activate`), as it does in the daemon its children fork from."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_private_index import checkpoint_tree, listing, plumbing_tree

from git_agentckpt.daemon import watcher
from git_agentckpt.daemon.barrier import InProcess
from git_agentckpt.git import watch_view

pytestmark = pytest.mark.mode(
    "inline",
    reason="the watcher runs in this process (test_daemon_truth.py: through the daemon)",
)

FILES = ("a.py", "b.txt", "d/c.py", "d/e.txt", "d/f/g.py", "x/y.py", "n.log")
DIRS = ("d", "d/f", "x", "z", "z/w")
IGNORES = ("*.log\n", "*.txt\n", "d/\n", "x/y.py\n", "*.log\nz/\n")
Op = tuple[str, ...]
ops = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), st.sampled_from(("1", "22", "333"))),
    st.tuples(st.just("delete"), st.sampled_from(FILES)),
    st.tuples(st.just("rename"), st.sampled_from(FILES), st.sampled_from(FILES)),
    st.tuples(st.just("chmod"), st.sampled_from(FILES)),
    st.tuples(st.just("symlink"), st.sampled_from(FILES), st.sampled_from(("a.py", "nowhere"))),
    st.tuples(st.just("dirlink"), st.sampled_from(DIRS), st.sampled_from(("d", "x"))),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS)),
    st.tuples(st.just("rmdir"), st.sampled_from(DIRS)),
    st.tuples(st.just("movedir"), st.sampled_from(DIRS), st.sampled_from(DIRS)),
    st.tuples(st.just("moveout"), st.sampled_from(DIRS)),
    st.tuples(st.just("ignore"), st.sampled_from(IGNORES)),
    st.tuples(st.just("temp"), st.sampled_from(DIRS)),
)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _make_parent(path: Path) -> None:
    for parent in reversed(path.parents):
        if parent.is_symlink() or parent.is_file():
            parent.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)


def apply(root: Path, outside: Path, op: Op) -> None:
    """One user action on the work tree."""
    kind, *args = op
    full = root / args[0]
    if kind in ("write", "symlink", "dirlink", "mkdir"):
        _make_parent(full)
        if kind != "mkdir" or not full.is_dir() or full.is_symlink():
            _remove(full)
    if kind == "write":
        full.write_text(args[1] * 3 + "\n")
    elif kind == "delete":
        _remove(full)
    elif kind == "rename" and (full.is_file() or full.is_symlink()) and args[0] != args[1]:
        target = root / args[1]
        _make_parent(target)
        _remove(target)
        os.rename(full, target)
    elif kind == "chmod" and full.is_file() and not full.is_symlink():
        full.chmod(full.stat().st_mode ^ 0o111)
    elif kind in ("symlink", "dirlink"):
        os.symlink(args[1], full)
    elif kind == "mkdir":
        full.mkdir(exist_ok=True)
        (full / "new.py").write_text("new\n")
        (full / "junk.log").write_text("ignored\n")
    elif kind == "rmdir":
        _remove(full)
    elif kind == "movedir" and full.is_dir() and not full.is_symlink():
        target = root / args[1]
        if str(target).startswith(str(full)) or str(full).startswith(str(target)):
            return  # into itself, or over its own parent
        _make_parent(target)
        _remove(target)
        os.rename(full, target)
    elif kind == "moveout" and full.is_dir() and not full.is_symlink():
        _remove(outside / "moved")
        os.rename(full, outside / "moved")
    elif kind == "ignore":
        write(root / ".gitignore", args[0])
    elif kind == "temp" and full.is_dir() and not full.is_symlink():
        (full / "tmp.swp").write_text("t")
        (full / "tmp.swp").unlink()


def full_scans(root: Path) -> int:
    log = root / ".git" / "agent" / "watch.log"
    text = log.read_text() if log.exists() else ""
    return text.count("full scan:")


@contextmanager
def watched_repo(prefix: str = "watch-") -> Iterator[tuple[Path, Path, watcher.TreeWatcher]]:
    """A repository with a task and its watcher active in this process (as in a daemon
    child), and a directory outside it; the watcher is stopped at the end."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp) / "repo"
        outside = Path(tmp) / "outside"
        root.mkdir()
        outside.mkdir()
        git(root, "init", "-q")
        write(root / ".gitignore", "*.log\n")
        for path in FILES[::2]:
            write(root / path, path + "\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
        ckpt(root, "task", "start", "t", "--goal", "g")
        live = watcher.TreeWatcher(str(root), str(root / ".git" / "agent"))
        live.start()
        live.finish_walk()
        watch_view.activate(InProcess(live))
        try:
            yield root, outside, live
        finally:
            watch_view.activate(None)
            live.close()


@pytest.fixture
def watched() -> Iterator[tuple[Path, Path, watcher.TreeWatcher]]:
    with watched_repo() as made:
        yield made


def snapshot_equals_full_scan(root: Path, context: object) -> None:
    ckpt(root, "create", "-t", "t")
    ours = listing(root, checkpoint_tree(root))
    assert ours == listing(root, plumbing_tree(root)), context


def test_property_incremental_equals_full_scan(long_run: bool) -> None:
    """Random user actions, a checkpoint after each batch: the same tree as a full scan,
    and no full scan taken except for the first snapshot and `.gitignore` edits."""

    @settings(
        max_examples=200 if long_run else 15,
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=8 if long_run else 5)
    )
    def scenario(batches: list[list[Op]]) -> None:
        checkpoint_after_each(batches)

    scenario()


def checkpoint_after_each(batches: list[list[Op]]) -> None:
    """Apply each batch of actions and take a snapshot after it: the same tree as a full
    scan each time, and no full scan but the first and after `.gitignore` edits."""
    with watched_repo() as (root, outside, _):
        snapshot_equals_full_scan(root, "first")
        expected = full_scans(root)
        for i, batch in enumerate(batches):
            for action in batch:
                apply(root, outside, action)
            snapshot_equals_full_scan(root, (i, batches[: i + 1]))
            if any(a[0] == "ignore" for a in batch):
                expected = full_scans(root)
            log = (root / ".git" / "agent" / "watch.log").read_text()
            assert full_scans(root) == expected, (i, batches[: i + 1], log)


def test_the_first_snapshot_scans_in_full_then_only_changes(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    root, _, _ = watched
    snapshot_equals_full_scan(root, "first")
    log = (root / ".git" / "agent" / "watch.log").read_text()
    assert "full scan: first snapshot since the daemon started" in log
    write(root / "d/c.py", "changed\n")
    write(root / "brand/new.py", "new\n")
    snapshot_equals_full_scan(root, "second")
    assert full_scans(root) == 1
    stamp = watch_view.read_stamp(str(root / ".git" / "agent"))
    assert stamp is not None and stamp.tree == checkpoint_tree(root)


def test_nothing_changed_runs_no_git(watched: tuple[Path, Path, watcher.TreeWatcher]) -> None:
    """With no change since the last snapshot the stamp's tree is the snapshot: the
    private index is not even rewritten."""
    root, _, _ = watched
    snapshot_equals_full_scan(root, "first")
    index = root / ".git" / "agent" / "index"
    before = index.stat().st_mtime_ns
    ckpt(root, "create", "-t", "t", "--light")
    snapshot_equals_full_scan(root, "again")
    assert index.stat().st_mtime_ns == before


def test_overflow_falls_back_to_a_full_scan_and_logs_it(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    root, _, live = watched
    snapshot_equals_full_scan(root, "first")
    write(root / "d/c.py", "changed\n")
    live.drain()
    live._handle(-1, watcher.IN_Q_OVERFLOW, "")  # what the kernel sends when its queue is full
    write(root / "x/late.py", "late\n")
    snapshot_equals_full_scan(root, "after overflow")
    log = (root / ".git" / "agent" / "watch.log").read_text()
    assert "full scan: the inotify queue overflowed" in log
    assert "full scan: the watcher lost track (queue overflow)" in log
    write(root / "x/later.py", "later\n")
    scans = full_scans(root)
    snapshot_equals_full_scan(root, "after the full scan")
    assert full_scans(root) == scans  # back to changes only


def test_a_write_outside_the_daemon_makes_the_next_snapshot_scan(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    """Another process wrote the private index (a call not served by the daemon): the
    stamp no longer describes it, so the next snapshot scans in full."""
    root, _, _ = watched
    snapshot_equals_full_scan(root, "first")
    watch_view.activate(None)
    write(root / "a.py", "outside the daemon\n")
    ckpt(root, "create", "-t", "t")
    watch_view.activate(InProcess(watched[2]))
    write(root / "b.txt", "b\n")
    snapshot_equals_full_scan(root, "back in the daemon")
    log = (root / ".git" / "agent" / "watch.log").read_text()
    assert "the private index was written outside the daemon" in log


def test_a_nested_repository_is_read_as_one_gitlink(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    root, _, _ = watched
    snapshot_equals_full_scan(root, "first")
    sub = root / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    write(sub / "s.txt", "s\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "s")
    snapshot_equals_full_scan(root, "nested made")
    write(sub / "s.txt", "s2\n")
    git(sub, "commit", "-q", "-am", "s2")
    snapshot_equals_full_scan(root, "nested committed")
    assert full_scans(root) == 1


def test_watch_limit_turns_the_watcher_off(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "a" / "b").mkdir(parents=True)
    live = watcher.TreeWatcher(str(root), str(tmp_path))
    live.start()
    real = live._inotify

    class Full:
        """inotify_add_watch as it fails once fs.inotify.max_user_watches is reached (the
        limit is system-wide: lowering it here would hit every other process)."""

        def add_watch(self, path: str, mask: int) -> int:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            real.close()

    live._inotify = Full()
    live.finish_walk()
    assert InProcess(live).view() is None
    assert "max_user_watches" in str(live.status()["reason"])
    assert "watcher off" in (tmp_path / "watch.log").read_text()


MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 0:35 / /mnt/share rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2
41 40 0:36 / /mnt/share/fuse\\040dir rw shared:21 - fuse.sshfs host: rw
"""


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/work/repo", ""), ("/mnt/share/repo", "nfs4"), ("/mnt/share/fuse dir/r", "fuse.sshfs")],
)
def test_network_and_fuse_file_systems_are_not_watched(path: str, kind: str) -> None:
    assert watcher.remote_filesystem(path, MOUNTINFO) == kind


def test_a_watcher_on_a_network_file_system_is_off(tmp_path: Path) -> None:
    live = watcher.TreeWatcher(str(tmp_path), str(tmp_path))
    live.start(mountinfo=f"1 0 0:1 / {tmp_path} rw - nfs server:/x rw\n")
    assert InProcess(live).view() is None and "nfs" in str(live.status()["reason"])


def test_a_tracked_secret_edited_under_the_watcher_never_reaches_the_store(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    root, _, _ = watched
    write(root / ".env", "TOKEN=committed-by-the-user\n")
    git(root, "add", "-f", ".env")
    git(root, "commit", "-q", "-m", "env")
    snapshot_equals_full_scan(root, "first")
    scans = full_scans(root)
    write(root / ".env", "TOKEN=ghp_" + "s3cr3t" * 6 + "\n")
    write(root / "d" / "new.py", "x\n")
    ckpt(root, "create", "-t", "t")
    assert full_scans(root) == scans  # the changes only
    incremental = checkpoint_tree(root)
    head_blob = git(root, "rev-parse", "HEAD:.env")
    assert f"{head_blob}\t.env" in "\n".join(listing(root, incremental))
    assert "d/new.py" in "\n".join(listing(root, incremental))
    watch_view.activate(None)  # the same snapshot by a full scan
    (root / ".git" / "agent" / "index").unlink()
    ckpt(root, "create", "-t", "t")
    assert checkpoint_tree(root) == incremental
    new_blob = git(root, "hash-object", ".env")
    probe = subprocess.run(["git", "cat-file", "-e", new_blob], cwd=root, capture_output=True)
    assert probe.returncode != 0, "the edited secret was written to the object store"


def test_property_verification_by_snapshot_equals_git_status(long_run: bool) -> None:
    """Resume's verification in the daemon compares trees (a snapshot of what changed):
    the same changes as the `git status` way, after random actions."""
    from git_agentckpt.git import compare as worktree
    from git_agentckpt.git.repo import GitRepo

    @settings(
        max_examples=100 if long_run else 10,
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(ops, min_size=1, max_size=6))
    def scenario(actions: list[Op]) -> None:
        with watched_repo("verify-") as (root, outside, _):
            expected = checkpoint_tree(root)
            repo = GitRepo.discover(str(root))
            worktree.compare_worktree(repo, expected, [])  # the first: a full scan
            for action in actions:
                apply(root, outside, action)
            by_tree, _ = worktree.compare_worktree(repo, expected, [])
            watch_view.activate(None)
            by_status, _ = worktree.compare_worktree(repo, expected, [])
            assert [(c.status, c.path) for c in by_tree] == [
                (c.status, c.path) for c in by_status
            ], actions

    scenario()


def test_a_private_index_whose_shared_part_went_is_rebuilt(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    """git expires a split index's shared part after two weeks unused: the next
    verification and snapshot outside the daemon rebuild the private index."""
    from git_agentckpt.git import compare as worktree
    from git_agentckpt.git.repo import GitRepo

    root, _, _ = watched
    snapshot_equals_full_scan(root, "first")
    write(root / "a.py", "changed\n")
    snapshot_equals_full_scan(root, "split now")
    shared = [p for p in (root / ".git").iterdir() if p.name.startswith("sharedindex.")]
    assert shared, "the daemon's private index is split"
    assert (root / ".git" / "agent" / shared[0].name).is_symlink()
    watch_view.activate(None)
    for path in shared:
        path.unlink()
    repo = GitRepo.discover(str(root))
    changes, _ = worktree.compare_worktree(repo, checkpoint_tree(root), [])
    assert changes == []
    write(root / "b.txt", "b\n")
    ckpt(root, "create", "-t", "t")
    assert listing(root, checkpoint_tree(root)) == listing(root, plumbing_tree(root))


def test_a_link_that_became_a_directory_below_a_removed_one_is_no_full_scan() -> None:
    """Found by the property test under `--long`: a link `d/f` (to `d`), then `d` removed
    and `d/f/g.py` written. The watcher names `d`; `d/f` is a directory now, which
    `update-index --remove` refused ("is a directory"), so the snapshot fell back to a
    full scan. It is removed by name first, as a file that became a directory is."""
    checkpoint_after_each([[("dirlink", "d/f", "d")], [("rmdir", "d"), ("write", "d/f/g.py", "1")]])


def test_the_barrier_vouches_only_after_its_cookie(
    watched: tuple[Path, Path, watcher.TreeWatcher],
) -> None:
    """No view for a cookie whose event was never read (one never made), nor for more
    changed paths than a reply carries: the snapshot then scans in full."""
    root, _, live = watched
    snapshot_equals_full_scan(root, "first")
    assert live.answer("never-made") is None
    assert "did not see the barrier's cookie" in (root / ".git" / "agent" / "watch.log").read_text()
    assert InProcess(live).view() is not None  # a cookie made and seen
    for i in range(watcher.MAX_VIEW_PATHS + 1):
        write(root / "d" / f"many{i}.txt", "x\n")  # in a watched directory: one path each
    assert InProcess(live).view() is None
    snapshot_equals_full_scan(root, "after many")
    assert not list((root / ".git" / "agent" / "cookies").iterdir())  # none left behind
