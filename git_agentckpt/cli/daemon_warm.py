"""The daemon's read-ahead of the worktree's cache files, plugged in at start
(`server.STARTUP_HOOKS`, after the watcher).

After each call (and once at start), between calls, the files of
`.git/agent/state/` that changed are read into the memos each forked child starts
with (`store/warm_caches.py`): a resume or a `tick` deep into a long task no longer
parses its whole key-event index and checkpoint chain. A child trusts them no more
than the files: their tips are compared with the refs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from git_agentckpt.store.warm_caches import WarmCaches

if TYPE_CHECKING:
    from git_agentckpt.cli.server import Daemon


def attach(daemon: Daemon) -> None:
    warm = WarmCaches(daemon.git_dir)

    def refresh() -> bool:
        warm.refresh()
        return False  # one slice: run again after the next call

    def after_call() -> None:
        if refresh not in daemon.idle_tasks:
            daemon.add_idle(refresh)

    daemon.add_idle(refresh)
    daemon.after_call.append(after_call)
    daemon.status_hooks["caches"] = warm.status
