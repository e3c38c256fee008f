"""Files that snapshots never hold, under `forbidden_paths` / `protected_paths` globs.

`check` finds written paths by comparing snapshot trees, so files a snapshot
leaves out are invisible to it: gitignored ones (raw data often is), secret
paths, files above the size cap. "Raw data is read-only" must hold for
those too. So, per task, the files under the literal directory part of each
such glob (`data/raw/**` → `data/raw/`) are recorded by size and mtime when
the task starts (or at its first check, for a task started before this
existed) in `.git/agent/watch/<task>.json`; each check walks the same
directories and reports every path that appeared, went, or changed size or
mtime, and that the snapshot does not hold (those it sees itself).

A glob that starts with a wildcard (`**/*.csv`) names no directory to walk
and is left to the snapshot comparison: walking the whole tree at every check
would cost more than the check.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence

from git_agentckpt.git.files import write_if_changed
from git_agentckpt.globs import has_wildcard, match_any, normalize_path

WATCHED_KINDS = ("forbidden_paths", "protected_paths")
Stamp = tuple[int, int]  # size, mtime_ns


def base_dir(pattern: str) -> str | None:
    """The literal directory part of an anchored glob (`data/raw/**` → `data/raw`,
    `data/raw` → itself); None for a glob that matches at any depth (`*.log`) or
    starts with a wildcard (`**/x`), and for a negation."""
    pat = pattern.strip()
    if not pat or pat.startswith("!") or "/" not in pat.rstrip("/"):
        return None  # (globs.py: a pattern without an inner or leading `/` is unanchored)
    literal: list[str] = []
    for part in pat.strip("/").split("/"):
        if has_wildcard(part):
            break
        literal.append(part)
    return "/".join(literal) or None


def watched_globs(checks: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """The globs of the watched check kinds, from (kind, paths) pairs."""
    out: list[str] = []
    for kind, paths in checks:
        if kind in WATCHED_KINDS:
            out.extend(p for p in paths if isinstance(p, str))
    return out


def scan(workdir: str, globs: Sequence[str]) -> dict[str, Stamp]:
    """Every file under the globs' directories that matches a glob: (size, mtime_ns)."""
    out: dict[str, Stamp] = {}
    bases = sorted({b for b in (base_dir(g) for g in globs) if b})
    for base in bases:
        if any(base.startswith(other + "/") for other in bases if other != base):
            continue  # walked with its parent
        _walk(workdir, base, globs, out)
    return out


def _walk(workdir: str, base: str, globs: Sequence[str], out: dict[str, Stamp]) -> None:
    top = os.path.join(workdir, base)
    try:
        st = os.lstat(top)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        if match_any(globs, base):
            out[base] = (st.st_size, st.st_mtime_ns)
        return
    stack = [base]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(workdir, rel_dir)))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}"
            if entry.name == ".git":
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                    continue
                if match_any(globs, normalize_path(rel)):
                    est = entry.stat(follow_symlinks=False)
                    out[rel] = (est.st_size, est.st_mtime_ns)
            except OSError:
                continue


def manifest_path(agent_dir: str, task: str) -> str:
    return os.path.join(agent_dir, "watch", task.replace("/", "%") + ".json")


def load(path: str) -> dict[str, Stamp] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        return {p: (int(v[0]), int(v[1])) for p, v in doc["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def save(path: str, globs: Sequence[str], files: Mapping[str, Stamp]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = {"v": 1, "globs": list(globs), "files": {p: list(v) for p, v in sorted(files.items())}}
    write_if_changed(path, json.dumps(doc, separators=(",", ":")).encode())


def record(agent_dir: str, task: str, workdir: str, globs: Sequence[str]) -> None:
    """At task start: what the watched directories hold now."""
    save(manifest_path(agent_dir, task), globs, scan(workdir, globs))


def changed_since_start(
    agent_dir: str,
    task: str,
    workdir: str,
    globs: Sequence[str],
    in_snapshot: Callable[[str], bool],
) -> set[str]:
    """Watched paths that appeared, went or changed since the task's record, and that
    the snapshot does not hold. No record yet: one is made now (nothing to report)."""
    if not globs:
        return set()
    path = manifest_path(agent_dir, task)
    before = load(path)
    now = scan(workdir, globs)
    if before is None:
        save(path, globs, now)
        return set()
    moved = {p for p in before.keys() | now.keys() if before.get(p) != now.get(p)}
    return {p for p in moved if not in_snapshot(p)}
