"""compare_worktree (status + diff-index on the private index) agrees with the slow,
sure way (snapshot the tree, diff the trees), whatever state the private index is in."""

from __future__ import annotations

import os
import random
from pathlib import Path

from conftest import git
from helpers import write

from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.worktree import compare_worktree, snapshot_tree

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


def test_compare_agrees_with_snapshot_and_diff(repo: Path) -> None:
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


def test_nested_repository_compares_by_its_head(repo: Path) -> None:
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


def test_nested_repository_without_a_commit_is_no_drift(repo: Path) -> None:
    g = GitRepo.discover(str(repo))
    tree = snapshot_tree(g, SECRETS)
    (repo / "scratch").mkdir()
    git(repo / "scratch", "init", "-q")
    assert compare_worktree(g, tree, SECRETS) == ([], tree)
    assert snapshot_tree(g, SECRETS) == tree
