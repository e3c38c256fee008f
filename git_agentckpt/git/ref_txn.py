"""Several refs moved as one: a `git update-ref --stdin` transaction.

`start`, then per ref `update REF NEW OLD` (or `create REF NEW`: it must not exist),
`prepare` (git locks every ref and checks every old value) and `commit`. If any ref is
not at its old value, or is locked, nothing moves. A checkpoint (its notes, its events
and its ref) and each state-changing event are committed this way
(`store/checkpoints.py`), so the state a note records is the state at the log tip the
transaction expects: a writer that moved the log in between makes it fail, and the
checkpoint is computed again (design section 2).

git runs with `core.hooksPath` pointing nowhere: the guard its `reference-transaction`
hook would run for another writer (`store/guard.py`) has run in this process already,
and libgit2's own ref moves ran no hook either.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from git_agentckpt.errors import CorruptError, OperationFailed
from git_agentckpt.git.run import error_lines, run_git
from git_agentckpt.git.syserr import git_failure


@dataclass(frozen=True)
class RefMove:
    """Move `ref` from `old` (None: it must not exist) to `new`."""

    ref: str
    new: str
    old: str | None

    def line(self) -> str:
        if self.old is None:
            return f"create {self.ref} {self.new}\n"
        return f"update {self.ref} {self.new} {self.old}\n"


def move_refs(workdir: str, common_dir: str, moves: Sequence[RefMove], message: str) -> bool:
    """All of `moves` or none; False when a ref was not at its old value or was locked by
    another writer (read again and retry). A refusal of the system (a full disk) raises
    `SystemRefused`; anything else `OperationFailed`."""
    if not moves:
        return True
    for move in moves:
        if "\n" in move.ref or " " in move.ref:
            raise CorruptError(f"refusing to move a ref named {move.ref!r}")
    script = "start\n" + "".join(m.line() for m in moves) + "prepare\ncommit\n"
    args = ["-c", "core.hooksPath=" + os.devnull, "update-ref", "-m", message, "--stdin"]
    proc = run_git(args, cwd=workdir, input=script.encode(), check=False)
    if proc.returncode == 0:
        return True
    text = proc.stderr.decode("utf-8", "replace")
    if _lost_race(text):
        return False
    refused = git_failure(proc.stderr, common_dir, "cannot move " + moves[0].ref)
    if refused is not None:
        raise refused
    lines = error_lines(proc.stderr)
    raise OperationFailed(f"git update-ref failed: {lines[-1] if lines else proc.returncode}")


# git's words when a ref is not where the transaction expects it, or is locked
_RACE = (
    "but expected",
    "reference already exists",
    "File exists",
    "unable to resolve reference",
    "is at ",
)


def _lost_race(stderr: str) -> bool:
    return "cannot lock ref" in stderr and any(word in stderr for word in _RACE)
