"""Is a tree safe to write to disk? One check for every writer of a checkpoint's tree.

A checkpoint that arrives by fetch is someone else's input, and git stores
trees its own checkout would refuse (`hash-object --literally`, and `git
fetch` does not fsck by default). Before anything of a tree is written
(restore, resume's restore and rollback, exporting a tree), `check_tree`
reads every tree object of it, as stored, and refuses:

- malformed tree objects and unknown file modes;
- names that are empty, `.`, `..` or hold a `/` (a NUL ends a name);
- the same name twice in one directory (a symlink `s` beside a directory
  `s/` wrote through the link), and names that the file system under the
  destination takes for one another (case, and Unicode normalization) when
  it folds them: probed on the destination itself, so Linux repositories
  holding `xt_TCPMSS.c` beside `xt_tcpmss.c` stay restorable there;
- `.git` in any case at any depth, and the names NTFS or HFS+ take for it
  (`git~1`, `.git ` / `.git.`, `.git::$INDEX_ALLOCATION`, `.g\\u200cit`), as
  `git fsck` does on every platform; `.gitmodules` (and its aliases) as a
  symbolic link, which fsck refuses too;
- symbolic links with an empty target, a NUL, an absolute target, or a
  target that leads outside the destination, resolved from the link's own
  directory and through the other links of the same tree, as the kernel
  would.

Tree ids are immutable, so a subtree met twice (in one tree, or in the trees
of an earlier check in this process) is read once. `SafeWriter`
(`git/safe_write.py`) then writes without following any symbolic link, so a
link that appears on disk after this check is never followed either.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from git_agentckpt.errors import CorruptError, NotFound
from git_agentckpt.git.repo import GitRepo

TREE, LINK, GITLINK = 0o040000, 0o120000, 0o160000
_MAX_LINK_HOPS = 40  # the kernel's limit (Linux MAXSYMLINKS)
_MEMO_LIMIT = 500_000  # tree ids remembered per process before the memo starts over

HINT = (
    "the checkpoint was crafted or damaged (did it arrive by fetch?): do not restore it, "
    "and find out where it came from"
)

# code points HFS+ ignores in names (git's `is_hfs_dotgit` list)
_HFS_IGNORED: dict[int, None] = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


@dataclass(frozen=True)
class _Rules:
    fold: Callable[[bytes], object] | None  # the file system's name folding, None: exact names
    entry: re.Pattern[bytes]  # one entry of a tree object
    whole: re.Pattern[bytes]  # a well-formed tree object


Links = tuple[tuple[bytes, bytes], ...]  # (path relative to a tree, link target) under it

# (common git dir, folding) -> {tree id checked: the symbolic links under that tree}
_memo: dict[tuple[str, bool], dict[str, Links]] = {}


def check_tree(repo: GitRepo, tree_id: str, dest: str, label: str) -> None:
    """Refuse (CorruptError, exit 6) a tree that is not safe to write under `dest`.

    `label` names the checkpoint in the error. Reads every tree object of the
    tree once per process, and the blob of every symbolic link.
    """
    folds = folds_case(dest)
    rules = _Rules(_folder(folds), *_patterns(len(tree_id) // 2))
    memo = _memo.setdefault((repo.common_dir, folds), {})
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    try:
        links = _walk(repo, tree_id, rules, memo)
        _check_links(links, rules.fold)
    except _Bad as bad:
        message = f"refusing checkpoint {label}: {bad.where!r} {bad.reason}"
        raise CorruptError(message, hint=HINT) from None


class _Bad(Exception):
    def __init__(self, path: bytes, reason: str) -> None:
        super().__init__(reason)
        self.where = os.fsdecode(path)
        self.reason = reason


# -- the walk: every tree object once ---------------------------------------------------


def _walk(repo: GitRepo, root: str, rules: _Rules, memo: dict[str, Links]) -> Links:
    """The symbolic links of `root` (path, target), after checking every tree under it."""
    pending: dict[str, tuple[list[tuple[bytes, str]], list[tuple[bytes, bytes]]]] = {}
    stack: list[tuple[str, bytes]] = [(root, b"")]  # (tree id, path of its first occurrence)
    while stack:
        tid, path = stack[-1]
        if tid in memo:
            stack.pop()
            continue
        seen = pending.get(tid)
        if seen is None:
            subtrees, links = _read_tree(repo, tid, path, rules)
            pending[tid] = (subtrees, links)
            stack.extend((sid, path + name + b"/") for name, sid in subtrees if sid not in memo)
            continue
        stack.pop()  # every subtree of it is done (none of them can hold `tid` again)
        subtrees, links = pending.pop(tid)
        for name, sid in subtrees:
            links.extend((name + b"/" + p, t) for p, t in memo[sid])
        memo[tid] = tuple(links)
    return memo[root]


def _patterns(id_len: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    entry = rb"([0-7]+) ([^\0]*)\0(.{%d})" % id_len
    whole = rb"(?:[0-7]+ [^\0]*\0.{%d})*" % id_len
    return re.compile(entry, re.DOTALL), re.compile(whole, re.DOTALL)


# the modes git writes, as stored; others are read by value (`040000`) or refused
_MODES = {b"100644": 0o100644, b"100755": 0o100755, b"100664": 0o100664}
_MODES |= {b"40000": TREE, b"120000": LINK, b"160000": GITLINK}
_CANONICAL = {mode: raw for raw, mode in _MODES.items()}
Entry = tuple[bytes, bytes, bytes]  # mode as stored, name, raw object id


def _read_tree(
    repo: GitRepo, tid: str, path: bytes, rules: _Rules
) -> tuple[list[tuple[bytes, str]], list[tuple[bytes, bytes]]]:
    """Check the entries of one tree object; its subtrees and its symbolic links."""
    where = path.rstrip(b"/") or b"(root)"
    try:
        data = repo.read_tree_raw(tid)
    except (CorruptError, NotFound) as exc:
        raise _Bad(where, f"cannot be read as a tree ({exc.message})") from None
    if not rules.whole.fullmatch(data):
        raise _Bad(where, f"is a malformed tree object ({tid})")
    found: list[Entry] = rules.entry.findall(data)
    if not {m for m, _, _ in found} <= _MODES.keys():
        found = [(_canonical_mode(m, path + n), n, i) for m, n, i in found]
    _check_names(found, path, rules)
    subtrees = [(n, i.hex()) for m, n, i in found if m == b"40000"]
    links = [(n, _link_target(repo, i.hex(), path + n)) for m, n, i in found if m == b"120000"]
    return subtrees, links


def _canonical_mode(raw: bytes, where: bytes) -> bytes:
    mode = int(raw, 8)
    if mode not in _CANONICAL:
        raise _Bad(where, f"has an unknown file mode {mode:o}")
    return _CANONICAL[mode]


def _check_names(found: list[Entry], path: bytes, rules: _Rules) -> None:
    names = [n for _, n, _ in found]
    keys = names if rules.fold is None else [rules.fold(n) for n in names]
    if len(set(keys)) != len(keys):
        seen: dict[object, bytes] = {}
        for name, key in zip(names, keys, strict=True):
            other = seen.get(key)
            if other is None:
                seen[key] = name
            elif other == name:
                raise _Bad(path + name, "appears twice in one directory")
            else:
                same = f"and {os.fsdecode(other)!r} are one name on this file system"
                raise _Bad(path + name, same)
    joined = b"\0".join(names)
    if b"/" in joined:
        name = next(n for n in names if b"/" in n)
        raise _Bad(path + name, "holds a '/'")
    if _suspect(joined):
        for mode, name, _ in found:
            if name[:1] in b".gG" or not name or not name.isascii():
                why = _bad_name(name, mode == b"120000")
                if why:
                    raise _Bad(path + name, why)


def _suspect(joined: bytes) -> bool:
    """Might a name (NUL-separated in `joined`) be empty or an alias of .git?"""
    if not joined.isascii():
        return True
    edged = b"\0" + joined + b"\0"
    return b"\0." in edged or b"\0g" in edged or b"\0G" in edged or b"\0\0" in edged


def _bad_name(name: bytes, is_link: bool) -> str | None:
    if name in (b"", b".", b".."):
        return "is not a file name (empty, '.' or '..')"
    if is_dotgit(name):
        return "is .git, or a name that a file system takes for .git"
    if is_link and is_dotgitmodules(name):
        return "is a symbolic link named .gitmodules (or a name taken for it)"
    return None


def _link_target(repo: GitRepo, blob: str, where: bytes) -> bytes:
    try:
        target = repo.read_blob(blob)
    except (CorruptError, NotFound) as exc:
        raise _Bad(
            where, f"is a symbolic link whose target cannot be read ({exc.message})"
        ) from None
    if not target or b"\0" in target:
        raise _Bad(where, "is a symbolic link with an empty or NUL-holding target")
    if target.startswith(b"/"):
        raise _Bad(where, f"is a symbolic link to an absolute path ({os.fsdecode(target)!r})")
    return target


# -- symbolic links: resolved as the kernel would ---------------------------------------


def _check_links(links: Links, fold: Callable[[bytes], object] | None) -> None:
    def key(parts: list[bytes]) -> tuple[object, ...]:
        return tuple(fold(p) for p in parts) if fold else tuple(parts)

    by_path = {key(p.split(b"/")): t for p, t in links}
    for path, target in links:
        if _escapes(path.split(b"/")[:-1], target, by_path, key):
            raise _Bad(path, f"is a symbolic link leading outside ({os.fsdecode(target)!r})")


def _escapes(
    where: list[bytes],
    target: bytes,
    links: dict[tuple[object, ...], bytes],
    key: Callable[[list[bytes]], tuple[object, ...]],
) -> bool:
    """Does `target`, read from directory `where`, climb out of the root?"""
    current = list(where)
    todo = target.split(b"/")[::-1]  # a stack: the next component last
    hops = 0
    while todo:
        part = todo.pop()
        if part in (b"", b"."):
            continue
        if part == b"..":
            if not current:
                return True
            current.pop()
            continue
        current.append(part)
        inner = links.get(key(current))
        if inner is None:
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS:
            return False  # a loop: the kernel gives up (ELOOP), nothing is reached
        if inner.startswith(b"/"):
            return True
        current.pop()
        todo.extend(inner.split(b"/")[::-1])
    return False


# -- names ---------------------------------------------------------------------------------


def _ntfs_tail(rest: bytes) -> bool:
    """NTFS drops trailing spaces and dots; a ':' starts a stream name, '\\' a path."""
    for c in rest:
        if c in b":\\/":
            return True
        if c not in b" .":
            return False
    return True


def _ntfs_short(name: bytes, prefix: bytes) -> bool:
    """An 8.3 short name that NTFS may give the long name: `gi7eba~1`, `gi7e~123`, ..."""
    head = name[:8]
    tilde = head.find(b"~")
    if len(head) < 8 or not 0 <= tilde <= 6 or head[:tilde].lower() != prefix[:tilde]:
        return False
    digits = head[tilde + 1 :]
    return digits.isdigit() and digits[:1] != b"0" and _ntfs_tail(name[8:])


def _hfs_is(name: bytes, dotname: str) -> bool:
    """HFS+ ignores some code points anywhere in a name, and folds case."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    text = text.translate(_HFS_IGNORED)
    return text.isascii() and text.lower() == dotname


def is_dotgit(name: bytes) -> bool:
    """`.git`, or a name NTFS or HFS+ takes for it (git's is_ntfs_dotgit, is_hfs_dotgit)."""
    low = name.lower()
    if low.startswith(b".git") and _ntfs_tail(low[4:]):
        return True
    if low.startswith(b"git~1") and _ntfs_tail(low[5:]):
        return True
    return _hfs_is(name, ".git")


def is_dotgitmodules(name: bytes) -> bool:
    low = name.lower()
    if low.startswith(b".gitmodules") and _ntfs_tail(low[11:]):
        return True
    if low.startswith(b"gitmod~") and low[7:8] in (b"1", b"2", b"3", b"4") and _ntfs_tail(low[8:]):
        return True
    return _ntfs_short(name, b"gi7eba") or _hfs_is(name, ".gitmodules")


# -- the destination's file system ------------------------------------------------------


def _folder(folds_case: bool) -> Callable[[bytes], object] | None:
    if folds_case:
        return _fold_case
    if sys.platform == "darwin":  # APFS and HFS+ fold Unicode normalization, whatever the case
        return _fold_form
    return None


def _fold_form(name: bytes) -> object:
    text = os.fsdecode(name)
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _fold_case(name: bytes) -> object:
    text = os.fsdecode(name)
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", text).lower()


def folds_case(directory: str) -> bool:
    """Does the file system under `directory` take `A` and `a` for one name?

    Probed on the directory itself, from a name it holds (a work tree holds
    `.git`); an empty directory gets a probe file of our own, removed at once.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    present = set(names)
    for name in names:
        other = name.swapcase()
        if other == name:
            continue
        if other in present:
            return False  # both spellings are there, as two entries
        try:
            a = os.lstat(os.path.join(directory, name))
            b = os.lstat(os.path.join(directory, other))
        except FileNotFoundError:
            return False
        except OSError:
            continue
        return os.path.samestat(a, b)
    try:
        fd, probe = tempfile.mkstemp(prefix=".ckpt-case-probe-", dir=directory)
    except OSError:
        return False
    try:
        os.close(fd)
        twin = os.path.join(directory, os.path.basename(probe).upper())
        try:
            return stat.S_ISREG(os.lstat(twin).st_mode)
        except OSError:
            return False
    finally:
        os.unlink(probe)
