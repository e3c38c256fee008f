"""Cache files sealed with a secret of the user's: read back only as this user's `git ckpt`
wrote them.

The files of `.git/agent/state/` (task state, key-event index, checkpoint chain) save
work; what they hold is shown as the truth (`task show`, the recovery brief a
compaction hook gives the agent). A seal anyone can compute, such as a plain sha256,
only proves that a file is whole: edit the goal, seal again, and the edit was shown
while the refs (and `verify`) said otherwise. So each file is sealed with a keyed
BLAKE2b MAC whose key never is in the repository: 32 random bytes in
`$XDG_CONFIG_HOME/git-ckpt/cache-key` (default `~/.config/git-ckpt/`, mode 0600),
made on first use. A file whose MAC does not match (edited, sealed by someone without
the key, torn, from an older format) is ignored and computed again from the refs;
a key that cannot be read or made (no writable home) turns the caches off.

Files are written to a temporary name and renamed into place, so concurrent writers
leave one whole file or the other. In a call the daemon serves they are written after
the answer (`after_reply.py`).
"""

from __future__ import annotations

import contextlib
import os

from git_agentckpt import after_reply

FORMAT = "git-ckpt sealed v2"  # v1: an unkeyed sha256, never read any more
MAX_SEALED = 256 << 20  # bytes: a bigger cache file is not one of ours
KEY_BYTES = 32

_keys: dict[str, bytes | None] = {}  # key path -> the key read there (None: none can be)


def user_file(name: str) -> str:
    """`$XDG_CONFIG_HOME/git-ckpt/<name>`, a file of the user's outside every repository;
    a relative or empty XDG value is ignored (`~/.config`)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "git-ckpt", name)


def key_path() -> str:
    return user_file("cache-key")


def _user_key() -> bytes | None:
    """The key, read once a process for each path (a test changes `$HOME` between calls)."""
    path = key_path()
    if path not in _keys:
        _keys[path] = _read_or_make_key(path)
    return _keys[path]


def _read_or_make_key(path: str) -> bytes | None:
    """The key in `path`, made when there is none (two processes making it at once agree
    on the first one linked into place)."""
    for _ in range(2):
        with contextlib.suppress(FileNotFoundError, ValueError, OSError):
            with open(path, "rb") as fh:
                key = bytes.fromhex(fh.read(4 * KEY_BYTES).decode("ascii"))
            if len(key) == KEY_BYTES:
                return key
        if not _make_key(path):
            return None
    return None


def _make_key(path: str) -> bool:
    """Write a new key to `path` unless another process just did; False: cannot."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.urandom(KEY_BYTES).hex().encode() + b"\n")
        finally:
            os.close(fd)
        if os.path.exists(path):  # unreadable or damaged: replaced
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def seal(payload: bytes) -> str | None:
    """The MAC of `payload` under the user's key (None: no key, nothing is cached)."""
    import hashlib  # not at start-up (a command that reads no cache needs none)

    key = _user_key()
    if key is None:
        return None
    return hashlib.blake2b(payload, key=key, digest_size=32).hexdigest()


# Files written by this process whose writing waits for the answer (`write_sealed`):
# path -> payload, read back from here until written.
_unwritten: dict[str, str] = {}


def read_sealed(path: str) -> str | None:
    """The payload of a file `write_sealed` wrote; None when it is missing, torn, garbled
    or was not sealed with this user's key."""
    if path in _unwritten:
        return _unwritten[path]
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_SEALED:
                return None  # not one of ours: rebuilt from the refs
            data = fh.read(size + 1)  # read(n) allocates n: never a fixed 256 MiB
    except OSError:
        return None
    import hmac

    head, sep, payload = data.partition(b"\n")
    if not sep or not head.startswith(FORMAT.encode() + b" "):
        return None
    expected = seal(payload)
    if expected is None or not hmac.compare_digest(head[len(FORMAT) + 1 :], expected.encode()):
        return None
    try:
        return payload.decode("ascii")
    except UnicodeDecodeError:
        return None


def write_sealed(path: str, payload: str) -> None:
    """`payload` (ASCII JSON) under a line naming the format and its seal, written to a
    temporary name and renamed into place; errors are ignored (a cache only saves work).

    In a call the daemon serves, the file is written after the answer
    (`after_reply.py`: ~0.6 ms a file), the last payload of each path once; reads of
    this process see it meanwhile (`read_sealed`). A process killed first leaves the
    older file, which the next read extends or rebuilds, as after any crash."""
    if after_reply.deferring():
        if not _unwritten:
            after_reply.later(_write_unwritten)
        _unwritten[path] = payload
        return
    _write_now(path, payload)


def _write_unwritten() -> None:
    while _unwritten:
        path, payload = _unwritten.popitem()
        _write_now(path, payload)


def _write_now(path: str, payload: str) -> None:
    data = payload.encode("ascii")
    mac = seal(data)
    if mac is None:
        return
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, f"{FORMAT} {mac}\n".encode() + data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
