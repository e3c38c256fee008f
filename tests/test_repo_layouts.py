"""Git-dir layouts and the environment: the repository is found exactly as git finds it.

Issue 11, items 7, 9 and 10 (safe.directory): `--separate-git-dir`, a git dir
inside another repository, `GIT_DIR` / `GIT_WORK_TREE` (and `git --git-dir …
--work-tree … ckpt`), `GIT_CEILING_DIRECTORIES`, a linked worktree named by
the environment, SHA-256 repositories, a repository owned by another user.
Each snapshot is compared with `git add -A` on a copy of the user's current
index (`git ls-tree -r`), and restore with the bytes git would check out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git
from daemon_helpers import daemon_pids, ok, running_status, serving, status
from helpers import BIN_DIR, ckpt, ckpt_json

from git_agentckpt.git.repo import GitRepo


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The per-worktree daemon on for this test (tests/daemon_helpers.py)."""
    yield from serving(monkeypatch, tmp_path)


def plumbing_tree(work: Path, git_dir: Path, scratch: Path) -> str:
    """`git add -A` + `write-tree` on a copy of the user's index: what a snapshot must be."""
    index = scratch / "plumbing.index"
    if (git_dir / "index").exists():
        shutil.copy2(git_dir / "index", index)
    env = {
        **os.environ,
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": str(work),
        "GIT_INDEX_FILE": str(index),
    }
    subprocess.run(["git", "add", "-A"], cwd=work, env=env, check=True)
    out = subprocess.run(
        ["git", "write-tree"], cwd=work, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def ls_tree(git_dir: Path, rev: str) -> str:
    return git(git_dir, "--git-dir", str(git_dir), "ls-tree", "-r", rev)


def assert_snapshot_is_plumbing(work: Path, git_dir: Path, commit: str, scratch: Path) -> None:
    expected = plumbing_tree(work, git_dir, scratch)
    assert ls_tree(git_dir, commit) == ls_tree(git_dir, expected)


def commit_all(work: Path, message: str = "c") -> None:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)


def separate(tmp_path: Path, git_dir: Path, name: str = "wt") -> Path:
    """A repository made with `git init --separate-git-dir`, with one commit."""
    work = tmp_path / name
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    git(tmp_path, "init", "-q", "--separate-git-dir", str(git_dir), str(work))
    (work / "README.md").write_text("hello\n")
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("print('hi')\n")
    commit_all(work)
    return work


def test_separate_git_dir(tmp_path: Path) -> None:
    git_dir = tmp_path / "store" / "sep.git"
    work = separate(tmp_path, git_dir)
    assert (work / ".git").is_file()
    ckpt(work, "task", "start", "t", "--goal", "g")
    (work / "new.txt").write_text("new\n")
    (work / "README.md").write_text("changed\n")
    made = ckpt_json(work, "create", "-t", "t")
    assert_snapshot_is_plumbing(work, git_dir, made["commit"], tmp_path)
    # the runtime files are in the git dir the .git file names, never in the work tree
    assert (git_dir / "agent" / "index").exists() and not (work / ".git" / "agent").exists()
    # restore gives back the bytes git would check out
    (work / "README.md").write_text("drifted\n")
    (work / "new.txt").unlink()
    ckpt(work, "restore", made["id"])
    assert (work / "README.md").read_bytes() == git(
        work, "cat-file", "blob", f"{made['commit']}:README.md"
    ).encode() + b"\n"
    assert (work / "new.txt").read_text() == "new\n"
    # resume verifies through the shadow git dir and the private index: drift, then clean
    (work / "src" / "app.py").write_text("print('drift')\n")
    drift = ckpt(work, "resume", "t", ok=False)
    assert drift.exit_code == 10 and "src/app.py" in drift.stdout
    assert ckpt(work, "resume", "t", "--restore").exit_code == 0
    assert (work / "src" / "app.py").read_text() == "print('hi')\n"


def test_git_dir_inside_another_repository(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    (outer / "o.txt").write_text("outer\n")
    commit_all(outer)
    outer_objects = sorted(p.name for p in (outer / ".git" / "objects").iterdir())
    git_dir = outer / "inner.git"
    work = separate(tmp_path, git_dir)
    ckpt(work, "init")
    ckpt(work, "task", "start", "t", "--goal", "g")
    (work / "new.txt").write_text("new\n")
    made = ckpt_json(work, "create", "-t", "t")
    assert_snapshot_is_plumbing(work, git_dir, made["commit"], tmp_path)
    # the other repository is left alone: no .agent/ there, no object, no ref
    assert (work / ".agent" / "ckpt.toml").exists() and not (outer / ".agent").exists()
    assert sorted(p.name for p in (outer / ".git" / "objects").iterdir()) == outer_objects
    assert git(outer, "for-each-ref", "refs/agent") == ""
    assert "o.txt" not in ls_tree(git_dir, made["commit"])


@pytest.fixture
def two_repos(tmp_path: Path) -> tuple[Path, Path]:
    """Repository A (where the command runs) and repository B (the one the env names)."""
    pair = []
    for name in ("A", "B"):
        root = tmp_path / name
        root.mkdir()
        git(root, "init", "-q")
        (root / f"{name}.txt").write_text(f"{name}\n")
        commit_all(root)
        pair.append(root)
    return pair[0], pair[1]


def test_git_dir_and_work_tree_from_the_environment(
    two_repos: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_repos
    monkeypatch.setenv("GIT_DIR", str(b / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(b))
    (a / "sub").mkdir()
    ckpt(a / "sub", "task", "start", "t", "--goal", "g")
    (b / "work.txt").write_text("agent's work\n")
    made = ckpt_json(a / "sub", "create", "-t", "t")
    # the task and its snapshot are B's; A has none of it
    assert git(b, "for-each-ref", "--format=%(refname)", "refs/agent/checkpoints") == (
        "refs/agent/checkpoints/t"
    )
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert git(a, "for-each-ref", "refs/agent") == ""
    assert not (a / ".git" / "agent").exists()
    assert_snapshot_is_plumbing(b, b / ".git", made["commit"], tmp_path)
    assert "A.txt" not in ls_tree(b / ".git", made["commit"])
    # verification compares B's work tree with B's checkpoint
    monkeypatch.setenv("GIT_DIR", str(b / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(b))
    assert ckpt(a, "resume", "t").exit_code == 0
    (b / "work.txt").write_text("drifted\n")
    drift = ckpt(a, "resume", "t", ok=False)
    assert drift.exit_code == 10 and "work.txt" in drift.stdout


def test_git_dir_alone_makes_the_current_directory_the_work_tree(
    two_repos: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's rule: GIT_DIR without GIT_WORK_TREE (and no core.worktree): the top is `.`."""
    _, b = two_repos
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "only-here.txt").write_text("x\n")
    monkeypatch.setenv("GIT_DIR", str(b / ".git"))
    ckpt(work, "task", "start", "t", "--goal", "g")
    made = ckpt_json(work, "create", "-t", "t")
    tree = ls_tree(b / ".git", made["commit"])
    assert "only-here.txt" in tree and "B.txt" not in tree


def test_git_options_reach_ckpt_through_real_git(
    two_repos: tuple[Path, Path], tmp_path: Path
) -> None:
    """`git --git-dir ../B/.git --work-tree ../B ckpt …` run in A, relative paths and all."""
    a, b = two_repos
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])

    def through_git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "--git-dir", "../B/.git", "--work-tree", "../B", "ckpt", *args],
            cwd=a,
            env=env,
            capture_output=True,
            text=True,
        )

    started = through_git("task", "start", "t", "--goal", "g")
    assert started.returncode == 0, started.stderr
    (b / "more.txt").write_text("more\n")
    made = through_git("create", "-t", "t", "-m", "via git")
    assert made.returncode == 0, made.stderr
    listed = through_git("list", "t")
    assert "via git" in listed.stdout
    assert git(a, "for-each-ref", "refs/agent") == ""
    commit = git(b, "rev-parse", "refs/agent/checkpoints/t")
    assert_snapshot_is_plumbing(b, b / ".git", commit, tmp_path)


def test_git_options_run_in_their_own_process(
    two_repos: tuple[Path, Path], served: None, tmp_path: Path
) -> None:
    """`git --git-dir … ckpt` sets GIT_DIR / GIT_WORK_TREE: the daemon, found by walking up
    from the working directory, would be the wrong one, so the call runs in its own process
    (and starts no daemon), with the repository git names."""
    a, b = two_repos
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    through_git = ["git", "--git-dir", "../B/.git", "--work-tree", "../B", "ckpt"]

    def call(*args: str) -> str:
        proc = subprocess.run(
            [*through_git, *args], cwd=a, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    ok(a, "daemon", "start")  # a daemon for A, which the calls below must not use
    assert running_status(a)["served"] == 0
    call("list")
    call("task", "start", "t", "--goal", "g")
    call("create", "-t", "t", "-m", "own process")
    assert "own process" in call("list", "t")
    assert status(a)["served"] == 0
    assert not status(b)["running"]
    assert len(daemon_pids(tmp_path)) == 1
    assert git(a, "for-each-ref", "refs/agent") == ""
    assert git(b, "rev-parse", "--verify", "-q", "refs/agent/checkpoints/t")


def test_linked_worktree_named_by_the_environment(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    (linked / "side.txt").write_text("side\n")
    git_dir = Path(git(linked, "rev-parse", "--absolute-git-dir"))
    assert git_dir.parent.name == "worktrees"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(git_dir))
    monkeypatch.setenv("GIT_WORK_TREE", str(linked))
    ckpt(elsewhere, "task", "start", "t", "--goal", "g")
    made = ckpt_json(elsewhere, "create", "-t", "t")
    assert made["head"] == git(linked, "rev-parse", "HEAD")
    assert (git_dir / "agent" / "index").exists()  # the linked worktree's own runtime files
    assert_snapshot_is_plumbing(linked, git_dir, made["commit"], tmp_path)
    assert "side.txt" in ls_tree(git_dir, made["commit"])


def test_ceiling_directories_stop_the_search(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "deep").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repo))
    result = ckpt(repo / "deep", "list", ok=False)
    assert result.exit_code == 4 and "not a git repository" in result.stderr
    monkeypatch.delenv("GIT_CEILING_DIRECTORIES")
    assert ckpt(repo / "deep", "list").exit_code == 0


@pytest.mark.parametrize("shape", ["plain", "subdir", "separate", "inner", "linked", "env"])
def test_discovery_agrees_with_git(
    shape: str, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitRepo.discover's git dir and work tree are `git rev-parse`'s, layout by layout."""
    start = repo
    if shape == "subdir":
        start = repo / "src"
    elif shape in ("separate", "inner"):
        where = repo / ".git" / "nested.git" if shape == "inner" else tmp_path / "s.git"
        start = separate(tmp_path, where) / "src"
    elif shape == "linked":
        start = tmp_path / "lw"
        git(repo, "worktree", "add", "-q", "-b", "lw", str(start))
    elif shape == "env":
        monkeypatch.setenv("GIT_DIR", "../.git")
        monkeypatch.setenv("GIT_WORK_TREE", "..")
        start = repo / "src"
    found = GitRepo.discover(str(start))
    want = subprocess.run(
        ["git", "rev-parse", "--absolute-git-dir", "--show-toplevel"],
        cwd=start,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert os.path.realpath(found.git_dir) == os.path.realpath(want[0])
    assert os.path.realpath(found.workdir) == os.path.realpath(want[1])


def test_hook_with_a_relative_git_dir(repo: Path) -> None:
    """git hands a hook the GIT_DIR it was given (`--git-dir=../.git` from a subdirectory):
    the guard finds the same repository and still refuses a rogue checkpoint."""
    ckpt(repo, "hooks", "install")
    ckpt(repo, "task", "start", "t", "--goal", "g")
    good = ckpt_json(repo, "create", "-t", "t")
    rogue = git(repo, "commit-tree", "-p", good["commit"], "-m", "rogue", "HEAD^{tree}")
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"])
    moved = subprocess.run(
        ["git", "--git-dir=../.git", "update-ref", "refs/agent/checkpoints/t", rogue],
        cwd=repo / "src",
        env=env,
        capture_output=True,
        text=True,
    )
    assert moved.returncode != 0 and "is not a checkpoint commit of task 't'" in moved.stderr
    assert git(repo, "rev-parse", "refs/agent/checkpoints/t") == good["commit"]


def test_sha256_repository_is_refused_with_git_s_words(tmp_path: Path) -> None:
    root = tmp_path / "s256"
    root.mkdir()
    git(root, "init", "-q", "--object-format=sha256")
    (root / "a.txt").write_text("a\n")
    commit_all(root)
    for args in (["init"], ["task", "start", "t", "--goal", "g"], ["list"]):
        result = ckpt(root, *args, ok=False)
        assert result.exit_code == 4, result.output
        line = result.stderr.strip()
        assert "unknown object format 'sha256'" in line
        assert ": git ckpt supports SHA-1 repositories only" in line
        assert "Traceback" not in line and len(line.splitlines()) == 1
    assert not (root / ".agent").exists()
    assert git(root, "for-each-ref", "refs/agent") == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository away")
def test_repository_of_another_user_gets_git_s_safe_directory_advice(repo: Path) -> None:
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 12345, 12345)
    result = ckpt(repo, "list", ok=False)
    assert result.exit_code == 4
    advice = f"git config --global --add safe.directory {repo}"
    assert advice in result.stderr and "dubious ownership" in result.stderr
    # following the advice is enough: git (and so git ckpt) then accepts the repository
    subprocess.run(advice.split(), check=True)
    assert ckpt(repo, "task", "start", "t", "--goal", "g").exit_code == 0
    assert git(repo, "rev-parse", "--verify", "-q", "refs/agent/checkpoints/t")
