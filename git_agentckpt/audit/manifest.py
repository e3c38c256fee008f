"""`manifest.json` of one exported checkpoint, written as it is computed.

    {
      "baseline": …, "checkpoint": "<id>", "commit": …, "compared_with": {"commit", "what"},
      "counts": {"added", "deleted", "modified", "secret", "unchanged"},
      "files": [
        {"git_blob": …, "mode": "100644", "path": "a.py", "sha256": …, "size": 12,
         "status": "added|modified|unchanged"},
        {"mode": "100644", "path": ".env", "secret": true, "status": …},
        {"commit": …, "mode": "160000", "path": "sub", "status": …},
        {"path": "old.txt", "status": "deleted"}
      ],
      "head": …, "kind": "full|light", "number": <Seq>, "parent": {"checkpoint", "commit"},
      "position": <n in the chain>, "secret_paths": [[…], …], "step": …, "subject": …,
      "task": …, "time": "2026-01-01T00:00:00Z", "time_unix": …, "tree": …, "trigger": …,
      "v": 1
    }

Statuses compare with the previous checkpoint of the task (the first one: with the
baseline, the user's HEAD when the task began; none known: every file is added).
One file per line, sorted by path bytes. sha256 and size are those of the stored blob
(a link: its target), computed blob by blob (`git/blob_stream.py`) and cached by blob
id across the checkpoints of one export. A path matching `secret_paths` (any of: the
defaults, the current settings, the checkpoint's own `.agent/ckpt.toml`) is listed
with its mode and status only.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime

from git_agentckpt.errors import CkptError
from git_agentckpt.git.blob_stream import blob_digest
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.secret_files import may_be_secret
from git_agentckpt.globs import match_excluded
from git_agentckpt.model import JSON
from git_agentckpt.paths import json_fields, json_safe, store_json
from git_agentckpt.redact import DEFAULT_SECRET_PATHS
from git_agentckpt.settings import SETTINGS_PATH, settings_from_doc
from git_agentckpt.store.checkpoints import Checkpoint

GITLINK = 0o160000
STATUS = {"A": "added", "M": "modified", "T": "modified"}
_CACHE_MAX = 500_000


class DigestCache:
    """(sha256, size) by blob id, for the checkpoints of one export (most blobs repeat)."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self._known: dict[str, tuple[str, int]] = {}

    def get(self, oid: str) -> tuple[str, int]:
        found = self._known.get(oid)
        if found is None:
            if len(self._known) >= _CACHE_MAX:
                self._known.clear()
            found = self._known[oid] = blob_digest(self.repo, oid)
        return found


class SecretRule:
    """A path is secret when any one list of patterns excludes it (each list keeps its own
    `!` negations: lists are never concatenated)."""

    def __init__(self, lists: Sequence[Sequence[str]]) -> None:
        unique: list[tuple[str, ...]] = []
        for patterns in lists:
            t = tuple(patterns)
            if t and t not in unique:
                unique.append(t)
        self.lists = tuple(unique)
        # a first test that every path a list excludes passes (~1 µs): the exact
        # rules (pathspec, ~30 µs a list) only run for the few paths it lets through
        self._quick = [may_be_secret(p) for p in self.lists]

    def matches(self, path: str) -> bool:
        return any(
            quick(path) and match_excluded(p, path)
            for quick, p in zip(self._quick, self.lists, strict=True)
        )

    def to_json(self) -> list[JSON]:
        return [list(p) for p in self.lists]


def secret_patterns(repo: GitRepo, tree: str, current: Sequence[str]) -> SecretRule:
    """The defaults, the current settings' and the checkpoint's own `secret_paths`."""
    lists: list[Sequence[str]] = [DEFAULT_SECRET_PATHS, current]
    entry = repo.tree_entry(tree, SETTINGS_PATH)
    if entry is not None and entry[1] in (0o100644, 0o100755):
        try:
            doc = tomllib.loads(repo.read_blob(entry[0]).decode("utf-8"))
            lists.append(settings_from_doc(doc).secret_paths)
        except (ValueError, RecursionError, CkptError):
            pass  # a damaged settings file: the defaults and the current settings stand
    return SecretRule(lists)


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dump(value: JSON) -> str:
    return store_json(json.dumps(json_safe(value), sort_keys=True, ensure_ascii=False))


def _base(repo: GitRepo, ckpt: Checkpoint, parent: Checkpoint | None) -> tuple[str, str] | None:
    """(commit, what) the statuses compare with: the parent, else the baseline."""
    if parent is not None:
        return parent.commit, "parent"
    if ckpt.baseline and repo.exists(ckpt.baseline):
        return ckpt.baseline, "baseline"
    return None


Row = tuple[bytes, str, str, int, str, bool]


def file_rows(repo: GitRepo, ckpt: Checkpoint, base: str | None, secret: SecretRule) -> list[Row]:
    """(sort key, path, blob, mode, status, secret) of every file; deleted ones have
    blob '' (and are never secret: nothing of them is listed but the path)."""
    changes: dict[str, str] | None = None
    rows: list[Row] = []
    if base is not None:
        base_tree = repo.read_commit(base).tree
        changes = {}
        for c in repo.diff_trees(base_tree, ckpt.tree, type_changes=True):
            changes[c.path] = c.status
            if c.status == "D":
                rows.append((os.fsencode(c.path), c.path, "", 0, "deleted", False))
    for f in repo.tree_files(ckpt.tree):
        status = "added" if changes is None else STATUS.get(changes.get(f.path, ""), "unchanged")
        hidden = secret.matches(f.path)
        rows.append((os.fsencode(f.path), f.path, f.id, f.mode, status, hidden))
    rows.sort()
    return rows


def manifest_pieces(
    repo: GitRepo,
    ckpt: Checkpoint,
    parent: Checkpoint | None,
    position: int,
    secret: SecretRule,
    digests: DigestCache,
    clean: Callable[[JSON], JSON] = lambda v: v,
) -> Iterator[bytes]:
    """The manifest's text in pieces: the header, then one line per file (module doc)."""
    base = _base(repo, ckpt, parent)
    rows = file_rows(repo, ckpt, base[0] if base else None, secret)
    counts = {"added": 0, "deleted": 0, "modified": 0, "unchanged": 0, "secret": 0}
    for r in rows:
        counts[r[4]] += 1
        counts["secret"] += r[5]
    header = clean(
        {
            "v": 1,
            "task": ckpt.task,
            "checkpoint": ckpt.id,
            "commit": ckpt.commit,
            "tree": ckpt.tree,
            "number": ckpt.number,
            "position": position,
            "kind": ckpt.kind,
            "trigger": ckpt.trigger,
            "step": ckpt.step,
            "subject": ckpt.subject,
            "time": _iso(ckpt.time),
            "time_unix": ckpt.time,
            "baseline": ckpt.baseline,
            "head": ckpt.head,
            "parent": {"checkpoint": parent.id, "commit": parent.commit} if parent else None,
            "compared_with": {"commit": base[0], "what": base[1]} if base else None,
            "counts": dict(counts),
        }
    )
    assert isinstance(header, dict)
    header["secret_paths"] = secret.to_json()  # patterns, not secrets: never redacted
    keys = sorted([*header, "files"])
    yield b"{\n"
    for i, key in enumerate(keys):
        end = ",\n" if i < len(keys) - 1 else "\n"
        if key != "files":
            yield f"  {json.dumps(key)}: {_dump(header[key])}{end}".encode()
            continue
        yield b'  "files": [\n'
        for j, (_, path, blob, mode, status, hidden) in enumerate(rows):
            entry = _row(path, blob, mode, status, hidden, digests)
            sep = ",\n" if j < len(rows) - 1 else "\n"
            # plain data: the path is in its `to_json` form already (no raw byte left)
            text = json.dumps(entry, sort_keys=True, ensure_ascii=False)
            yield f"    {text}{sep}".encode()
        yield f"  ]{end}".encode()
    yield b"}\n"


def _row(
    path: str, blob: str, mode: int, status: str, hidden: bool, digests: DigestCache
) -> dict[str, JSON]:
    row: dict[str, JSON] = {**json_fields(path), "status": status}
    if status == "deleted":
        return row
    row["mode"] = f"{mode:06o}"
    if hidden:
        row["secret"] = True
    elif mode == GITLINK:
        row["commit"] = blob
    else:
        sha, size = digests.get(blob)
        row.update(git_blob=blob, sha256=sha, size=size)
    return row
