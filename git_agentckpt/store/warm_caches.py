"""A worktree's cache files read ahead into this process's memos: the daemon, between calls.

The key-event index (`log_index.py`, `.idx`) and the checkpoint chain
(`chain_cache.py`, `.chain`) of a task hold every key event and every checkpoint
of its history: a resume 100 resumes into a task parses ~250 KB of them, ~6 ms,
and so does each `tick`. Each call the daemon serves runs in a child forked from it
(`cli/server.py`), so what the daemon holds in memory each child starts with. After
each call, between calls, `WarmCaches.refresh` reads the files that changed since
it last looked into the same in-process memos a long-lived process keeps; a child
then reads none of them, or only extends one by the commits since.

Nothing read here is trusted more than the file itself would be: a file is taken
only when it reads back whole (its digest) and holds the task its name is made
from, and whoever uses a memo compares its tip with the ref first, as for the file
(a memo of a tip the refs have moved past is extended or rebuilt). Reading happens
only when a file's inode, size or modification time changed; at most `MEMO_FILES`
files are held, the most recently written first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from git_agentckpt import after_reply
from git_agentckpt.git.repo import GitRepo
from git_agentckpt.store import chain_cache, log_index
from git_agentckpt.store.checkpoints import CheckpointStore
from git_agentckpt.store.events import EventLog
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.state import read_task
from git_agentckpt.store.state_cache import MEMO_FILES, StateCache

LOADERS: dict[str, Callable[[str], bool]] = {
    ".idx": log_index.preload,
    ".chain": chain_cache.preload,
}

Stamp = tuple[int, int, int]  # inode, size, modification time (ns)


@dataclass
class WarmCaches:
    """The cache files of one worktree (its git dir's `agent/state/`) kept read."""

    git_dir: str
    seen: dict[str, Stamp] = field(default_factory=dict)  # the stamp each file was read at
    reads: int = 0  # files read (whole or not)
    held: int = 0  # of those, read back whole and held

    @property
    def dir(self) -> str:
        return StateCache(self.git_dir).dir

    def refresh(self) -> int:
        """Read the files that changed since the last refresh; how many were read."""
        found = self._newest_files()
        read = 0
        for path, stamp in found:
            if self.seen.get(path) == stamp:
                continue
            self.seen[path] = stamp  # stamped before reading: a later change reads again
            read += 1
            if LOADERS[os.path.splitext(path)[1]](path):
                self.held += 1
        kept = {path for path, _ in found}
        self.seen = {p: s for p, s in self.seen.items() if p in kept}
        self.reads += read
        return read

    def _newest_files(self) -> list[tuple[str, Stamp]]:
        files: list[tuple[int, str, Stamp]] = []
        try:
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    if os.path.splitext(entry.name)[1] not in LOADERS:
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue  # not one of ours
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
                    files.append((st.st_mtime_ns, entry.path, stamp))
        except OSError:
            return []
        files.sort(reverse=True)
        return [(path, stamp) for _, path, stamp in files[:MEMO_FILES]]

    def status(self) -> dict[str, object]:
        return {"files": len(self.seen), "reads": self.reads, "held": self.held}


def after_append(repo: GitRepo, task: TaskName) -> None:
    """`events.APPEND_HOOKS`, in a daemon child: once the caller has its answer, bring
    the task's cache files to the tips the call left (`bring_to_tip`), so the daemon
    reads them before the next call and that call finds them current."""
    if not after_reply.deferring():
        return
    where = repo.workdir or repo.git_dir
    after_reply.later_once(("caches", repo.git_dir, task.name), lambda: bring_to_tip(where, task))


def bring_to_tip(where: str, task: TaskName) -> None:
    """Read the task's state, key-event index and checkpoint chain, as the next call
    will: each cache file then holds the refs' tips. Through a repository opened
    afresh (after the report, the call's own handle has none of its files open)."""
    repo = GitRepo.discover(where)
    log = EventLog(repo)
    store = CheckpointStore(repo, log)
    read_task(store, log, task)
    log_index.read_index(log, task)
    chain_cache.cached_chain(store, task)


__all__ = ["LOADERS", "WarmCaches", "after_append", "bring_to_tip"]
