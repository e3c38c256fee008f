"""Ref moves over pygit2: reads, compare-and-swap with retry, and the locks of killed
writers. A part of `GitRepo` (`git/repo.py` inherits it), kept apart by responsibility:
every ref move of the tool goes through `cas_ref` (design: crash safety by
construction)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

import pygit2
from pygit2.ffi import C

from git_agentckpt.errors import ConflictError, CorruptError, RepositoryError
from git_agentckpt.git.object_batch import flush_all
from git_agentckpt.git.ref_create import create_ref
from git_agentckpt.git.ref_txn import RefMove, move_refs
from git_agentckpt.git.syserr import last_error_class, system_error
from git_agentckpt.retry import retry

STALE_LOCK_SECONDS = 5.0
T = TypeVar("T")


class ObjectGone(ConflictError):
    """A transaction would name an object that is no longer stored: a concurrent `git gc
    --prune=now` (or `git prune`) took it before anything named it. Nothing moved;
    writing the objects again and retrying succeeds (a checkpoint does so itself)."""

    def __init__(self, ref: str, oid: str) -> None:
        super().__init__(
            f"{ref} would name object {oid}, which is no longer stored (a concurrent "
            "`git gc --prune=now` or `git prune` removed it): nothing was changed",
            hint="run the command again",
        )
        self.oid = oid


def retry_cas(attempt: Callable[[], T | None], what: str, tries: int = 200) -> T:
    """Run `attempt` until it returns non-None (`retry.retry`: jittered backoff)."""
    return retry(attempt, what=what, tries=tries)


class RefMoves:
    """Reading and moving refs; `GitRepo` sets `_repo` and `common_dir`."""

    _repo: pygit2.Repository
    common_dir: str
    workdir: str

    def exists(self, oid: str) -> bool:
        raise NotImplementedError  # GitRepo's

    def first_missing(self, commit: str) -> str | None:
        raise NotImplementedError  # GitRepo's

    def read_ref(self, name: str) -> str | None:
        try:
            ref = self._repo.references.get(name)
        except (pygit2.GitError, ValueError):
            return None
        if ref is None:
            return None
        return str(ref.resolve().target)

    def list_refs(self, prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in self._repo.references:
            if name.startswith(prefix):
                value = self.read_ref(name)
                if value is not None:
                    out[name] = value
        return out

    def cas_ref(self, name: str, new: str, old: str | None, message: str) -> bool:
        """Move `name` from `old` (None: must not exist) to `new`. False if it was not `old`.
        Objects still in memory go to disk first (`object_batch.py`)."""
        flush_all()
        if old is None:
            return self._create_ref(name, new)
        try:
            ref = self._repo.references.get(name)
            if ref is None or str(ref.target) != old:
                return False
            ref.set_target(new, message)
            return True
        except pygit2.AlreadyExistsError:
            return False
        except (pygit2.GitError, OSError) as exc:
            return self._set_target_failed(name, new, old, exc, last_error_class())

    def cas_refs(self, moves: Sequence[RefMove], message: str) -> bool:
        """Move every ref of `moves` from its old value, or none (`git/ref_txn.py`). False:
        one was not at its old value, or was locked (a lock left by a killed writer is
        broken, as `cas_ref` does). A single ref moves in this process (`cas_ref`).

        Right before, with the objects in memory on disk, each new commit is checked to
        be stored with what it adds to its parent's tree (`ObjectGone` if not)."""
        flush_all()
        for move in moves:
            missing = self.first_missing(move.new)
            if missing is not None:
                raise ObjectGone(move.ref, missing)
        if len(moves) == 1:
            return self.cas_ref(moves[0].ref, moves[0].new, moves[0].old, message)
        if move_refs(self.workdir, self.common_dir, moves, message):
            return True
        for move in moves:
            if os.path.exists(os.path.join(self.common_dir, move.ref + ".lock")):
                self._break_stale_lock(move.ref)
        return False

    def _set_target_failed(self, name: str, new: str, old: str, exc: Exception, klass: int) -> bool:
        """Why `set_target` failed: a lost race (False: read again and retry) or an error.

        pygit2 keeps libgit2's error class but drops its code, so the cases are told
        apart by the class, not by the message text: GIT_EMODIFIED (class REFERENCE:
        the ref is no longer `old`) and GIT_ELOCKED (class OS: another writer holds
        `<ref>.lock`) are lost races; an OS-class error naming a system errno is a
        system refusal. (REFERENCE is also the class of "target OID doesn't exist":
        that one is told by looking for the object.)
        """
        refused = system_error(exc, self.common_dir, f"cannot update {name}")
        if refused is not None:
            raise refused from exc
        if klass == C.GIT_ERROR_REFERENCE:
            if not self.exists(new):
                raise CorruptError(
                    f"cannot move {name} from {old[:12]}: its new value {new} is not stored",
                    hint="run the command again; if it fails again, run `git fsck`",
                ) from exc
            return False
        if klass == C.GIT_ERROR_OS:
            self._break_stale_lock(name)
            return False
        raise RepositoryError(f"cannot update {name}: {exc}") from exc

    def _create_ref(self, name: str, new: str) -> bool:
        """Create `name` at `new` only if it does not exist (`git/ref_create.py`)."""
        return create_ref(self.common_dir, name, new, lambda: self._break_stale_lock(name))

    def _break_stale_lock(self, name: str) -> None:
        """A ref lock left by a killed writer (libgit2 holds one for microseconds), removed
        only when no live process can own it (`git/leftovers.py`)."""
        from git_agentckpt.git.leftovers import break_if_abandoned  # rare: not at start-up
        from git_agentckpt.git.repo import GitRepo

        assert isinstance(self, GitRepo)  # the one class that mixes this in
        for lock in (
            os.path.join(self.common_dir, name + ".lock"),
            os.path.join(self.common_dir, "packed-refs.lock"),
        ):
            break_if_abandoned(self, lock, STALE_LOCK_SECONDS)

    def update_ref(self, name: str, message: str, compute: Callable[[str | None], str]) -> str:
        """Compare-and-swap `name` to `compute(old)`, retrying with jitter on a lost race."""

        def attempt() -> str | None:
            old = self.read_ref(name)
            new = compute(old)
            if new == old:
                return new
            return new if self.cas_ref(name, new, old, message) else None

        return retry_cas(attempt, f"updating {name}")
