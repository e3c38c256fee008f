"""A snapshot is `git add -A` on a fresh copy of the user's *current* index (issue 11,
items 1 and 5): the checkpoint's tree is compared with git's own plumbing snapshot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout


def plumbing_tree(repo: Path) -> str:
    """git's own snapshot: `git add -A` on a fresh copy of the user's index.

    With the excludes the tool writes (secret paths and large files) and the two
    documented departures from a plain copy: `assume-unchanged` bits are cleared (a
    snapshot sees the disk), and so are `skip-worktree` bits of files that exist
    (a sparse checkout's absent paths keep their blobs). `--sparse` in a sparse
    checkout: paths outside the cone are added too.
    """
    git_dir = repo / git(repo, "rev-parse", "--git-dir")  # a linked worktree's own
    scratch = tempfile.mkdtemp(prefix="plumbing-")
    try:
        index = os.path.join(scratch, "index")
        if (git_dir / "index").exists():
            shutil.copy2(git_dir / "index", index)
        env = {"GIT_INDEX_FILE": index}
        listing = run(repo, "-c", "core.sparseCheckout=false", "ls-files", "-v", "-z", env=env)
        assumed, present_skipped = [], []
        for rec in listing.split("\0"):
            if len(rec) < 3:
                continue
            if rec[0].islower():
                assumed.append(rec[2:])
            if rec[0] in "Ss" and os.path.lexists(repo / rec[2:]):
                present_skipped.append(rec[2:])
        for flag, paths in (
            ("--no-assume-unchanged", assumed),
            ("--no-skip-worktree", present_skipped),
        ):
            if paths:
                run(repo, "update-index", flag, "--", *paths, env=env)
        sparse = run(repo, "config", "--bool", "--default", "false", "core.sparseCheckout")
        excludes = git_dir / "agent" / "exclude"
        run(
            repo,
            "-c",
            f"core.excludesFile={excludes}",
            "add",
            "-A",
            *(["--sparse"] if sparse.strip() == "true" else []),
            env=env,
        )
        return run(repo, "write-tree", env=env).strip()
    finally:
        shutil.rmtree(scratch)


def checkpoint_tree(repo: Path, task: str = "t") -> str:
    return git(repo, "rev-parse", f"refs/agent/checkpoints/{task}^{{tree}}")


def listing(repo: Path, tree: str) -> list[str]:
    return git(repo, "ls-tree", "-r", tree).splitlines()


def assert_snapshot_is_plumbing(repo: Path, task: str = "t") -> list[str]:
    """The checkpoint's tree, listed, after checking it equals git's plumbing snapshot."""
    ours = listing(repo, checkpoint_tree(repo, task))
    assert ours == listing(repo, plumbing_tree(repo))
    return ours


def names(lines: list[str]) -> list[str]:
    return [line.split("\t", 1)[1] for line in lines]


def test_rm_cached_and_ignored_leaves_the_next_checkpoint(repo: Path) -> None:
    write(repo / "config.local", "password = hunter2\n")
    git(repo, "add", "config.local")
    git(repo, "commit", "-q", "-m", "config")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    assert "config.local" in names(assert_snapshot_is_plumbing(repo))
    git(repo, "rm", "-q", "--cached", "config.local")
    with open(repo / ".gitignore", "a") as fh:
        fh.write("config.local\n")
    ckpt(repo, "create", "-t", "t")
    assert "config.local" not in names(assert_snapshot_is_plumbing(repo))
    # and it stays out: the user's index did not change again
    write(repo / "config.local", "password = hunter3\n")
    ckpt(repo, "create", "-t", "t")
    assert "config.local" not in names(assert_snapshot_is_plumbing(repo))


def test_force_added_ignored_file_appears(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / "build" / "keep.bin", "artifact\n")  # ignored by build/
    ckpt(repo, "create", "-t", "t")
    assert "build/keep.bin" not in names(assert_snapshot_is_plumbing(repo))
    git(repo, "add", "-f", "build/keep.bin")
    ckpt(repo, "create", "-t", "t")
    assert "build/keep.bin" in names(assert_snapshot_is_plumbing(repo))
    write(repo / "build" / "keep.bin", "artifact v2\n")  # tracked now: its edits are seen
    ckpt(repo, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(repo)
    blob = git(repo, "hash-object", "build/keep.bin")
    assert any(line.endswith("\tbuild/keep.bin") and blob in line for line in lines)


def test_a_tracked_ignored_file_deleted_and_made_again_comes_back(repo: Path) -> None:
    """The user tracks `build/keep.bin` under an ignore rule; it is deleted (a checkpoint
    drops it) and made again: git would add it from the user's index, so we must too."""
    write(repo / "build" / "keep.bin", "artifact\n")
    git(repo, "add", "-f", "build/keep.bin")
    git(repo, "commit", "-q", "-m", "artifact")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    (repo / "build" / "keep.bin").unlink()
    ckpt(repo, "create", "-t", "t")
    assert "build/keep.bin" not in names(assert_snapshot_is_plumbing(repo))
    write(repo / "build" / "keep.bin", "artifact v2\n")
    ckpt(repo, "create", "-t", "t")
    assert "build/keep.bin" in names(assert_snapshot_is_plumbing(repo))


def test_an_untracked_file_that_becomes_ignored_leaves(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / "scratch.tmp", "notes\n")
    ckpt(repo, "create", "-t", "t")
    assert "scratch.tmp" in names(assert_snapshot_is_plumbing(repo))
    with open(repo / ".gitignore", "a") as fh:  # the user's index does not change
        fh.write("*.tmp\n")
    ckpt(repo, "create", "-t", "t")
    assert "scratch.tmp" not in names(assert_snapshot_is_plumbing(repo))
    (repo / ".git" / "info" / "exclude").write_text("README.md\nnew.md\n")
    write(repo / "new.md", "x\n")
    ckpt(repo, "create", "-t", "t")
    lines = names(assert_snapshot_is_plumbing(repo))
    assert "README.md" in lines and "new.md" not in lines


def test_staged_then_edited_again(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / "src" / "app.py", "print('staged')\n")
    git(repo, "add", "src/app.py")
    write(repo / "src" / "app.py", "print('on disk')\n")
    ckpt(repo, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(repo)
    blob = git(repo, "hash-object", "src/app.py")
    assert any(line.endswith("\tsrc/app.py") and blob in line for line in lines)


def test_assume_unchanged_and_skip_worktree_set_by_the_user(repo: Path) -> None:
    write(repo / "local.cfg", "v1\n")
    git(repo, "add", "local.cfg")
    git(repo, "commit", "-q", "-m", "cfg")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    git(repo, "update-index", "--assume-unchanged", "README.md")
    git(repo, "update-index", "--skip-worktree", "local.cfg", "src/app.py")
    write(repo / "README.md", "edited behind an assume-unchanged bit\n")
    write(repo / "local.cfg", "v2, kept out of git by skip-worktree\n")
    ckpt(repo, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(repo)
    for path in ("README.md", "local.cfg"):
        blob = git(repo, "hash-object", path)
        assert any(line.endswith("\t" + path) and blob in line for line in lines), path
    # a skip-worktree file that goes away keeps its index entry: not a deletion
    head_blob = git(repo, "rev-parse", "HEAD:src/app.py")
    (repo / "src" / "app.py").unlink()
    ckpt(repo, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(repo)
    assert any(line.endswith("\tsrc/app.py") and head_blob in line for line in lines)
    # and when it comes back it is read again
    write(repo / "src" / "app.py", "print('back')\n")
    ckpt(repo, "create", "-t", "t")
    blob = git(repo, "hash-object", "src/app.py")
    assert any(
        line.endswith("\tsrc/app.py") and blob in line for line in assert_snapshot_is_plumbing(repo)
    )
    # the user's bits are the user's: their index still has them
    assert git(repo, "ls-files", "-v", "README.md", "local.cfg") == "h README.md\nS local.cfg"


def test_a_skipped_secret_that_comes_back_stays_pinned(repo: Path) -> None:
    write(repo / ".env", "TOKEN=committed-placeholder\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-q", "-m", "env template")
    git(repo, "update-index", "--skip-worktree", ".env")
    (repo / ".env").unlink()
    ckpt(repo, "task", "start", "t", "--goal", "g")
    secret = "TOKEN=" + "s3cr3t-" + "value-never-stored"
    write(repo / ".env", secret + "\n")
    ckpt(repo, "create", "-t", "t")
    head_blob = git(repo, "rev-parse", "HEAD:.env")
    assert f"{head_blob}\t.env" in git(repo, "ls-tree", "refs/agent/checkpoints/t")
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True
    ).stdout
    assert secret.encode() not in objects


@pytest.mark.mode("inline", reason="counts calls of a function of this process")
def test_copied_again_only_when_the_entries_changed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from git_agentckpt.git import private_index

    seeded: list[str] = []
    real_seed = private_index._seed

    def counted(*args: Any) -> None:
        seeded.append("seed")
        real_seed(*args)

    monkeypatch.setattr(private_index, "_seed", counted)
    ckpt(repo, "task", "start", "t", "--goal", "g")
    assert seeded == ["seed"]
    stamp = repo / ".git" / "agent" / "seed.json"
    first = json.loads(stamp.read_text())
    write(repo / "new.py", "x = 1\n")
    ckpt(repo, "create", "-t", "t")  # the user's index did not change: nothing copied
    assert seeded == ["seed"] and json.loads(stamp.read_text()) == first
    # `git status` rewrites the user's index with new stat data only: not copied
    os.utime(repo / "README.md", ns=(1, 1))
    trailer = (repo / ".git" / "index").read_bytes()[-20:]
    git(repo, "status", "--porcelain")
    assert (repo / ".git" / "index").read_bytes()[-20:] != trailer
    ckpt(repo, "create", "-t", "t")
    now = json.loads(stamp.read_text())
    assert seeded == ["seed"] and now["index"] != first["index"]
    assert now["entries"] == first["entries"]
    assert_snapshot_is_plumbing(repo)
    git(repo, "add", "new.py")  # a new entry: copied again
    ckpt(repo, "create", "-t", "t")
    assert seeded == ["seed", "seed"]
    assert json.loads(stamp.read_text())["entries"] != first["entries"]
    assert_snapshot_is_plumbing(repo)


def test_a_linked_worktree_snapshots_its_own_index(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    ckpt(linked, "task", "start", "side-task", "--goal", "g")
    git(repo, "rm", "-q", "--cached", "README.md")  # the main worktree's index only
    git(linked, "rm", "-q", "--cached", "src/app.py")
    with open(linked / ".gitignore", "a") as fh:
        fh.write("src/\n")
    ckpt(linked, "create", "-t", "side-task")
    paths = names(assert_snapshot_is_plumbing(linked, "side-task"))
    assert "README.md" in paths and "src/app.py" not in paths


def sparse_repo(root: Path) -> None:
    root.mkdir()
    git(root, "init", "-q")
    for path in ("top.md", "in/a.py", "in/deep/b.py", "out/c.py", "out/deep/d.py"):
        write(root / path, f"{path}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    git(root, "sparse-checkout", "init", "--cone")
    git(root, "sparse-checkout", "set", "in")


def test_sparse_checkout_cone_mode(tmp_path: Path) -> None:
    root = tmp_path / "sparse"
    sparse_repo(root)
    assert not (root / "out").exists()
    result = ckpt(root, "init")
    assert "git sparse-checkout add .agent" in result.stderr  # how to take .agent/ in
    ckpt(root, "task", "start", "t", "--goal", "g")
    write(root / "in" / "a.py", "edited inside the cone\n")
    ckpt(root, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(root)
    paths = names(lines)
    assert ".agent/ckpt.toml" in paths  # outside the cone, snapshotted all the same
    head = {p: git(root, "rev-parse", f"HEAD:{p}") for p in ("out/c.py", "out/deep/d.py")}
    for path, blob in head.items():  # outside the cone: the index's blobs, not deletions
        assert any(line.endswith("\t" + path) and blob in line for line in lines)
    blob = git(root, "hash-object", "in/a.py")
    assert any(line.endswith("\tin/a.py") and blob in line for line in lines)
    assert git(root, "status", "--porcelain", "--untracked-files=no") == "M in/a.py"
    # the user takes .agent/ into the cone and commits it: still the same snapshot
    git(root, "sparse-checkout", "add", ".agent")
    git(root, "add", ".agent")
    git(root, "commit", "-q", "-m", "agent files")
    ckpt(root, "create", "-t", "t")
    assert ".agent/ckpt.toml" in names(assert_snapshot_is_plumbing(root))
    assert "sparse-checkout" not in ckpt(root, "init").stderr


def test_sparse_index_and_a_file_outside_the_cone(tmp_path: Path) -> None:
    root = tmp_path / "sparse"
    sparse_repo(root)
    git(root, "sparse-checkout", "init", "--cone", "--sparse-index")
    ckpt(root, "task", "start", "t", "--goal", "g")
    assert_snapshot_is_plumbing(root)
    write(root / "out" / "c.py", "written outside the cone\n")
    ckpt(root, "create", "-t", "t")
    lines = assert_snapshot_is_plumbing(root)
    blob = git(root, "hash-object", "out/c.py")
    assert any(line.endswith("\tout/c.py") and blob in line for line in lines)
    (root / "out" / "c.py").unlink()  # gone again: the index's blob, not a deletion
    ckpt(root, "create", "-t", "t")
    assert "out/c.py" in names(assert_snapshot_is_plumbing(root))


def test_git_messages_in_snapshot_failures_are_whole() -> None:
    from git_agentckpt.git.run import error_lines

    stderr = (
        b"The following paths and/or pathspecs matched paths that exist\n"
        b"outside of your sparse-checkout definition, so will not be\n"
        b"updated in the index:\n.agent/ckpt.toml\n"
        b"hint: If you intend to update such entries, try one of the following:\n"
        b"hint: * Use the --sparse option.\n"
    )
    assert error_lines(stderr) == [
        "The following paths and/or pathspecs matched paths that exist outside of your "
        "sparse-checkout definition, so will not be updated in the index: .agent/ckpt.toml"
    ]
    wrapped = b'warning: w\nerror: open("x"): Permission denied\nerror: unable to index file\n'
    assert error_lines(wrapped) == [
        'error: open("x"): Permission denied',
        "error: unable to index file",
    ]


# -- the property: random user index operations and edits, a checkpoint after each -----

FILES = ("a.py", "b.txt", "d/c.py", "d/e.txt", "x/y.py")
IGNORES = ("", "*.txt\n", "d/\n", "x/y.py\n", "*.txt\nx/\n")
Op = tuple[str, ...]
ops = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), st.sampled_from(("1", "22", "333"))),
    st.tuples(st.just("delete"), st.sampled_from(FILES)),
    st.tuples(st.just("chmod"), st.sampled_from(FILES)),
    st.tuples(st.just("symlink"), st.sampled_from(FILES), st.sampled_from(("a.py", "nowhere"))),
    st.tuples(st.just("ignore"), st.sampled_from(IGNORES)),
    st.tuples(st.just("add"), st.sampled_from((*FILES, "."))),
    st.tuples(st.just("add -f"), st.sampled_from(FILES)),
    st.tuples(st.just("rm --cached"), st.sampled_from(FILES)),
    st.tuples(
        st.just("update-index"),
        st.sampled_from(
            (
                "--assume-unchanged",
                "--no-assume-unchanged",
                "--skip-worktree",
                "--no-skip-worktree",
            )
        ),
        st.sampled_from(FILES),
    ),
    st.tuples(st.just("reset"), st.sampled_from(("", "a.py", "d"))),
    st.tuples(st.just("commit")),
)


def apply(root: Path, op: Op) -> None:
    """One user action; git refusing it (a path it does not know) is part of the game."""
    kind, *args = op
    full = root / args[0] if args else root
    if kind in ("write", "symlink", "delete") and (full.is_symlink() or full.exists()):
        full.unlink()
    if kind == "write":
        write(full, args[1] * 3 + "\n")
    elif kind == "symlink":
        full.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(args[1], full)
    elif kind == "chmod" and full.exists() and not full.is_symlink():
        full.chmod(full.stat().st_mode ^ 0o111)
    elif kind == "ignore":
        write(root / ".gitignore", args[0])
    elif kind in ("add", "add -f", "rm --cached"):
        attempt(root, *kind.split(), "-q", "--", args[0])
    elif kind == "update-index":
        attempt(root, "update-index", args[0], "--", args[1])
    elif kind == "reset":
        attempt(root, "reset", "-q", *(["--", args[0]] if args[0] else []))
    elif kind == "commit":
        git(root, "commit", "-q", "--allow-empty", "-m", "c")


def attempt(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)


def test_property_checkpoint_equals_plumbing(long_run: bool) -> None:
    """After every user action, the checkpoint is git's plumbing snapshot of it."""

    @settings(
        max_examples=300 if long_run else 12,
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.booleans(), st.lists(ops, min_size=1, max_size=12 if long_run else 8))
    def scenario(sparse: bool, actions: list[Op]) -> None:
        with tempfile.TemporaryDirectory(prefix="prop-") as tmp:
            root = Path(tmp) / "repo"
            root.mkdir()
            git(root, "init", "-q")
            for path in FILES[::2]:
                write(root / path, path + "\n")
            git(root, "add", "-A")
            git(root, "commit", "-q", "-m", "initial")
            if sparse:
                git(root, "sparse-checkout", "set", "--cone", "d")
            ckpt(root, "task", "start", "t", "--goal", "g")
            assert_snapshot_is_plumbing(root)
            for i, action in enumerate(actions):
                apply(root, action)
                ckpt(root, "create", "-t", "t")
                ours = listing(root, checkpoint_tree(root))
                assert ours == listing(root, plumbing_tree(root)), (i, actions[: i + 1])

    scenario()
