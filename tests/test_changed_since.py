"""The paths changed since a baseline, corrected from the last answer (`git/changed_since.py`):
after any sequence of trees, exactly what a full diff of the baseline gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_agentckpt.git.changed_since import NAME, changed_between
from git_agentckpt.git.repo import GitRepo

pytestmark = pytest.mark.mode("once", reason="the git layer alone: no `git ckpt` call")

PATHS = ("a", "b/c", "b/d/e", "b/d/f", "g/h", "b")
Edit = tuple[str, str, str]
edits = st.lists(
    st.tuples(
        st.sampled_from(("write", "delete", "link", "exec")),
        st.sampled_from(PATHS),
        st.sampled_from(("1", "2")),
    ),
    min_size=1,
    max_size=5,
)


def tree_of(g: GitRepo, files: dict[str, tuple[str, int]]) -> str:
    """A tree of `files` {path: (content, mode)}, written through the API."""
    nested: dict[str, dict[str, tuple[str, int]]] = {}
    here: dict[str, tuple[str, int]] = {}
    for path, (content, mode) in files.items():
        name, _, rest = path.partition("/")
        if rest:
            nested.setdefault(name, {})[rest] = (content, mode)
        else:
            here[name] = (g.write_blob(content.encode()), mode)
    for name, sub in nested.items():
        here[name] = (tree_of(g, sub), 0o040000)
    return g.write_tree(here)


def apply(files: dict[str, tuple[str, int]], edit: Edit) -> None:
    kind, path, value = edit
    for other in list(files):  # a file and a directory of the same name cannot both be
        if other.startswith(path + "/") or path.startswith(other + "/"):
            del files[other]
    if kind == "delete":
        files.pop(path, None)
    elif kind == "write":
        files[path] = (value, 0o100644)
    elif kind == "link":
        files[path] = (value, 0o120000)
    elif kind == "exec":
        files[path] = (value, 0o100755)


def test_property_the_corrected_answer_is_the_full_diff(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    g = GitRepo.discover(str(root))
    agent = str(root / ".git")

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(edits, st.lists(edits, min_size=1, max_size=6))
    def scenario(first: list[Edit], later: list[list[Edit]]) -> None:
        files: dict[str, tuple[str, int]] = {}
        for edit in first:
            apply(files, edit)
        base = tree_of(g, files)
        for batch in later:
            for edit in batch:
                apply(files, edit)
            tree = tree_of(g, files)
            expected = {c.path for c in g.diff_trees(base, tree)}
            assert changed_between(g, agent, base, tree) == expected, (first, later)

    scenario()


def test_a_damaged_memo_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    g = GitRepo.discover(str(root))
    agent = str(root / ".git")
    base = tree_of(g, {"a": ("1", 0o100644)})
    tree = tree_of(g, {"a": ("2", 0o100644), "b": ("1", 0o100644)})
    assert changed_between(g, agent, base, tree) == {"a", "b"}
    memo = Path(agent, NAME)
    memo.write_bytes(memo.read_bytes().replace(b'"a"', b'"z"'))  # edited: its digest fails
    assert changed_between(g, agent, base, tree) == {"a", "b"}
    os.unlink(memo)
    assert changed_between(g, agent, base, base) == set()


def test_property_the_tree_diff_is_libgit2s(tmp_path: Path) -> None:
    """`GitRepo.diff_trees` (which never reads a subtree both sides share) against
    libgit2's own tree diff, with and without type changes."""
    import pygit2

    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    g = GitRepo.discover(str(root))
    raw = pygit2.Repository(str(root))

    def libgit2s(old: str, new: str, typed: bool) -> list[tuple[str, str, int, int]]:
        Opt = pygit2.enums.DiffOption
        flags = Opt.INCLUDE_TYPECHANGE if typed else Opt.NORMAL
        diff = raw[old].peel(pygit2.Tree).diff_to_tree(raw[new].peel(pygit2.Tree), flags=flags)
        letters = {1: "A", 2: "D", 3: "M", 8: "T"}
        return sorted(
            (
                d.new_file.path if d.status != 2 else d.old_file.path,
                letters[int(d.status)],
                int(d.old_file.mode),
                int(d.new_file.mode),
            )
            for d in diff.deltas
        )

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
    @given(edits, edits)
    def scenario(first: list[Edit], second: list[Edit]) -> None:
        files: dict[str, tuple[str, int]] = {}
        for edit in first:
            apply(files, edit)
        old = tree_of(g, files)
        for edit in second:
            apply(files, edit)
        new = tree_of(g, files)
        for typed in (False, True):
            ours = sorted(
                (c.path, c.status, c.old_mode, c.new_mode)
                for c in g.diff_trees(old, new, type_changes=typed)
            )
            assert ours == libgit2s(old, new, typed), (first, second, typed)

    scenario()
