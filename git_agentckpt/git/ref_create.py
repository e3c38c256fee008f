"""Creating a ref that must not exist yet, under git's own lock protocol (`GitRepo.cas_ref`
with no old value). No pygit2 here: libgit2's create is what this replaces."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from git_agentckpt.errors import RepositoryError
from git_agentckpt.git.syserr import system_error


def create_ref(common_dir: str, name: str, new: str, locked: Callable[[], None]) -> bool:
    """Create `name` at `new` only if it does not exist: git's own lock protocol.

    libgit2's create (pygit2 `references.create(force=False)`) checks that the
    ref is absent *before* it takes the lock and writes without a second look,
    so two concurrent creators both succeed and the second overwrites the
    first (seen: 2 of 800 concurrent events lost when a log was created). Here
    the `<ref>.lock` file (the one git and libgit2 take too) is created first,
    the absence is checked under it, and the value is renamed into place.
    """
    path = os.path.join(common_dir, name)
    lock = path + ".lock"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        locked()
        return False
    except OSError as exc:
        raise _ref_error(common_dir, name, exc) from exc
    renamed = False
    try:
        if os.path.isdir(path):
            raise RepositoryError(
                f"cannot create {name}: refs named {name}/... exist",
                hint="pick a task name that is not a prefix of another",
            )
        if os.path.lexists(path) or _packed_ref(common_dir, name):
            return False
        os.write(fd, (new + "\n").encode())
        os.close(fd)
        fd = -1
        os.rename(lock, path)
        renamed = True
        return True
    except OSError as exc:
        raise _ref_error(common_dir, name, exc) from exc
    finally:
        if fd >= 0:
            os.close(fd)
        if not renamed:
            with contextlib.suppress(OSError):
                os.unlink(lock)


def _ref_error(common_dir: str, name: str, exc: OSError) -> Exception:
    refused = system_error(exc, exc.filename or common_dir, f"cannot create {name}")
    return refused or RepositoryError(f"cannot create {name}: {exc.strerror}")


def _packed_ref(common_dir: str, name: str) -> bool:
    """Whether `packed-refs` holds `name`."""
    suffix = b" " + name.encode() + b"\n"
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as fh:
            return any(line.endswith(suffix) and not line.startswith(b"#") for line in fh)
    except FileNotFoundError:
        return False
