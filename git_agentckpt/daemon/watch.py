"""The daemon's work-tree watcher, plugged in at start (`daemon/server.STARTUP_HOOKS`).

The watcher (`daemon/watcher.py`) sees every change under the work tree. A child
never trusts the copy of it the fork gave: it asks the daemon through the barrier
(`daemon/barrier.py`), which this plug-in answers (`view` requests), so a checkpoint
made through the daemon runs git only on the paths changed since the last one
(`git/incremental.py`). Its first walk runs in slices between calls (`add_idle`);
until it is done, snapshots scan in full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from git_agentckpt.daemon import watcher
from git_agentckpt.daemon.barrier import Barrier, encode_view
from git_agentckpt.daemon.find import agent_dir
from git_agentckpt.git import watch_view

if TYPE_CHECKING:
    from git_agentckpt.daemon.server import Daemon


def attach(daemon: Daemon) -> None:
    live = watcher.start(daemon.worktree, agent_dir(daemon.git_dir))
    if live is None:
        return
    if live.fileno() >= 0:  # -1: it turned itself off (its status says why)
        daemon.add_reader(live.fileno(), live.on_readable)
        daemon.add_idle(live.step)

    def view(fields: list[str]) -> tuple[bytes, bytes]:
        cookie = fields[0] if fields else ""
        if not cookie or "/" in cookie or cookie.startswith("."):
            return b"R", b"malformed view request"
        return b"V", encode_view(live.answer(cookie))

    def in_child() -> None:
        live.close()  # the child never reads the daemon's inotify queue: it asks
        watch_view.activate(Barrier(daemon.worktree, daemon.git_dir))

    daemon.services["view"] = view
    daemon.in_child.append(in_child)
    daemon.at_exit.append(live.close)
    daemon.status_hooks["watcher"] = live.status
