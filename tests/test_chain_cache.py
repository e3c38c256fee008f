"""The checkpoint chain kept per tip (store/chain_cache.py): equal to a walk of the refs
whatever happened to them, and a resume with a long history walks only what is new."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import git
from helpers import ckpt, write

from git_agentckpt.api import Checkpointer
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store import chain_cache
from git_agentckpt.store.chain_cache import _path, cached_chain, last_full
from git_agentckpt.store.refs import TaskName

T = TaskName("t")


@contextmanager
def reads() -> Iterator[list[str]]:
    """The commits read one by one while inside (real git; only counted)."""
    seen: list[str] = []
    real = GitRepo.read_commit

    def counting(self: GitRepo, commit: str) -> Any:
        seen.append(commit)
        return real(self, commit)

    GitRepo.read_commit = counting  # type: ignore[method-assign,assignment]
    try:
        yield seen
    finally:
        GitRepo.read_commit = real  # type: ignore[method-assign]


def walk(repo: Path) -> list[str]:
    ck = Checkpointer.open(str(repo))
    return [c.commit for c in ck.store.chain(T)]


def cached(repo: Path) -> list[str]:
    ck = Checkpointer.open(str(repo))
    return [c.commit for c in cached_chain(ck.store, T)]


def test_the_cache_follows_the_ref(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    for i in range(5):
        write(repo / f"f{i}.txt", f"{i}\n")
        ckpt(repo, "create", "-t", "t", "--light")
    assert cached(repo) == walk(repo)
    with reads() as seen:
        assert cached(repo) == walk(repo)[:6]
    assert len(seen) <= len(walk(repo)) + 1  # the hit read no checkpoint; the walk did
    ckpt(repo, "create", "-t", "t", "--light")
    with reads() as seen:
        ours = cached(repo)
    assert ours == walk(repo)
    assert len(seen) <= 3  # the new tip and the cached one: not the whole chain
    # the ref moved back (a rollback, or someone's update-ref): walked again
    older = walk(repo)[3]
    git(repo, "update-ref", T.checkpoints_ref, older)
    assert cached(repo) == walk(repo) == walk(repo)[:]
    assert cached(repo)[0] == older


def test_a_damaged_or_foreign_cache_is_never_used(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    ckpt(repo, "create", "-t", "t", "--light")
    assert cached(repo) == walk(repo)
    ck = Checkpointer.open(str(repo))
    path = Path(_path(ck.store, T))
    path.write_text("garbage\n")
    chain_cache._memo.clear()  # as a new process reads it: from the file
    assert cached(repo) == walk(repo)
    ckpt(repo, "task", "start", "u", "--goal", "g")
    other = Path(_path(ck.store, TaskName("u")))
    cached_u = [c.commit for c in cached_chain(ck.store, TaskName("u"))]
    assert cached_u
    path.write_bytes(other.read_bytes())  # another task's chain, sealed and whole
    chain_cache._memo.clear()
    assert cached(repo) == walk(repo)


def test_resume_with_a_long_history_reads_only_what_is_new(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    for _ in range(40):
        ckpt(repo, "create", "-t", "t", "--light")
    ckpt(repo, "resume", "t", "--json")
    with reads() as seen:
        ckpt(repo, "resume", "t", "--json")
    chain = set(walk(repo))
    assert len(chain) > 40
    assert len(chain & set(seen)) < 15, len(chain & set(seen))


def _full(repo: Path) -> str | None:
    ck = Checkpointer.open(str(repo))
    found = last_full(ck.store, T)
    return None if found is None else found.commit


def _walked_full(repo: Path) -> str | None:
    ck = Checkpointer.open(str(repo))
    return next((c.commit for c in ck.store.chain(T) if c.kind == "full"), None)


def test_the_last_full_checkpoint_is_kept_per_tip(repo: Path) -> None:
    """`tick` asks for the newest full checkpoint at every call: after many light ones it
    reads only the checkpoints made since it last asked, and it follows the ref back."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    write(repo / "a.txt", "a\n")
    ckpt(repo, "create", "-t", "t", "-m", "full one")
    full_one = _walked_full(repo)
    for i in range(6):
        write(repo / f"f{i}.txt", f"{i}\n")
        ckpt(repo, "create", "-t", "t", "--light")
    assert _full(repo) == full_one
    ckpt(repo, "create", "-t", "t", "--light")
    with reads() as seen:
        assert _full(repo) == full_one
    assert len(set(seen)) <= 2  # the new tip and the cached one, not the light ones before
    write(repo / "b.txt", "b\n")
    ckpt(repo, "create", "-t", "t", "-m", "full two")
    assert _full(repo) == _walked_full(repo) != full_one
    git(repo, "update-ref", "refs/agent/checkpoints/t", walk(repo)[3])  # moved back
    assert _full(repo) == _walked_full(repo) == full_one
    path = Path(_path(Checkpointer.open(str(repo)).store, T)).with_suffix(".full")
    path.write_text('{"tip": "0000", "fields": [], "full": 7}')  # damaged
    assert _full(repo) == full_one


def test_a_grown_chain_is_written_as_a_fresh_walk_writes_it(repo: Path) -> None:
    """New checkpoints go in front of the stored rows' text: the file is byte for byte
    the one a walk of the whole chain writes."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    for i in range(3):
        write(repo / f"f{i}.txt", f"{i}\n")
        ckpt(repo, "create", "-t", "t", "--light")
        assert cached(repo) == walk(repo)
    path = Path(_path(Checkpointer.open(str(repo)).store, T))
    grown = path.read_bytes()
    path.unlink()
    chain_cache._memo.clear()  # as a new process reads it: from the file
    assert cached(repo) == walk(repo)
    assert path.read_bytes() == grown
