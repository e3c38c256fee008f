"""Blobs read in pieces: the sha256 and size of a blob, or its bytes copied to a file,
without ever holding a large blob whole in memory (`git ckpt export`).

A blob up to `WHOLE` bytes is read through libgit2 at once (the common case, ~10 µs);
a larger one is streamed from `git cat-file blob` in 1 MiB pieces. Its size is read
from the object header first, so the choice costs no read of the content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import pygit2

from git_agentckpt.errors import CorruptError, NotFound, OperationFailed
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import error_lines, popen_git

WHOLE = 8 << 20
PIECE = 1 << 20


def blob_size(repo: GitRepo, oid: str) -> int:
    """The size of blob `oid`, from its header (the content is not read)."""
    try:
        kind, size = repo._repo.odb.read_header(oid)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise NotFound(f"object {oid} is not in the repository") from exc
    if kind != pygit2.enums.ObjectType.BLOB:
        raise CorruptError(f"object {oid} is not a blob")
    return int(size)


def blob_pieces(repo: GitRepo, oid: str) -> Iterator[bytes]:
    """The bytes of blob `oid`, in pieces of at most `PIECE` bytes beyond `WHOLE`."""
    size = blob_size(repo, oid)
    if size <= WHOLE:
        yield repo.read_blob(oid)
        return
    yield from _streamed(repo, oid, size)


def _streamed(repo: GitRepo, oid: str, size: int) -> Iterator[bytes]:
    proc = popen_git(["cat-file", "blob", oid], repo.workdir)
    assert proc.stdout is not None and proc.stderr is not None
    got = 0
    try:
        while piece := proc.stdout.read(PIECE):
            got += len(piece)
            yield piece
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.stderr.read()
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    if code != 0 or got != size:
        msg = error_lines(stderr)
        raise OperationFailed(
            f"git cat-file blob {oid[:12]} failed: {msg[-1] if msg else f'{got} of {size} bytes'}"
        )


def blob_digest(
    repo: GitRepo, oid: str, sink: Callable[[bytes], object] | None = None
) -> tuple[str, int]:
    """(sha256 hex, size) of blob `oid`; each piece is also given to `sink` when set."""
    h = hashlib.sha256()
    size = 0
    for piece in blob_pieces(repo, oid):
        h.update(piece)
        size += len(piece)
        if sink is not None:
            sink(piece)
    return h.hexdigest(), size
