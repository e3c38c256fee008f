"""Reads for `git ckpt verify`: objects as stored, rehashed; objects missing from trees.

git does not rehash an object when it reads it (design section 7): a commit
rewritten in place is served as genuine until `git fsck`. Verify reads every
commit it checks as raw bytes and hashes them again here. Nothing in this
module raises on damage: a commit that cannot be read is returned as a
`RawCommit` with `error` set, so one bad object is one problem, not a crash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import pygit2
from pygit2.enums import FileMode, ObjectType

from git_agentckpt.git.repo import GitRepo

_TREE = int(FileMode.TREE)
_COMMIT_MODE = int(FileMode.COMMIT)  # a gitlink: its commit lives in another repository


@dataclass(frozen=True)
class RawCommit:
    """A commit as stored. `error` is set (and the rest empty) when it cannot be read."""

    id: str
    tree: str = ""
    parents: tuple[str, ...] = ()
    message: str = ""
    raw: bytes = b""  # the object's body, headers included (`gpgsig` for signed commits)
    intact: bool = True  # its bytes hash to its id
    error: str | None = None  # "missing", "corrupt: …", "not a commit …", "unreadable: …"

    @property
    def headers(self) -> dict[str, str]:
        """The first line of each header (`author`, `committer`, `gpgsig`, …)."""
        out: dict[str, str] = {}
        for line in self.raw.partition(b"\n\n")[0].split(b"\n"):
            if line and not line.startswith(b" "):
                key, _, value = line.decode("utf-8", "replace").partition(" ")
                out.setdefault(key, value)
        return out


def _hash(kind: bytes, data: bytes, oid: str) -> str:
    algo = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
    h = algo(kind + b" " + str(len(data)).encode() + b"\0")
    h.update(data)
    return h.hexdigest()


_NAMES = {
    int(ObjectType.COMMIT): "commit",
    int(ObjectType.TREE): "tree",
    int(ObjectType.BLOB): "blob",
}


def read_raw(repo: GitRepo, oid: str) -> tuple[str, bytes] | str:
    """(type name, body) of an object, or why it cannot be read ("missing", git's error)."""
    odb = repo._repo.odb
    try:
        kind, data = odb.read(oid)
    except KeyError:
        return "missing"
    except (ValueError, pygit2.GitError) as exc:  # libgit2's own hash check, a bad pack
        text = str(exc) or type(exc).__name__
        if "hash mismatch" in text:
            return "corrupt: its content does not hash to its id (changed in place)"
        return "missing" if "not found" in text else f"unreadable: {text[:120]}"
    return _NAMES.get(int(kind), "tag"), bytes(data)


def read_raw_commit(repo: GitRepo, oid: str) -> RawCommit:
    got = read_raw(repo, oid)
    if isinstance(got, str):
        return RawCommit(oid, error=got)
    kind, data = got
    if kind != "commit":
        return RawCommit(oid, error=f"not a commit (a {kind})")
    head, sep, body = data.partition(b"\n\n")
    lines = head.split(b"\n")
    tree = lines[0][5:].decode("ascii", "replace") if lines[0].startswith(b"tree ") else ""
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        parents.append(line[7:].decode("ascii", "replace"))
    return RawCommit(
        id=oid,
        tree=tree,
        parents=tuple(parents),
        message=body.decode("utf-8", "replace") if sep else "",
        raw=data,
        intact=_hash(b"commit", data, oid) == oid,
    )


def first_parent_chain(repo: GitRepo, tip: str, limit: int = 10_000_000) -> Iterator[RawCommit]:
    """Commits from `tip` back along first parents; a commit that cannot be read ends it
    (it is yielded, with `error` set). A loop (only a forged object can make one) ends too."""
    seen: set[str] = set()
    current: str | None = tip
    while current is not None and current not in seen and len(seen) < limit:
        seen.add(current)
        commit = read_raw_commit(repo, current)
        yield commit
        if commit.error is not None:
            return
        current = commit.parents[0] if commit.parents else None


def blob_state(repo: GitRepo, oid: str) -> tuple[bytes | None, str | None]:
    """(content, None) of an intact blob, or (None, why not)."""
    got = read_raw(repo, oid)
    if isinstance(got, str):
        return None, got
    kind, data = got
    if kind != "blob":
        return None, f"not a blob (a {kind})"
    if _hash(b"blob", data, oid) != oid:
        return None, "corrupt: its content does not hash to its id (changed in place)"
    return data, None


def missing_objects(repo: GitRepo, tree: str, base: str | None, seen: set[str]) -> list[str]:
    """Objects of `tree` that are not stored (as `path (id)`), looking only at what differs
    from `base` (the parent's tree) and at ids not in `seen` (updated): O(changes)."""
    missing: list[str] = []
    odb = repo._repo.odb

    def entries(oid: str | None) -> dict[str, tuple[str, int]] | None:
        if oid is None:
            return {}
        try:
            obj = repo._repo[oid]
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if not isinstance(obj, pygit2.Tree):
            return None
        return {str(e.name): (str(e.id), int(e.filemode)) for e in obj}

    stack: list[tuple[str, str, str | None]] = [("", tree, base)]
    while stack:
        path, oid, base_oid = stack.pop()
        if oid == base_oid or oid in seen:
            continue
        seen.add(oid)
        mine = entries(oid)
        if mine is None:
            missing.append(f"{path or '/'} (tree {oid[:12]})")
            continue
        theirs = entries(base_oid) or {}
        for name, (eid, mode) in mine.items():
            other = theirs.get(name)
            if other is not None and other[0] == eid:
                continue
            if mode == _TREE:
                sub_base = other[0] if other is not None and other[1] == _TREE else None
                stack.append((path + name + "/", eid, sub_base))
            elif mode != _COMMIT_MODE and eid not in seen:
                seen.add(eid)
                if not odb.exists(eid):
                    missing.append(f"{path}{name} (blob {eid[:12]})")
    return missing


def ls_remote(repo: GitRepo, remote: str) -> dict[str, str]:
    """Every ref `remote` holds: {name: id} (`git ls-remote`, nothing fetched)."""
    from git_agentckpt.errors import OperationFailed, UsageError
    from git_agentckpt.git.run import error_lines, run_git

    if remote.startswith("-"):
        raise UsageError(f"bad remote {remote!r}", hint="name a remote or a URL")
    proc = run_git(["ls-remote", "--", remote], cwd=repo.workdir, check=False)
    if proc.returncode != 0:
        lines = error_lines(proc.stderr)
        raise OperationFailed(
            f"git ls-remote {remote} failed: {lines[-1] if lines else proc.returncode}",
            hint="check the remote's name or URL and your access to it",
        )
    out: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        oid, _, name = line.partition("\t")
        if name and not name.endswith("^{}"):
            out[name] = oid
    return out
