"""Writing under a directory without ever following a symbolic link below it.

Every path is reached one component at a time from an open directory:
`open(component, O_DIRECTORY | O_NOFOLLOW, dir_fd=parent)`, and files,
links, renames, removals are made relative to the parent's descriptor. A
component that is a symbolic link, or becomes one while we write (another
process, or a tree that `tree_check` should have refused), makes the write
fail with a clear error: nothing is ever written through it. Files are
created `O_EXCL | O_NOFOLLOW` under a temporary name and renamed within the
same directory, so a reader sees the old file or the new one.

The descriptors of the current directory chain are kept between calls, so
writing files in path order opens each directory once, and a directory
renamed or swapped for a link after it was opened is still the one written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from types import TracebackType

from git_agentckpt.errors import OperationFailed, UsageError

LINK = 0o120000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_PREFIX = ".ckpt-restore-"


class SafeWriter:
    """Writes and removes files under `root`; use as a context manager."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._chain: list[tuple[str, int]] = []  # open directories below root, outermost first

    def __enter__(self) -> SafeWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._truncate(0)
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    # -- public operations ----------------------------------------------------------------

    def check_parents(self, rel: str) -> None:
        """Refuse now if a directory on the way to `rel` is a symbolic link (nothing written)."""
        self._parent(rel, create=False)

    def write(self, rel: str, data: bytes, mode: int, *, fresh: bool = False) -> None:
        """Make `rel` a file (exec bit from `mode`) or a symbolic link (`mode` 120000).

        A file standing where a directory of the path must be is removed, an
        empty directory in the place of `rel` too; a non-empty one is an
        error. `fresh`: `rel` does not exist yet (an export into a new
        directory), so it is created in place.
        """
        parent, name = self._parent(rel, create=True)
        assert parent is not None
        if fresh:
            self._create(parent, name, data, mode)
            return
        self._clear_directory(parent, name, rel)
        tmp = self._temp(parent, data, mode)
        try:
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            _unlink_quietly(parent, tmp)
            raise

    def remove(self, rel: str, *, prune: bool = True) -> bool:
        """Remove the file or link `rel` if there (True if it was); `prune`: then its
        parents that became empty."""
        parent, name = self._parent(rel, create=False)
        if parent is None:
            return False
        st = _lstat(parent, name)
        removed = st is not None and not stat.S_ISDIR(st.st_mode)
        if removed:
            os.unlink(name, dir_fd=parent)
        while prune and self._chain:
            dirname, _fd = self._chain[-1]
            above = self._chain[-2][1] if len(self._chain) > 1 else self._root_fd
            self._truncate(len(self._chain) - 1)
            try:
                os.rmdir(dirname, dir_fd=above)
            except OSError:
                break
        return removed

    # -- directories ------------------------------------------------------------------------

    def _parent(self, rel: str, *, create: bool) -> tuple[int | None, str]:
        """The open parent directory of `rel` and its last name (None: a directory is missing)."""
        parts = rel.split("/")
        dirs = parts[:-1]
        keep = 0
        while keep < min(len(dirs), len(self._chain)) and self._chain[keep][0] == dirs[keep]:
            keep += 1
        self._truncate(keep)
        for i in range(keep, len(dirs)):
            fd = self._open_dir(dirs[i], rel, "/".join(dirs[: i + 1]), create)
            if fd is None:
                return None, parts[-1]
            self._chain.append((dirs[i], fd))
        return (self._chain[-1][1] if self._chain else self._root_fd), parts[-1]

    def _open_dir(self, name: str, rel: str, shown: str, create: bool) -> int | None:
        parent = self._chain[-1][1] if self._chain else self._root_fd
        for _ in range(3):  # a concurrent writer may change the entry between two steps
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return None
                _mkdir_quietly(parent, name)
                continue
            except OSError as exc:
                st = _lstat(parent, name)
                if st is None:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    raise UsageError(
                        f"refusing to write {rel!r}: {shown!r} is a symbolic link",
                        hint="remove the link (or restore into a clean clone) and run again",
                    ) from exc
                if stat.S_ISDIR(st.st_mode):
                    raise
                if not create:
                    return None  # a file where a directory was: nothing below it to remove
                os.unlink(name, dir_fd=parent)  # a file standing where a directory must be
                _mkdir_quietly(parent, name)
        raise OperationFailed(
            f"cannot write {rel!r}: {shown!r} keeps changing under us",
            hint="stop the process that writes there and run again",
        )

    def _truncate(self, keep: int) -> None:
        while len(self._chain) > keep:
            os.close(self._chain.pop()[1])

    # -- files --------------------------------------------------------------------------------

    def _clear_directory(self, parent: int, name: str, rel: str) -> None:
        st = _lstat(parent, name)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise OperationFailed(
                    f"cannot restore {rel!r}: a non-empty directory is in the way",
                    hint="move it away and run restore again",
                ) from exc
            raise

    def _temp(self, parent: int, data: bytes, mode: int) -> str:
        while True:
            tmp = _TEMP_PREFIX + secrets.token_hex(6)
            try:
                self._create(parent, tmp, data, mode)
                return tmp
            except FileExistsError:
                continue

    @staticmethod
    def _create(parent: int, name: str, data: bytes, mode: int) -> None:
        if mode == LINK:
            os.symlink(os.fsdecode(data), name, dir_fd=parent)
            return
        fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb", closefd=False) as fh:
                fh.write(data)
            os.fchmod(fd, 0o755 if mode & 0o111 else 0o644)
        except BaseException:
            os.close(fd)
            _unlink_quietly(parent, name)
            raise
        os.close(fd)


def _lstat(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _mkdir_quietly(parent: int, name: str) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)


def _unlink_quietly(parent: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=parent)
