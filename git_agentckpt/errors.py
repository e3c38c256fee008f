"""One exception base and every exit status, decided in one place.

Each error carries the exit status the CLI returns and a one-line message
that says what to do next. Library errors (pygit2.GitError, OSError) are
translated into these at the edge of the git layer.
"""

from __future__ import annotations

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
    NEEDS_PERSON = 10  # resume: source drift, a person must decide
    ASSERTIONS_FAILED = 11  # resume: assertions fail and no rollback is possible
    BAD_RESTATEMENT = 12  # confirm: the restatement does not match the state
    RECOVERING = 13  # the task is recovering: confirm first (or --force)
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


class RecoveringError(CkptError):
    exit_status = Exit.RECOVERING


class OperationFailed(CkptError):
    exit_status = Exit.FAILED
