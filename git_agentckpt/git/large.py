"""Untracked files above the size cap: recorded by path, size and sha256, never stored.

A 200 MiB model checkpoint or dataset that nobody ignored would cost seconds
and its full size in the object store at every snapshot, and then be pushed
with the audit trail. So a snapshot leaves out every file above the cap
(`[snapshot] max_file_size`, 100 MiB by default) that the user's HEAD does not
track, and records it in `.git/agent/large.json` (per worktree):

    {"v": 1, "files": {"path": {"size": N, "mtime_ns": N, "sha256": "..."}}}

Known large files are written to the private excludes, so later snapshots do
not even read them; each snapshot re-stats them and recomputes the sha256 only
when size or mtime changed. Checkpoints pin them as assertions, so resume
checks that the artifact is still the one the checkpoint saw.

The first snapshot that meets a new large file has read it once (git added it
before its size was known); the blob it wrote is referenced by no tree and
goes at the next `git gc`. Finding such files before `add` would cost a second
walk of the working tree at every snapshot.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from git_agentckpt.git.files import write_if_changed

DEFAULT_MAX_FILE_SIZE = 100 * 1024 * 1024
_FILE = "large.json"


@dataclass(frozen=True)
class LargeFile:
    path: str
    size: int
    mtime_ns: int
    sha256: str

    def to_json(self) -> dict[str, int | str]:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


def sha256_of(full: str) -> str:
    import hashlib  # not at start-up: OpenSSL's loader costs a few ms

    h = hashlib.sha256()
    with open(full, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load(agent_dir: str) -> dict[str, LargeFile]:
    try:
        with open(os.path.join(agent_dir, _FILE), encoding="utf-8") as fh:
            doc = json.load(fh)
        files = doc["files"]
        return {
            p: LargeFile(p, int(v["size"]), int(v["mtime_ns"]), str(v["sha256"]))
            for p, v in files.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # a cache: a missing or damaged file is rebuilt by the next snapshots


def save(agent_dir: str, files: Mapping[str, LargeFile]) -> None:
    doc = {"v": 1, "files": {p: f.to_json() for p, f in sorted(files.items())}}
    data = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    write_if_changed(os.path.join(agent_dir, _FILE), data.encode())


def measure(workdir: str, path: str, cap: int, known: LargeFile | None) -> LargeFile | None:
    """`path` as a large file now, or None (gone, not a regular file, or not above the cap)."""
    full = os.path.join(workdir, path)
    try:
        st = os.lstat(full)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size <= cap:
        return None
    if known is not None and (known.size, known.mtime_ns) == (st.st_size, st.st_mtime_ns):
        return known
    try:
        digest = sha256_of(full)
    except OSError:
        return None
    return LargeFile(path, st.st_size, st.st_mtime_ns, digest)


def refresh(workdir: str, known: Mapping[str, LargeFile], cap: int) -> dict[str, LargeFile]:
    """The known large files as they are now: gone or shrunk ones are dropped."""
    out: dict[str, LargeFile] = {}
    for path, old in known.items():
        now = measure(workdir, path, cap, old)
        if now is not None:
            out[path] = now
    return out


def added_paths(add_verbose_stdout: bytes) -> list[str]:
    """The paths `git add --verbose` reports as added or updated (`add 'path'`)."""
    out = []
    for line in add_verbose_stdout.split(b"\n"):
        if line.startswith(b"add '") and line.endswith(b"'"):
            out.append(os.fsdecode(line[5:-1]))
    return out


def find_new(
    workdir: str,
    candidates: Iterable[str],
    cap: int,
    tracked: Callable[[str], bool],
) -> dict[str, LargeFile]:
    """Those of `candidates` above the cap that HEAD does not track."""
    out: dict[str, LargeFile] = {}
    for path in candidates:
        found = measure(workdir, path, cap, None)
        if found is not None and not tracked(path):
            out[path] = found
    return out


def exclude_patterns(paths: Iterable[str]) -> str:
    """gitignore lines matching exactly these paths (anchored, special characters escaped)."""
    lines = []
    for path in sorted(paths):
        escaped = "".join("\\" + c if c in "\\*?[]!# " else c for c in path)
        lines.append("/" + escaped + "\n")
    return "".join(lines)


def assertion(f: LargeFile) -> dict[str, object]:
    """The per-checkpoint assertion that pins a large file (checked on resume)."""
    return {
        "id": "large-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in f.path)[:100],
        "text": f"{f.path} is the {f.size}-byte file this checkpoint saw (not stored: too large)",
        "check": {"kind": "file_sha256", "file": f.path, "sha256": f.sha256},
    }
