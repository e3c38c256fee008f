"""compare_worktree (status + diff-index on the private index) agrees with the slow,
sure way (snapshot the tree, diff the trees), whatever state the private index is in."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from conftest import git
from helpers import write

from git_agentckpt.git import compare
from git_agentckpt.git.compare import compare_worktree
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import snapshot_tree

SECRETS = (".env",)


def mutate(root: Path, rng: random.Random, names: list[str]) -> None:
    for _ in range(rng.randint(1, 6)):
        name = rng.choice(names)
        path = root / name
        action = rng.choice(["write", "write", "delete", "revert", "exec"])
        if action == "write":
            write(path, f"{name} {rng.randint(0, 3)}\n")
        elif action == "revert":
            write(path, f"{name} 0\n")  # back to the first content
        elif action == "delete" and path.exists():
            path.unlink()
        elif action == "exec" and path.exists():
            os.chmod(path, 0o755)


@pytest.fixture(params=["shadow", "two-commands"])
def method(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways compare_worktree can ask git: one `status` with the shadow git dir
    (SHA-1 repositories), or `status` + `diff-index --cached` (any other)."""
    if request.param == "two-commands":
        monkeypatch.setattr(compare, "shadow_git_dir", lambda *_: None)
    return str(request.param)


def test_compare_agrees_with_snapshot_and_diff(repo: Path, method: str) -> None:
    rng = random.Random(1234)
    names = [f"d{i % 3}/f{i}.txt" for i in range(12)] + ["top.txt", ".env"]
    for name in names[:8]:
        write(repo / name, f"{name} 0\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    g = GitRepo.discover(str(repo))
    trees = [snapshot_tree(g, SECRETS)]
    for round_ in range(25):
        mutate(repo, rng, names)
        expected = rng.choice(trees)  # an older tree: the private index may not match it
        changes, clean_tree = compare_worktree(g, expected, SECRETS)
        actual = snapshot_tree(g, SECRETS)
        truth = {(c.path, c.status) for c in g.diff_trees(expected, actual)}
        ours = {(c.path, c.status) for c in changes}
        assert ours == truth, f"round {round_}"
        assert (clean_tree == expected) == (not truth)
        if rng.random() < 0.5:
            trees.append(actual)
    assert ".env" not in {c.path for c in g.diff_trees(trees[0], trees[-1])}


def test_nested_repository_compares_by_its_head(repo: Path, method: str) -> None:
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    write(nested / "x.txt", "x\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-qm", "n")
    g = GitRepo.discover(str(repo))
    tree = snapshot_tree(g, SECRETS)
    assert compare_worktree(g, tree, SECRETS) == ([], tree)
    write(nested / "y.txt", "y\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-qm", "n2")
    changes, _ = compare_worktree(g, tree, SECRETS)
    assert [(c.path, c.status) for c in changes] == [("vendor/lib", "M")]


def test_nested_repository_without_a_commit_is_no_drift(repo: Path, method: str) -> None:
    g = GitRepo.discover(str(repo))
    tree = snapshot_tree(g, SECRETS)
    (repo / "scratch").mkdir()
    git(repo / "scratch", "init", "-q")
    assert compare_worktree(g, tree, SECRETS) == ([], tree)
    assert snapshot_tree(g, SECRETS) == tree


def _loose_objects(git_dir: Path) -> set[str]:
    return {
        f"{d.name}{f.name}"
        for d in (git_dir / "objects").iterdir()
        if len(d.name) == 2
        for f in d.iterdir()
    }


def test_the_shadow_git_dir_writes_nothing_of_the_users(repo: Path) -> None:
    """Its HEAD commits live in .git/agent/shadow/objects; HEAD, index and refs stay."""
    g = GitRepo.discover(str(repo))
    tree = snapshot_tree(g, SECRETS)
    write(repo / "src" / "app.py", "print('changed')\n")
    dot_git = repo / ".git"
    before = (
        _loose_objects(dot_git),
        (dot_git / "HEAD").read_bytes(),
        (dot_git / "index").read_bytes(),
        git(repo, "for-each-ref"),
    )
    changes, _ = compare_worktree(g, tree, SECRETS)
    assert [(c.path, c.status) for c in changes] == [("src/app.py", "M")]
    after = (
        _loose_objects(dot_git),
        (dot_git / "HEAD").read_bytes(),
        (dot_git / "index").read_bytes(),
        git(repo, "for-each-ref"),
    )
    assert after == before
    shadow = dot_git / "agent" / "shadow"
    head = (shadow / "HEAD").read_text().strip()
    assert len(_loose_objects(shadow)) == 1
    assert git(repo, "--git-dir", str(shadow), "rev-parse", "HEAD^{tree}") == tree
    assert head not in _loose_objects(dot_git)
    compare_worktree(g, tree, SECRETS)  # the same tree: the same commit, nothing new
    assert len(_loose_objects(shadow)) == 1


def test_linked_worktree_and_info_exclude(repo: Path, tmp_path: Path, method: str) -> None:
    """A linked worktree reads the common object store and config; info/exclude holds."""
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("scratch-*.txt\n")
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "side", str(other))
    g = GitRepo.discover(str(other))
    assert g.common_dir != g.git_dir
    tree = snapshot_tree(g, SECRETS)
    write(other / "scratch-1.txt", "ignored by info/exclude\n")
    assert compare_worktree(g, tree, SECRETS) == ([], tree)
    write(other / "src" / "app.py", "print('wt')\n")
    write(other / "new.txt", "n\n")
    changes, clean = compare_worktree(g, tree, SECRETS)
    assert sorted((c.path, c.status) for c in changes) == [("new.txt", "A"), ("src/app.py", "M")]
    assert clean is None
