"""A task belongs to the worktree that started it (issue 11, item 3).

Claude Code and Codex create linked worktrees for parallel agents: a checkpoint
taken in one must never land in another worktree's task, and a restore must
never copy one worktree's files into another.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git
from helpers import ckpt, ckpt_json, write


@pytest.fixture
def two_worktrees(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The main worktree with task `main-task`, and a linked worktree (no task yet)."""
    ckpt(repo, "task", "start", "main-task", "--goal", "main's work", "--step", "s1:x")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    return repo, linked


def test_the_state_records_the_worktree_that_started_the_task(
    two_worktrees: tuple[Path, Path],
) -> None:
    main, linked = two_worktrees
    assert ckpt_json(main, "task", "show", "main-task")["worktree"]["id"] == "main"
    ckpt(linked, "task", "start", "side-task", "--goal", "g")
    owner = ckpt_json(linked, "task", "show", "side-task")["worktree"]
    assert owner == {"id": "worktrees/linked", "path": str(linked)}


def test_without_t_a_linked_worktree_never_picks_the_main_worktrees_task(
    two_worktrees: tuple[Path, Path],
) -> None:
    main, linked = two_worktrees
    write(linked / "feature.py", "x = 1\n")
    refused = ckpt(linked, "create", "-m", "mine?", ok=False)
    assert refused.exit_code == 2 and "no active task" in refused.stderr
    assert len(ckpt_json(main, "list", "main-task")) == 1  # nothing recorded into it
    ckpt(linked, "task", "start", "side-task", "--goal", "g")
    made = ckpt_json(linked, "create", "-m", "side work")  # its single active task
    assert made["task"] == "side-task"
    tree = made["tree"]
    assert git(linked, "cat-file", "-p", f"{tree}:feature.py") == "x = 1"
    assert ckpt_json(main, "create", "-m", "main work")["task"] == "main-task"


@pytest.mark.parametrize(
    "command",
    [
        ("create", "-t", "main-task"),
        ("create", "-t", "main-task", "--light"),
        ("step", "start", "main-task", "s1"),
        ("resume", "main-task"),
        ("restore", "main-task"),
        ("check", "main-task"),
        ("tick", "main-task"),
    ],
)
def test_another_worktrees_task_is_refused_by_name(
    two_worktrees: tuple[Path, Path], command: tuple[str, ...]
) -> None:
    main, linked = two_worktrees
    write(linked / "feature.py", "x = 1\n")
    before = ckpt_json(main, "list", "main-task")
    refused = ckpt(linked, *command, ok=False)
    assert refused.exit_code == 2, refused.output
    assert f"task main-task belongs to the worktree at {main}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert ckpt_json(main, "list", "main-task") == before
    assert not (main / "feature.py").exists()


def test_reading_another_worktrees_task_is_fine(two_worktrees: tuple[Path, Path]) -> None:
    _main, linked = two_worktrees
    assert ckpt_json(linked, "task", "show", "main-task")["goal"] == "main's work"
    assert len(ckpt_json(linked, "list", "main-task")) == 1
    assert ckpt(linked, "log", "main-task").exit_code == 0


def test_a_state_patch_cannot_move_a_task_to_another_worktree(
    two_worktrees: tuple[Path, Path],
) -> None:
    main, _ = two_worktrees
    bad = ckpt(
        main,
        "create",
        "-t",
        "main-task",
        "--state",
        '{"worktree": {"id": "worktrees/linked", "path": "/elsewhere"}}',
        ok=False,
    )
    assert bad.exit_code == 2 and "cannot set 'worktree'" in bad.stderr
