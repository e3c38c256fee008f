"""The daemon's work-tree watcher, plugged in at start (`server.STARTUP_HOOKS`).

The watcher (`git/watcher.py`) sees every change under the work tree; each child
the daemon forks inherits what it saw, so a checkpoint made through the daemon
runs git only on the changed paths (`git/incremental.py`). Its first walk runs in
slices between calls (`add_idle`); until it is done, snapshots scan in full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from git_agentckpt import api
from git_agentckpt.cli import daemon_find, daemon_spare

if TYPE_CHECKING:
    from git_agentckpt.cli.server import Daemon


def attach(daemon: Daemon) -> None:
    live = api.watch_work_tree(daemon.worktree, daemon_find.agent_dir(daemon.git_dir))
    if live is None:
        return
    if live.fileno() >= 0:  # -1: it turned itself off (its status says why)
        daemon.add_reader(live.fileno(), live.on_readable)
        daemon.add_idle(live.step)
    daemon.before_fork.append(live.before_fork)
    daemon.spares.syncs["watcher"] = daemon_spare.Sync(
        lambda: live.seq, live.changes_after, live.catch_up
    )
    daemon.at_exit.append(live.close)
    daemon.status_hooks["watcher"] = live.status
