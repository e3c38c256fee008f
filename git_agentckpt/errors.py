"""One exception base and every exit status, decided in one place.

Each error carries the exit status the CLI returns and a one-line message
that says what to do next. Library errors (pygit2.GitError, OSError) are
translated into these at the edge of the git layer.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from enum import IntEnum


class Exit(IntEnum):
    """Documented exit statuses of `git ckpt` (see the man page, EXIT STATUS)."""

    OK = 0
    FAILED = 1  # the operation ran and reported a failure (e.g. a blocking violation)
    USAGE = 2  # bad command line or bad input data (task name, JSON, contract)
    NOT_FOUND = 3  # unknown task or checkpoint
    REPOSITORY = 4  # not a git repository, bare repository, git missing
    CONFLICT = 5  # a concurrent writer kept winning; nothing was changed
    CORRUPT = 6  # stored data is malformed, of an unknown version, or fails a rehash
    SYSTEM = 7  # the system refused: disk full, read-only, no permission, path too long
    NEEDS_PERSON = 10  # resume: source drift, a person must decide
    ASSERTIONS_FAILED = 11  # resume: assertions fail and no rollback is possible
    BAD_RESTATEMENT = 12  # confirm: the restatement does not match the state
    RECOVERING = 13  # the task is recovering: confirm first (or --force)
    NOT_READY = 14  # resume: done, but a block constraint fails: fix it before continuing
    INTERNAL = 70  # a bug: please report it with GIT_CKPT_DEBUG=1 output
    INTERRUPTED = 130


class CkptError(Exception):
    """Base of every error the tool reports to a user."""

    exit_status: Exit = Exit.FAILED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        if self.hint:
            return f"{self.message}; {self.hint}"
        return self.message


class UsageError(CkptError):
    exit_status = Exit.USAGE


class BadTaskName(UsageError):
    pass


class BadStateError(UsageError):
    """Malformed task state JSON, or an update that deletes/rewords a step."""


class NotFound(CkptError):
    exit_status = Exit.NOT_FOUND


class RepositoryError(CkptError):
    exit_status = Exit.REPOSITORY


class ConflictError(CkptError):
    exit_status = Exit.CONFLICT


class CorruptError(CkptError):
    exit_status = Exit.CORRUPT


class UnknownVersion(CorruptError):
    pass


class TaskPaused(CkptError):
    """The task waits for its recovery: nothing moves it, no checkpoint of its own is
    taken. `status` is the task's (`recovering`, `not_ready`)."""

    status = "paused"


class RecoveringError(TaskPaused):
    exit_status = Exit.RECOVERING
    status = "recovering"


class NotReadyError(TaskPaused):
    """The task is not ready: a resume stopped for a person, or a block constraint failed
    at it (`lifecycle.not_ready`)."""

    exit_status = Exit.NOT_READY
    status = "not ready"


class OperationFailed(CkptError):
    exit_status = Exit.FAILED


class LockedError(ConflictError):
    """A lock file left in the git directory blocks an update (a live writer, or a killed one)."""


class SystemRefused(CkptError):
    """The operating system refused a read or write (`errno`): the user fixes the machine."""

    exit_status = Exit.SYSTEM

    def __init__(self, message: str, *, hint: str | None = None, errno: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.errno = errno


AGAIN = "run the command again; what was recorded before is intact"

# errno -> (what happened to PATH, what to do). Only errors the user fixes on the machine;
# everything else stays what it was (a RepositoryError, or a bug).
_SYSTEM: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("the disk holding {path} is full", "free space and " + AGAIN),
    errno.EDQUOT: ("the disk quota for {path} is used up", "free space and " + AGAIN),
    errno.EROFS: (
        "{path} is on a read-only file system",
        "remount it read-write (or run where the repository is writable) and " + AGAIN,
    ),
    errno.EACCES: (
        "permission denied on {path}",
        "give your user write access to it (ls -l shows the owner) and " + AGAIN,
    ),
    errno.EPERM: (
        "operation not permitted on {path}",
        "check its owner and attributes (ls -l, lsattr) and " + AGAIN,
    ),
    errno.ENAMETOOLONG: (
        "a path is too long for the file system: {path}",
        "use shorter file or directory names",
    ),
    errno.EMFILE: ("too many open files in this process", "raise `ulimit -n` and " + AGAIN),
    errno.ENFILE: ("too many open files on this machine", "close other programs and " + AGAIN),
    errno.EIO: ("input/output error on {path}", "check the disk (dmesg) and " + AGAIN),
    errno.EFBIG: ("a file is too large for the file system holding {path}", AGAIN),
    errno.ENOMEM: ("out of memory", "free memory and " + AGAIN),
}
SYSTEM_ERRNOS = frozenset(_SYSTEM)
# Conditions of a whole file system: the message names the repository's directory, not
# the temporary or lock file that met it first.
FILE_SYSTEM_WIDE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def system_refused(err: int | None, path: str | None, doing: str) -> SystemRefused | None:
    """The error to report for a system refusal `err` while `doing` (None: not one)."""
    if err not in _SYSTEM:
        return None
    what, fix = _SYSTEM[err]
    where = shorten(path) if path else "the repository"
    return SystemRefused(
        f"{doing}: {what.format(path=where)} ({errno.errorcode[err]})",
        hint=fix,
        errno=err,
    )


def shorten(text: str, limit: int = 120) -> str:
    """A one-line form of a long path or value: its start and end."""
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return f"{text[:keep]}…{text[-keep:]} ({len(text)} characters)"


@functools.cache
def _strerror_pattern() -> re.Pattern[str]:
    alternatives = "|".join(re.escape(os.strerror(e)) for e in _SYSTEM)
    return re.compile(rf": ({alternatives})\.?\s*$", re.MULTILINE)


def errno_in_text(text: str) -> int | None:
    """The system error that ends a line of `text` as `…: <strerror>` (libgit2 and git end
    their messages so, but hand back no errno), or None. "Permission denied (publickey)"
    from ssh is not a file-system error and does not match."""
    found = _strerror_pattern().search(text)
    if found is None:
        return None
    return next(e for e in _SYSTEM if os.strerror(e) == found.group(1))
