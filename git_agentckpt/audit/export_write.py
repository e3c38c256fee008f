"""Writing an export directory: nothing visible until it is whole.

`ExportDir(target)` refuses a target that exists and is not an empty directory,
then writes everything into `<target>.partial/`, which holds a file `INCOMPLETE`
from the first moment: a crash (or `kill -9`) leaves a folder whose name and
content both say it is unfinished, and never a `<target>` that looks whole. Each
file is written to a temporary name, flushed to disk and renamed (atomic per
file); `finish()` writes `SHA256SUMS` (every file's sha256, in `sha256sum -c`
format), removes `INCOMPLETE` and renames the folder to `<target>` (an empty
`<target>` directory is replaced by the same rename). Nothing is ever overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from typing import Any

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.errors import UsageError, shorten
from git_agentckpt.paths import json_safe, quote, store_json

MARKER = "INCOMPLETE"
SUMS = "SHA256SUMS"
_MARKER_TEXT = (
    b"This export was interrupted before it was complete: do not use it.\n"
    b"Remove this directory and run `git ckpt export` again.\n"
)


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON text: sorted keys, two-space indent, UTF-8, one final newline."""
    text = json.dumps(json_safe(value), sort_keys=True, indent=2, ensure_ascii=False)
    return (store_json(text) + "\n").encode("utf-8")


def json_line(value: Any) -> bytes:
    """One compact JSON line (sorted keys), as `git ckpt log --json` prints an event."""
    text = json.dumps(json_safe(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (store_json(text) + "\n").encode("utf-8")


def safe_component(name: str) -> bool:
    """Whether `name` can be one component of an exported path on any file system that
    matters: not empty, `.`, `..` or `.git` (any case), no separator or control byte."""
    try:
        size = len(name.encode("utf-8"))  # a name that is not UTF-8 is not exported
    except UnicodeEncodeError:
        return False
    if name in ("", ".", "..") or name.lower() == ".git" or size > 200:
        return False
    return not any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in name)


def check_target(target: str) -> None:
    """Refuse a target that exists and is not an empty directory (one line, exit 2)."""
    shown = shorten(target)
    if os.path.islink(target):
        raise UsageError(f"--to {shown} is a symbolic link", hint="pass a new or empty directory")
    if not os.path.lexists(target):
        return
    if not os.path.isdir(target):
        raise UsageError(f"--to {shown} exists and is not a directory", hint="pass a new path")
    if os.listdir(target):
        raise UsageError(
            f"--to {shown} is not empty",
            hint="pass a new or empty directory (an export never overwrites)",
        )


class ExportDir:
    """The folder being written (module doc)."""

    def __init__(self, target: str) -> None:
        self.target = os.path.abspath(target).rstrip("/") or "/"
        self.partial = self.target + ".partial"
        self._sums: dict[str, str] = {}
        self._made: set[str] = {""}
        check_target(self.target)
        parent = os.path.dirname(self.target)
        os.makedirs(parent, exist_ok=True)
        try:
            os.mkdir(self.partial)
        except FileExistsError as exc:
            raise UsageError(
                f"{shorten(self.partial)} exists: an interrupted export, or one still running",
                hint=f"remove it (rm -r {quote(self.partial)}) and run the export again",
            ) from exc
        self._write_file(MARKER, [_MARKER_TEXT], listed=False)

    @property
    def written(self) -> int:
        return len(self._sums)

    def write(self, rel: str, data: bytes) -> str:
        """Write one file (`rel`: a POSIX path inside the export); its sha256."""
        return self._write_file(rel, [data])

    def write_pieces(self, rel: str, pieces: Iterable[bytes]) -> str:
        """Write one file from pieces as they come (constant memory); its sha256."""
        return self._write_file(rel, pieces)

    def _mkdirs(self, rel_dir: str) -> None:
        if rel_dir in self._made:
            return
        self._mkdirs(os.path.dirname(rel_dir))
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.join(self.partial, rel_dir))
        self._made.add(rel_dir)

    def _write_file(self, rel: str, pieces: Iterable[bytes], listed: bool = True) -> str:
        if rel in self._sums or not all(safe_component(p) for p in rel.split("/")):
            raise UsageError(f"cannot export {rel!r}: a duplicate or unsafe name")
        self._mkdirs(os.path.dirname(rel))
        final = os.path.join(self.partial, rel)
        tmp = final + ".tmp"
        h = hashlib.sha256()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                for piece in pieces:
                    h.update(piece)
                    fh.write(piece)
                fh.flush()
                os.fsync(fh.fileno())
            if os.path.lexists(final):  # two names the same on this file system
                raise UsageError(f"cannot export {rel!r}: the name is taken (case-insensitive?)")
            os.rename(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        crash_point("export.write")
        digest = h.hexdigest()
        if listed:
            self._sums[rel] = digest
        return digest

    def finish(self) -> str:
        """SHA256SUMS, then the folder made visible as the target in one rename."""
        lines = "".join(f"{d}  {p}\n" for p, d in sorted(self._sums.items()))
        self._write_file(SUMS, [lines.encode("utf-8")], listed=False)
        os.unlink(os.path.join(self.partial, MARKER))
        _fsync_dir(self.partial)
        try:
            os.rename(self.partial, self.target)
        except OSError as exc:  # the target was filled or made meanwhile
            raise UsageError(
                f"--to {shorten(self.target)} changed while exporting: {exc.strerror}",
                hint=f"the export is kept in {shorten(self.partial)}",
            ) from exc
        _fsync_dir(os.path.dirname(self.target))
        return self.target

    def discard(self) -> None:
        """Remove the unfinished folder (an error stopped the export; a crash keeps it)."""
        shutil.rmtree(self.partial, ignore_errors=True)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
