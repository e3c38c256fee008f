"""The full checkpoint right after the user's index changed (the private index is
copied again from it, `git/private_index.py`), against git's own snapshot of the same
thing: a fresh copy of the user's index (mtime kept) + `add -A` + `write-tree` +
`commit-tree` + `update-ref`. Each round makes the usual changes (`Mutator`) and the
user stages one file (`git add`, untimed), then both run, alternating which goes first.

Not a test: `benchmarks/run.sh` runs it (`bench_suite.py`).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from bench_lib import GitCheckpoint, Mutator, Row, Series, alternate, git, paired

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer


class GitFreshCheckpoint(GitCheckpoint):
    """git's checkpoint on a fresh copy of the user's index at every run."""

    def __init__(self, repo: Path) -> None:
        super().__init__(repo, ref="refs/bench/fresh")
        self.index = repo / ".git" / "bench-fresh-index"
        self.env = {"GIT_INDEX_FILE": str(self.index)}

    def run(self) -> None:
        shutil.copy2(self.repo / ".git" / "index", self.index)
        super().run()


def bench_reseed(ck: Checkpointer, repo: Path, mut: Mutator, rounds: int) -> tuple[Series, Series]:
    gck = GitFreshCheckpoint(repo)
    staged = repo / "staged-by-the-user.txt"
    ours, theirs = Series(), Series()
    for i in range(-1, rounds):  # round -1: warm-up
        mut.step()
        staged.write_text(f"staged in round {i}\n")
        git(repo, "add", staged.name)
        a = functools.partial(ck.create, task="bench", message=f"reseed {i}", light=False)
        if i < 0:
            a()
            gck.run()
            continue
        alternate(i, functools.partial(ours.add, a), functools.partial(theirs.add, gck.run))
    return ours, theirs


def reseed_row(files: int, ours: Series, theirs: Series) -> Row:
    return Row.of(
        f"full checkpoint, {files:,} files, 20 modified + 2 new, right after the user "
        "staged a file (the private index copied again; in-process `ck.create`)",
        ours,
        theirs,
        note="no budget (DESIGN §8 sets one for the common case: the first row). Our extra "
        "is listing the copy's entries and bits and the full scan for secret paths (two "
        "`ls-files`, ~15 ms at 10k files). git = a fresh copy of the user's index (mtime kept) "
        "+ `add -A` + `write-tree` + `commit-tree` + `update-ref`: the snapshot's definition, "
        "run by git. The untracked files the rounds added (2 each, never staged) are hashed "
        f"again by both. Per-round (paired) ratios: {paired(ours.wall, theirs.wall)}",
    )
