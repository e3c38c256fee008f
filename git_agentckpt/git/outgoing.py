"""The objects a push is about to send, read through real git (the pre-push scan).

`objects_to_send` lists the commits, trees, blobs and tags reachable from the pushed
tips and not from what the remote is known to have (`git rev-list --objects TIPS --not
…`), with type, size and, for trees and blobs, the first path git saw them at.
`read_objects` streams the contents of some of them through one `git cat-file --batch`,
in chunks, so a large blob is never held whole.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from git_agentckpt.errors import OperationFailed, RepositoryError
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.git.run import env_for, error_lines, run_git

CHUNK = 1 << 20


@dataclass(frozen=True)
class OutObject:
    id: str
    type: str  # commit | tree | blob | tag
    size: int
    path: str  # where a tree or blob was first seen ("" for commits and tags)


def objects_to_send(repo: GitRepo, tips: Sequence[str], exclude: Sequence[str]) -> list[OutObject]:
    """Objects reachable from `tips` and not from `exclude` (revisions, or `--glob=…`,
    `--remotes=…` options), in `git rev-list --objects` order."""
    if not tips:
        return []
    listed = run_git(
        ["rev-list", "--objects", *tips, "--not", *exclude, "--"], cwd=repo.workdir
    ).stdout
    if not listed.strip():
        return []
    fmt = "--batch-check=%(objectname) %(objecttype) %(objectsize) %(rest)"
    checked = run_git(["cat-file", fmt], cwd=repo.workdir, input=listed).stdout
    out = []
    for line in checked.decode("utf-8", "replace").splitlines():
        oid, kind, size, *rest = line.split(" ", 3)
        out.append(OutObject(oid, kind, int(size), rest[0] if rest else ""))
    return out


def read_objects(repo: GitRepo, ids: Sequence[str]) -> Iterator[tuple[str, Iterator[bytes]]]:
    """(id, its content in chunks of at most CHUNK bytes) for each of `ids`, in order.
    A caller may stop reading an object's chunks early: the rest is skipped."""
    if not ids:
        return
    try:
        proc = subprocess.Popen(
            ["git", "cat-file", "--batch=%(objectname) %(objectsize)"],
            cwd=repo.workdir,
            env=env_for(repo.workdir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise RepositoryError("git is not installed or not on PATH", hint="install git") from exc
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin = proc.stdin

    def feed() -> None:  # in a thread: git's output pipe would fill while we write
        try:
            stdin.write("".join(i + "\n" for i in ids).encode())
        except BrokenPipeError:
            pass
        finally:
            stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for _ in ids:
            header = proc.stdout.readline().decode("ascii", "replace").split()
            if len(header) != 2:
                raise OperationFailed(
                    f"git cat-file --batch failed: {' '.join(header) or 'no output'}"
                )
            left = [int(header[1])]
            yield header[0], _chunks(proc.stdout, left)
            while left[0] > 0:  # what the caller did not read
                left[0] -= len(proc.stdout.read(min(CHUNK, left[0])) or b"x" * left[0])
            proc.stdout.read(1)  # the newline after the content
    finally:
        if proc.poll() is None:
            proc.kill()
        writer.join()
        stderr = proc.stderr.read()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        if proc.returncode not in (0, -9) and stderr:
            msg = error_lines(stderr)
            raise OperationFailed(f"git cat-file failed: {msg[-1] if msg else proc.returncode}")


def _chunks(stream: IO[bytes], left: list[int]) -> Iterator[bytes]:
    while left[0] > 0:
        data = stream.read(min(CHUNK, left[0]))
        if not data:
            raise OperationFailed("git cat-file --batch ended in the middle of an object")
        left[0] -= len(data)
        yield data
