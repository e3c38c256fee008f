"""The daemon's read-ahead of the worktree's cache files, plugged in at start
(`daemon/server.STARTUP_HOOKS`, after the watcher).

After each call (and once at start), between calls, the files of
`.git/agent/state/` that changed are read into the memos each forked child starts
with (`store/warm_caches.py`): a resume or a `tick` deep into a long task no longer
parses its whole key-event index and checkpoint chain. A child trusts them no more
than the files: their tips are compared with the refs. A child that appended events
brings its task's cache files to the new tips after its answer (`after_append`), so
the next call finds them current.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from git_agentckpt.store import events
from git_agentckpt.store.warm_caches import WarmCaches, after_append

if TYPE_CHECKING:
    from git_agentckpt.daemon.server import Daemon


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
    if after_append not in events.APPEND_HOOKS:  # each child brings its tasks' files to tip
        events.APPEND_HOOKS.append(after_append)
    daemon.status_hooks["caches"] = warm.status
