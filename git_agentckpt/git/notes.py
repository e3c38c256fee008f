"""Git notes with a 2-hex-digit fan-out, written by compare-and-swap.

`git notes add` does not compare-and-swap (concurrent writers lose notes) and
libgit2 never fans out a notes tree (each write rewrites one huge flat tree).
Here every write touches the top tree and one of 256 buckets, and the notes ref
moves from the exact commit the write was based on.
"""

from __future__ import annotations

from collections.abc import Mapping

from pygit2.enums import FileMode

from git_agentckpt.git.repo import EMPTY_TREE, GitRepo

_TREE = int(FileMode.TREE)
_BLOB = int(FileMode.BLOB)


def _top_tree(repo: GitRepo, tip: str | None) -> str:
    return repo.read_commit(tip).tree if tip else EMPTY_TREE


def read_note(repo: GitRepo, notes_ref: str, target: str) -> bytes | None:
    tip = repo.read_ref(notes_ref)
    if tip is None:
        return None
    return read_note_at(repo, _top_tree(repo, tip), target)


def read_note_at(repo: GitRepo, top: str, target: str) -> bytes | None:
    """Find the note for `target` in a notes tree of any fan-out depth."""
    blob = note_id_at(repo, top, target)
    return None if blob is None else repo.read_blob(blob)


def note_id(repo: GitRepo, notes_ref: str, target: str) -> str | None:
    """The blob id of the note on `target` (None: no note), without reading the note."""
    tip = repo.read_ref(notes_ref)
    if tip is None:
        return None
    return note_id_at(repo, _top_tree(repo, tip), target)


def note_id_at(repo: GitRepo, top: str, target: str) -> str | None:
    """The blob id of `target`'s note in a notes tree of any fan-out depth: one entry
    looked up per level (a top tree has up to 256 buckets)."""
    tree = top
    rest = target
    while True:
        hit = repo.tree_entry(tree, rest)
        if hit is not None and hit[1] != _TREE:
            return hit[0]
        sub = repo.tree_entry(tree, rest[:2]) if len(rest) > 2 else None
        if sub is None or sub[1] != _TREE:
            return None
        tree, rest = sub[0], rest[2:]


def _apply(repo: GitRepo, top: str, notes: Mapping[str, bytes | None]) -> str:
    # only the entries we touch are looked up: the top tree has up to 256 buckets
    changes: dict[str, tuple[str, int]] = {}
    buckets: dict[str, dict[str, tuple[str, int]]] = {}
    for target, data in notes.items():
        bucket, rest = target[:2], target[2:]
        if repo.tree_entry(top, target) is not None:  # a flat note (`git notes add`): move it
            changes[target] = ("", 0)
        edits = buckets.setdefault(bucket, {})
        edits[rest] = (repo.write_blob(data), _BLOB) if data is not None else ("", 0)
    for bucket, edits in buckets.items():
        current = repo.tree_entry(top, bucket)
        base = current[0] if current and current[1] == _TREE else None
        sub = repo.write_tree(edits, base=base)
        changes[bucket] = ("", 0) if sub == EMPTY_TREE else (sub, _TREE)
    return repo.write_tree(changes, base=top)


def notes_commit(
    repo: GitRepo, old: str | None, notes: Mapping[str, bytes | None], message: str
) -> str:
    """The notes commit on `old` (the notes ref's tip; None: none yet) that sets (bytes) or
    removes (None) the notes of several targets; `old` itself when nothing changes."""
    top = _top_tree(repo, old)
    new_top = _apply(repo, top, notes)
    if new_top == top and old is not None:
        return old
    return repo.commit(new_top, [old] if old else [], message)


def write_notes(
    repo: GitRepo, notes_ref: str, notes: Mapping[str, bytes | None], message: str
) -> str:
    """Set (bytes) or remove (None) the notes of several targets in one notes commit."""
    return repo.update_ref(notes_ref, message, lambda old: notes_commit(repo, old, notes, message))
