"""Approvals of `command` checks, kept by the user, never in the repository.

A command that arrived with the repository (a fetched note, a contract
someone else wrote) is data, not code: it runs only once this user approved
that exact argv for this repository. An approval is the sha256 of the
canonical JSON `{"argv": [...], "repo": "<repo id>", "v": 1}` (ASCII-escaped,
sorted keys, no spaces), so one changed byte in any argument, or another
clone (the caller passes e.g. the absolute path of the git common dir as the
repository identity), needs a new approval.

Store: `$XDG_CONFIG_HOME/git-ckpt/trust` (default `~/.config/git-ckpt/trust`),
one JSON document `{"v": 1, "approvals": [{repo, fingerprint, argv, note,
approved_at}, ...]}`, directory mode 0700, file mode 0600. Writers take an
exclusive `flock` on `trust.lock` beside it and replace the file atomically
(temp file, fsync, `os.replace`). An unreadable file or an unknown `"v"` is an
error (fail closed), never "everything trusted" nor silently "nothing".
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from git_agentckpt.display import escape_control
from git_agentckpt.errors import CorruptError, UnknownVersion, UsageError
from git_agentckpt.sealed import user_file

__all__ = [
    "TRUST_VERSION",
    "TrustEntry",
    "TrustStore",
    "default_trust_path",
    "fingerprint",
]

TRUST_VERSION = 1
_HEX_RE = re.compile(r"[0-9a-f]+")
_MIN_PREFIX = 8


def default_trust_path() -> Path:
    """`$XDG_CONFIG_HOME/git-ckpt/trust` (`sealed.user_file`)."""
    return Path(user_file("trust"))


def fingerprint(repo_id: str, argv: Sequence[str]) -> str:
    """sha256 (hex) of the canonical JSON of the argv bound to the repository."""
    if isinstance(argv, str):
        raise TypeError("argv must be a sequence of strings, not a string")
    doc = {"argv": list(argv), "repo": repo_id, "v": TRUST_VERSION}
    canonical = json.dumps(doc, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class TrustEntry:
    repo_id: str
    fingerprint: str
    argv: tuple[str, ...]
    note: str = ""
    approved_at: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "repo": self.repo_id,
            "fingerprint": self.fingerprint,
            "argv": list(self.argv),
            "note": self.note,
            "approved_at": self.approved_at,
        }


class TrustStore:
    """The user's approvals. Reads take no lock (the file is replaced atomically)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_trust_path()
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    @staticmethod
    def fingerprint(repo_id: str, argv: Sequence[str]) -> str:
        return fingerprint(repo_id, argv)

    def is_trusted(self, repo_id: str, argv: Sequence[str]) -> bool:
        wanted = fingerprint(repo_id, argv)
        return any(
            e.fingerprint == wanted and e.repo_id == repo_id and e.argv == tuple(argv)
            for e in self._read()
        )

    def approve(self, repo_id: str, argv: Sequence[str], note: str = "") -> None:
        if isinstance(argv, str) or not argv:
            raise UsageError("cannot approve an empty command")
        entry = TrustEntry(
            repo_id,
            fingerprint(repo_id, argv),
            tuple(argv),
            note,
            datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )
        with self._locked():
            entries = self._read()
            if any(e.fingerprint == entry.fingerprint for e in entries):
                return
            self._write([*entries, entry])

    def revoke(self, repo_id: str, argv_or_fingerprint: Sequence[str] | str) -> bool:
        """Remove one approval, named by its argv or its fingerprint (or a unique
        prefix of at least 8 hex digits). False when nothing matched."""
        with self._locked():
            entries = self._read()
            mine = [e for e in entries if e.repo_id == repo_id]
            if isinstance(argv_or_fingerprint, str):
                key = argv_or_fingerprint.lower()
                if len(key) < _MIN_PREFIX or not _HEX_RE.fullmatch(key):
                    raise UsageError(f"not a fingerprint: {escape_control(argv_or_fingerprint)!r}")
                doomed = [e for e in mine if e.fingerprint.startswith(key)]
                if len(doomed) > 1:
                    raise UsageError(f"fingerprint prefix {key} is ambiguous; give more digits")
            else:
                wanted = fingerprint(repo_id, argv_or_fingerprint)
                doomed = [e for e in mine if e.fingerprint == wanted]
            if not doomed:
                return False
            self._write([e for e in entries if e not in doomed])
            return True

    def list(self, repo_id: str | None = None) -> builtins.list[TrustEntry]:
        return [e for e in self._read() if repo_id is None or e.repo_id == repo_id]

    # ---- storage -------------------------------------------------------------

    def _read(self) -> builtins.list[TrustEntry]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise CorruptError(f"{self.path}: cannot read the trust store: {why}") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise CorruptError(
                f"{self.path}: the trust store is not valid JSON",
                hint="fix or delete it (every approval is then asked again)",
            ) from None
        if not isinstance(doc, dict) or "v" not in doc:
            raise CorruptError(f'{self.path}: not a git-ckpt trust store (no "v")')
        if doc["v"] != TRUST_VERSION:
            raise UnknownVersion(
                f"{self.path}: trust store version {doc['v']!r} is not supported "
                f"(this git-ckpt reads v{TRUST_VERSION})",
                hint="upgrade git-ckpt",
            )
        approvals = doc.get("approvals", [])
        if not isinstance(approvals, builtins.list):
            raise CorruptError(f'{self.path}: "approvals" must be a list')
        return [self._entry(item) for item in approvals]

    def _entry(self, item: object) -> TrustEntry:
        if isinstance(item, dict):
            repo, fp, argv = item.get("repo"), item.get("fingerprint"), item.get("argv")
            note, when = item.get("note", ""), item.get("approved_at", "")
            if (
                isinstance(repo, str)
                and isinstance(fp, str)
                and isinstance(argv, builtins.list)
                and all(isinstance(arg, str) for arg in argv)
                and isinstance(note, str)
                and isinstance(when, str)
            ):
                if fp != fingerprint(repo, argv):
                    raise CorruptError(f"{self.path}: approval {fp[:12]} does not match its argv")
                return TrustEntry(repo, fp, tuple(argv), note, when)
        raise CorruptError(f"{self.path}: malformed approval entry")

    def _ensure_dir(self) -> None:
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if directory.name == "git-ckpt":  # ours: keep it private
            os.chmod(directory, 0o700)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure_dir()
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, entries: builtins.list[TrustEntry]) -> None:
        doc = {"v": TRUST_VERSION, "approvals": [e.to_json() for e in entries]}
        data = json.dumps(doc, ensure_ascii=True, indent=1, sort_keys=True).encode("ascii") + b"\n"
        fd, tmp = tempfile.mkstemp(prefix=".trust.", dir=self.path.parent)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
