"""Files matching `secret_paths` never give a snapshot new content, tracked ones included.

The private excludes file keeps *untracked* secret files out of `git add -A`,
but excludes never apply to tracked files: a tracked `.env` that is edited
would be hashed into the object store and pushed. So in the private index
every entry that matches `secret_paths` is **pinned**: set to the blob the
user's HEAD commit has at that path (nothing new: that blob is already in the
user's history) and marked `skip-worktree`, so `git add -A` never reads the
file, never writes its content as a blob, and `git status` never reports it.
An entry HEAD does not have (a secret staged but never committed, or one
added before its pattern was in `secret_paths`) is removed instead: the
snapshot leaves it out.

A `.gitignore` that re-includes a secret path (`!.env`) outranks the private
excludes, so `git add` reads such an untracked file (its blob lands in the
local object store, referenced by nothing, and `git gc` drops it): `add` is
run with `--verbose`, and each path it added that matches is taken back out
of the private index before the tree is written (`catch_added`), so no
snapshot refers to it and no push sends it.

Cost: the matching entries are listed with `git ls-files -ci` only when the
private index is new or `secret_paths` changed; when HEAD moves, the paths
that changed between the two HEAD trees are checked; otherwise (nearly
every snapshot) this costs a read of `.git/agent/secrets.json` and nothing
else.

    {"v": 1, "patterns": "<sha1 of secret_paths>", "head": "<HEAD tree or null>",
     "paths": ["<pinned path>", ...]}
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from git_agentckpt.git.files import write_if_changed
from git_agentckpt.git.repo import EMPTY_TREE, GitRepo
from git_agentckpt.git.run import run_git
from git_agentckpt.globs import compile_glob, match_excluded

_STAMP = "secrets.json"
_EXCLUDE = "secret-exclude"
_TREE = 0o040000


def _load(base: str) -> dict[str, object]:
    try:
        with open(os.path.join(base, _STAMP), encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) and obj.get("v") == 1 else {}


def _z(paths: Iterable[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _paths(out: bytes) -> list[str]:
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def pin_secret_entries(
    repo: GitRepo,
    base: str,
    env: Mapping[str, str],
    secret_paths: Sequence[str],
    fresh: bool,
) -> None:
    """Pin the private index's secret entries (module doc). Call under the index flock,
    after seeding and before `add`; `fresh`: the private index was just seeded."""
    text = "".join(p + "\n" for p in secret_paths)
    key = hashlib.sha1(text.encode("utf-8", "surrogateescape"), usedforsecurity=False).hexdigest()
    head = repo.head()
    head_tree = repo.read_commit(head).tree if head else None
    stamp = _load(base)
    if not fresh and stamp.get("patterns") == key and stamp.get("head") == head_tree:
        return  # the common case: nothing that decides the pins has changed
    listed_before = stamp.get("paths")
    old = (
        {p for p in listed_before if isinstance(p, str)}
        if isinstance(listed_before, list)
        else set()
    )
    if fresh or stamp.get("patterns") != key:
        exclude = os.path.join(base, _EXCLUDE)
        write_if_changed(exclude, text.encode("utf-8", "surrogateescape"))
        listed = run_git(
            ["ls-files", "-z", "--cached", "--ignored", f"--exclude-from={exclude}"],
            cwd=repo.workdir,
            env=env,
        ).stdout
        secret = set(_paths(listed))
        _unpin(repo, env, old - secret)
        kept = _set_to_head(repo, env, head_tree, secret)
    else:  # HEAD moved: only the paths that changed between the two HEAD trees can differ
        before = stamp.get("head")
        changed = repo.diff_trees(
            before if isinstance(before, str) else EMPTY_TREE, head_tree or EMPTY_TREE
        )
        secret = {c.path for c in changed if match_excluded(secret_paths, c.path)}
        kept = (old - secret) | _set_to_head(repo, env, head_tree, secret)
    doc = {"v": 1, "patterns": key, "head": head_tree, "paths": sorted(kept)}
    write_if_changed(os.path.join(base, _STAMP), json.dumps(doc, sort_keys=True).encode())


def _set_to_head(
    repo: GitRepo, env: Mapping[str, str], head_tree: str | None, paths: Iterable[str]
) -> set[str]:
    """Give each path HEAD's entry, skip-worktree; remove those HEAD lacks. The pinned."""
    pin: dict[str, tuple[str, int]] = {}
    drop: list[str] = []
    for path in sorted(paths):
        entry = repo.tree_entry(head_tree, path) if head_tree else None
        if entry is not None and entry[1] != _TREE:
            pin[path] = entry
        else:
            drop.append(path)
    if drop:
        run_git(
            ["update-index", "--force-remove", "-z", "--stdin"],
            cwd=repo.workdir,
            env=env,
            input=_z(drop),
        )
    if pin:
        info = b"".join(
            b"%o %s\t%s\0" % (mode, oid.encode(), os.fsencode(p)) for p, (oid, mode) in pin.items()
        )
        run_git(["update-index", "-z", "--index-info"], cwd=repo.workdir, env=env, input=info)
        run_git(
            ["update-index", "--skip-worktree", "-z", "--stdin"],
            cwd=repo.workdir,
            env=env,
            input=_z(pin),
        )
    return set(pin)


def _unpin(repo: GitRepo, env: Mapping[str, str], paths: set[str]) -> None:
    """Paths no longer secret: let `add` read them again (those still in the index)."""
    if not paths:
        return
    listed = run_git(
        ["ls-files", "-z", "-v", "--", *(f":(literal){p}" for p in sorted(paths))],
        cwd=repo.workdir,
        env=env,
    ).stdout
    present = [rec[2:] for rec in listed.split(b"\0") if rec[:2] == b"S "]
    if present:
        run_git(
            ["update-index", "--no-skip-worktree", "-z", "--stdin"],
            cwd=repo.workdir,
            env=env,
            input=b"".join(p + b"\0" for p in present),
        )


@functools.lru_cache(maxsize=8)
def may_be_secret(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """A first test, true for every path `match_excluded(patterns, path)` accepts (and
    more: negations are ignored). A path matching a pattern has a component matching the
    pattern's first segment (`.env`, `*.pem`, `id_rsa*`, `.aws` of `**/.aws/credentials`):
    components are looked up in a set or by their ends, ~1 µs a path."""
    names: set[str] = set()
    ends: list[str] = []
    starts: list[str] = []
    regexes: list[str] = []
    for p in patterns:
        segs = [x for x in p.strip("/").split("/") if x != "**"]
        if p.startswith("!") or not segs:
            continue
        seg = segs[0]
        stars = seg.count("*")
        if any(c in seg for c in "?[\\") or stars > 1:
            regexes.append(compile_glob(seg).pattern.removeprefix("(?:[^/]+/)*"))
        elif not stars:
            names.add(seg)
        elif seg.startswith("*"):
            ends.append(seg[1:])
        else:  # `id_rsa.*`, `service-account*.json`: the start is enough for a first test
            starts.append(seg.partition("*")[0])
    component = re.compile("|".join(regexes)) if regexes else None
    end_t, start_t = tuple(ends), tuple(starts)

    def test(path: str) -> bool:
        for c in path.split("/"):
            if c in names or c.endswith(end_t) or c.startswith(start_t):
                return True
            if component is not None and component.fullmatch(c):
                return True
        return False

    return test


def catch_added(
    repo: GitRepo,
    base: str,
    env: Mapping[str, str],
    secret_paths: Sequence[str],
    added: Sequence[str],
) -> set[str]:
    """Take back out of the private index every path `add` just added that matches
    `secret_paths` (a `.gitignore` re-included it): HEAD's blob, or nothing. Returns them."""
    quick = may_be_secret(tuple(secret_paths))
    hits = {p for p in added if quick(p) and match_excluded(secret_paths, p)}
    if not hits:
        return hits
    head = repo.head()
    kept = _set_to_head(repo, env, repo.read_commit(head).tree if head else None, hits)
    stamp = _load(base)
    before = stamp.get("paths")
    if kept and isinstance(before, list):
        stamp["paths"] = sorted({*(p for p in before if isinstance(p, str)), *kept})
        write_if_changed(os.path.join(base, _STAMP), json.dumps(stamp, sort_keys=True).encode())
    return hits
