"""`git ckpt verify --dir DIR [--checkpoint ID]`: a working tree against an exported manifest.

Which manifest: DIR may be a whole export (its `export.json` lists the checkpoints:
the last one, or the one `--checkpoint` names by id, id prefix, commit prefix or
folder name) or one checkpoint folder (it holds `manifest.json`). An export that
says it is incomplete (`INCOMPLETE`), or whose manifest no longer matches its line
in `SHA256SUMS`, is refused as damaged (exit 6).

What is checked, file by file: present, of the same type (file, executable file,
link, submodule directory), same size and sha256. A file whose bytes differ only by
git's own conversion (end of line, clean filters: `git hash-object --path`) from the
blob the manifest names is unchanged, as `git status` would say. Then the files the
manifest does not name are extra (`git/dir_listing.py`: what `.gitignore` ignores and
`.git/` never count). Secret files (`secret_paths`) are neither checked nor extra,
as restore never writes them; large files pinned by `file_sha256` assertions are
checked by their sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from git_agentckpt.audit.export_write import MARKER, SUMS
from git_agentckpt.audit.manifest import GITLINK, SecretRule
from git_agentckpt.errors import CorruptError, NotFound, UsageError, shorten
from git_agentckpt.git.dir_listing import DirView
from git_agentckpt.model import JSON
from git_agentckpt.paths import from_json, json_fields

LINK, EXEC = 0o120000, 0o100755


@dataclass(frozen=True)
class Difference:
    kind: str  # missing | extra | modified | mode | type
    path: str
    detail: str

    def to_json(self) -> dict[str, JSON]:
        return {"kind": self.kind, **json_fields(self.path), "detail": self.detail}


@dataclass(frozen=True)
class DirCheck:
    export: str
    manifest: str  # the manifest used, relative to the export
    task: str
    checkpoint: str
    commit: str
    worktree: str
    checked: int  # entries compared
    secret: int  # secret entries left unchecked
    differences: tuple[Difference, ...]

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, JSON]:
        return {
            "ok": self.ok,
            "export": self.export,
            "manifest": self.manifest,
            "task": self.task,
            "checkpoint": self.checkpoint,
            "commit": self.commit,
            "worktree": self.worktree,
            "checked": self.checked,
            "secret_unchecked": self.secret,
            "differences": [d.to_json() for d in self.differences],
        }


def _load(path: str, what: str) -> Any:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError as exc:
        raise NotFound(f"{what} {shorten(path)} does not exist") from exc
    except (ValueError, RecursionError) as exc:
        raise CorruptError(f"{what} {shorten(path)} is not valid JSON: {exc}") from exc


def _choose(export_dir: str, checkpoint: str | None) -> str:
    """The folder (relative to the export) of the manifest to check against."""
    index = _load(os.path.join(export_dir, "export.json"), "the export index")
    folders: list[tuple[str, str, str]] = []  # (folder, checkpoint id, commit)
    tasks = index.get("tasks") if isinstance(index, dict) else None
    for task in tasks if isinstance(tasks, list) else []:
        listed = task.get("checkpoints") if isinstance(task, dict) else None
        for c in listed if isinstance(listed, list) else []:
            if isinstance(c, dict) and isinstance(c.get("folder"), str):
                folders.append((c["folder"], str(c.get("checkpoint")), str(c.get("commit"))))
    if not folders:
        raise NotFound(f"the export {shorten(export_dir)} holds no checkpoint")
    if checkpoint is None:
        if len({f.split("/checkpoints/")[0] for f, _, _ in folders}) > 1:
            raise UsageError("the export holds several tasks", hint="name one with --checkpoint")
        return folders[-1][0]
    want = checkpoint.strip()
    hits = [
        f
        for f, cid, commit in folders
        if cid.upper().startswith(want.upper())
        or (len(want) >= 4 and commit.startswith(want.lower()))
        or os.path.basename(f) == want
    ]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise NotFound(
            f"no checkpoint {want!r} in the export {shorten(export_dir)}",
            hint="see its export.json for the checkpoints it holds",
        )
    raise UsageError(f"{want!r} names {len(hits)} exported checkpoints", hint="give more of it")


def load_manifest(export_dir: str, checkpoint: str | None) -> tuple[str, dict[str, Any]]:
    """(manifest path relative to the export, the manifest), checked against SHA256SUMS."""
    if not os.path.isdir(export_dir):
        raise NotFound(f"--dir {shorten(export_dir)} is not a directory")
    if os.path.exists(os.path.join(export_dir, MARKER)):
        raise CorruptError(
            f"the export {shorten(export_dir)} is incomplete (an export was interrupted)",
            hint="export again with `git ckpt export`",
        )
    if os.path.isfile(os.path.join(export_dir, "manifest.json")) and checkpoint is None:
        rel = "manifest.json"
    else:
        rel = _choose(export_dir, checkpoint) + "/manifest.json"
    full = os.path.join(export_dir, rel)
    _check_sum(export_dir, rel, full)
    doc = _load(full, "the manifest")
    if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(doc.get("files"), list):
        raise CorruptError(f"{shorten(full)} is not a version 1 manifest of git ckpt export")
    return rel, doc


def _check_sum(export_dir: str, rel: str, full: str) -> None:
    try:
        with open(os.path.join(export_dir, SUMS), encoding="utf-8") as fh:
            sums: dict[str, str] = {}
            for line in fh:
                digest, sep, name = line.rstrip("\n").partition("  ")
                if sep:
                    sums[name] = digest
    except OSError:
        return  # a single checkpoint folder copied elsewhere: nothing to compare with
    if rel not in sums:
        return
    h = hashlib.sha256()
    with open(full, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != sums[rel]:
        raise CorruptError(
            f"{rel} does not match its line in {SUMS}: the export was changed after it was made",
            hint="export the checkpoint again",
        )


def _safe(path: str) -> bool:
    parts = path.split("/")
    return not path.startswith("/") and all(
        p not in ("", ".", "..") and p.lower() != ".git" for p in parts
    )


class _Tree:
    """Reads of the working tree that never follow a link in a parent directory."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._dirs: dict[str, bool] = {"": True}

    def real_dir(self, rel: str) -> bool:
        known = self._dirs.get(rel)
        if known is None:
            parent_ok = self.real_dir(os.path.dirname(rel))
            try:
                known = parent_ok and stat.S_ISDIR(os.lstat(os.path.join(self.root, rel)).st_mode)
            except OSError:
                known = False
            self._dirs[rel] = known
        return known

    def lstat(self, rel: str) -> os.stat_result | None:
        if not self.real_dir(os.path.dirname(rel)):
            return None
        try:
            return os.lstat(os.path.join(self.root, rel))
        except OSError:
            return None

    def digest(self, rel: str, st: os.stat_result) -> str:
        full = os.path.join(self.root, rel)
        if stat.S_ISLNK(st.st_mode):
            return hashlib.sha256(os.fsencode(os.readlink(full))).hexdigest()
        h = hashlib.sha256()
        with open(full, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()


def _path_of(entry: dict[str, Any]) -> str:
    raw = entry.get("path")
    if not isinstance(raw, str):
        raise CorruptError("a manifest entry has no path")
    path = from_json(raw)
    if not _safe(path):
        raise CorruptError(f"the manifest names an unsafe path {raw!r}")
    return path


def _compare(tree: _Tree, path: str, e: dict[str, Any]) -> tuple[Difference | None, bool]:
    """(the difference, whether git's conversion may explain it) of one listed file."""
    st = tree.lstat(path)
    mode = int(str(e.get("mode", "100644")), 8)
    if st is None:
        return Difference("missing", path, "in the checkpoint, not in the working tree"), False
    want = {LINK: "a symbolic link", GITLINK: "a submodule directory"}.get(mode, "a file")
    is_link, is_dir = stat.S_ISLNK(st.st_mode), stat.S_ISDIR(st.st_mode)
    got = "a symbolic link" if is_link else "a directory" if is_dir else "a file"
    odd = not (is_link or is_dir or stat.S_ISREG(st.st_mode))  # a fifo, a socket
    if (mode == LINK) != is_link or (mode == GITLINK) != is_dir or odd:
        return Difference("type", path, f"{got}, the checkpoint has {want}"), False
    if mode == GITLINK:
        return None, False
    if mode != LINK and bool(st.st_mode & 0o111) != (mode == EXEC):
        exe = "executable" if mode == EXEC else "not executable"
        return Difference(
            "mode", path, f"mode {st.st_mode & 0o777:o}, the checkpoint's is {exe}"
        ), False
    size, sha = e.get("size"), e.get("sha256")
    if st.st_size == size and tree.digest(path, st) == sha:
        return None, False
    detail = f"size {st.st_size}, sha256 differs (the checkpoint's: {size} bytes, {str(sha)[:12]}…)"
    return Difference("modified", path, detail), mode != LINK and isinstance(e.get("git_blob"), str)


def check_dir(worktree: str, export_dir: str, checkpoint: str | None = None) -> DirCheck:
    """Compare the working tree at `worktree` with an exported manifest (module doc)."""
    export_dir = os.path.abspath(export_dir)
    rel, doc = load_manifest(export_dir, checkpoint)
    rule = SecretRule([p for p in doc.get("secret_paths") or [] if isinstance(p, list)])
    pinned = _pinned(os.path.join(export_dir, os.path.dirname(rel), "assertions.json"))
    with DirView(worktree) as view:
        tree = _Tree(view.root)
        found: list[Difference] = []
        maybe: dict[str, tuple[Difference, str]] = {}
        expected: set[str] = set()
        gitlinks: set[str] = set()
        checked = secret = 0
        for e in doc["files"]:
            if not isinstance(e, dict) or e.get("status") == "deleted":
                continue
            path = _path_of(e)
            expected.add(path)
            if str(e.get("mode")) == f"{GITLINK:06o}":
                gitlinks.add(path)
            if e.get("secret"):
                secret += 1
                continue
            checked += 1
            diff, convertible = _compare(tree, path, e)
            if diff is not None and convertible:
                maybe[path] = (diff, str(e["git_blob"]))
            elif diff is not None:
                found.append(diff)
        found += _not_converted(view, maybe)
        for path, sha in sorted(pinned.items()):
            if path in expected or not _safe(path):
                continue
            expected.add(path)
            checked += 1
            found += _pinned_difference(tree, path, sha)
        skip = set(gitlinks)  # a submodule's own files; the export itself, when inside
        inside = os.path.relpath(export_dir, view.root)
        if not inside.startswith(".."):
            skip.add(inside.replace(os.sep, "/"))
        for path in sorted(view.files() - expected):
            if not rule.matches(path) and not _under(path, skip):
                found.append(
                    Difference("extra", path, "in the working tree, not in the checkpoint")
                )
        root = view.root
    order = {"missing": 0, "type": 1, "mode": 2, "modified": 3, "extra": 4}
    found.sort(key=lambda d: (os.fsencode(d.path), order.get(d.kind, 9)))
    return DirCheck(
        export_dir,
        rel,
        str(doc.get("task")),
        str(doc.get("checkpoint")),
        str(doc.get("commit")),
        root,
        checked,
        secret,
        tuple(found),
    )


def _under(path: str, dirs: set[str]) -> bool:
    """Whether `path` lies inside one of `dirs`."""
    while dirs and "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in dirs:
            return True
    return False


def _not_converted(view: DirView, maybe: dict[str, tuple[Difference, str]]) -> list[Difference]:
    """The differences that git's conversion (eol, filters) does not explain."""
    if not maybe:
        return []
    length = len(next(iter(maybe.values()))[1])
    ids = view.blob_ids(sorted(maybe), length)
    return [d for p, (d, blob) in sorted(maybe.items()) if ids.get(p) != blob]


def _pinned(assertions_path: str) -> dict[str, str]:
    """{file: sha256} of the checkpoint's `file_sha256` assertions (large files)."""
    try:
        doc = _load(assertions_path, "the assertions")
    except NotFound:
        return {}
    out: dict[str, str] = {}
    items = doc.get("assertions") if isinstance(doc, dict) else None
    for a in items if isinstance(items, list) else []:
        check = a.get("check") if isinstance(a, dict) else None
        if isinstance(check, dict) and check.get("kind") == "file_sha256":
            f, sha = check.get("file"), check.get("sha256")
            if isinstance(f, str) and isinstance(sha, str):
                out[f] = sha.lower()
    return out


def _pinned_difference(tree: _Tree, path: str, sha: str) -> list[Difference]:
    st = tree.lstat(path)
    if st is None or not stat.S_ISREG(st.st_mode):
        return [Difference("missing", path, "pinned by sha256 (not stored), not in the tree")]
    if tree.digest(path, st) != sha:
        return [Difference("modified", path, f"sha256 differs from the pinned {sha[:12]}…")]
    return []
