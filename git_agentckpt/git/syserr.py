"""System errors met in the git layer, translated into `SystemRefused` (exit 7).

A full disk, a read-only mount, a permission or a path too long is not a bug:
the user fixes the machine and runs the command again. They reach us in three
shapes, each translated here:

- `OSError` from Python's own file calls: it carries `errno` and the path.
- pygit2's exceptions: libgit2 appends `strerror(errno)` to its message and
  keeps its error *class* (`git_error_last()->klass`, read through pygit2's
  cffi binding), but pygit2's C extension hands back neither the errno nor
  libgit2's error *code* (GIT_ELOCKED, GIT_EMODIFIED): the errno is recovered
  from the strerror text (`errors.errno_in_text`), the only place it exists.
- git's stderr: git also ends its messages with strerror, except for a few
  (`unable to write new index file`), so when a git command fails without
  naming one, the file system holding the path is probed (full? read-only?).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pygit2
from pygit2.ffi import C, ffi

from git_agentckpt.errors import FILE_SYSTEM_WIDE, SystemRefused, errno_in_text, system_refused

_QUOTED_PATH = re.compile(r"'(/[^']+)'")
T = TypeVar("T")
WRITE_TRIES = 20


def last_error_class() -> int:
    """libgit2's class of the error just raised on this thread (`C.GIT_ERROR_*`; 0: none)."""
    err = C.git_error_last()
    return 0 if err == ffi.NULL else int(err.klass)


def last_error_message() -> str:
    """libgit2's message for the error just raised on this thread ("": none)."""
    err = C.git_error_last()
    if err == ffi.NULL or err.message == ffi.NULL:
        return ""
    return str(ffi.string(err.message).decode("utf-8", "replace"))


def probe(path: str) -> int | None:
    """The errno a write under `path` would meet now, when the file system says so."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return exc.errno
    if st.f_flag & os.ST_RDONLY:
        return errno.EROFS
    free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    if st.f_blocks and free == 0:
        return errno.ENOSPC
    if st.f_files and st.f_ffree == 0:
        return errno.ENOSPC  # no inodes left: the same message, the same fix
    return None


def system_error(exc: BaseException, path: str, doing: str) -> SystemRefused | None:
    """`exc` (an OSError or a pygit2 error) as a SystemRefused, or None when it is not one."""
    if isinstance(exc, SystemRefused):
        return exc
    err = exc.errno if isinstance(exc, OSError) and exc.errno is not None else None
    if err is None:
        err = errno_in_text(str(exc))
    where = path
    if err not in FILE_SYSTEM_WIDE:
        if isinstance(exc, OSError) and isinstance(exc.filename, str):
            where = exc.filename
        elif quoted := _QUOTED_PATH.search(str(exc)):
            where = quoted.group(1)
    return system_refused(err, where, doing)


@contextmanager
def translated(doing: str, path: str) -> Iterator[None]:
    """Re-raise a system refusal inside the block as SystemRefused; other errors pass."""
    try:
        yield
    except (OSError, pygit2.GitError) as exc:
        refused = system_error(exc, path, doing)
        if refused is None:
            raise
        raise refused from exc


def stored(write: Callable[[], T], objects_dir: str) -> T:
    """`write()`, an object write through libgit2, with a system refusal translated
    (`translated`); a write that lost its fan-out directory is made again.

    libgit2 writes a loose object to a temporary file in `objects/`, makes the
    directory `objects/xx/` and renames the file into it. `git prune-packed`, which
    ends every `git repack -d` and `git gc`, removes each fan-out directory it finds
    empty: one removed between the two steps fails the rename ("failed to rename
    lockfile ...: No such file or directory"), a race a second write does not meet."""
    tries = 0
    while True:
        try:
            with translated("cannot write to the object store", objects_dir):
                return write()
        except OSError as exc:
            tries += 1
            if tries >= WRITE_TRIES or not _lost_fanout(exc):
                raise


def _lost_fanout(exc: OSError) -> bool:
    text = str(exc)
    return "failed to rename lockfile" in text and os.strerror(errno.ENOENT) in text


def git_failure(
    stderr: bytes, path: str, doing: str, *, local: bool = True
) -> SystemRefused | None:
    """A failed git command's stderr as a SystemRefused (None: git failed for its own reasons).

    When git names no system error, a `local` path is probed: git says `unable to
    write new index file` on a full disk, with no strerror.
    """
    text = stderr.decode("utf-8", "replace")
    err = errno_in_text(text)
    if err is None and "insufficient permission" in text:  # git's words for EACCES on objects/
        err = errno.EACCES
    if err is None and local:
        err = probe(path)
    quoted = _QUOTED_PATH.search(text)
    if quoted and err not in FILE_SYSTEM_WIDE:
        path = quoted.group(1)
    return system_refused(err, path, doing)
