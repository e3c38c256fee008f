"""The watcher's view in a daemon child, asked for through a cookie barrier.

A child forked by the daemon holds a copy of the daemon's memory as it was at the
fork: its picture of the work tree is old as soon as anything changes, and the
child's own writes (a restore, a rollback) are never in it. So a child never reads
that copy. Each time a snapshot needs the view (`git/incremental.py`), `Barrier.view`
creates a cookie file in `<git dir>/agent/cookies/` and asks the daemon, on its
socket, for the view as of that cookie; the daemon answers once it has read the
cookie's event (`daemon/watcher.py`, `TreeWatcher.answer`), so the answer holds every
change made before the question. This is how git's `fsmonitor--daemon` makes its
answers exact. No answer, a late one, or one the daemon cannot vouch for gives
`None`: the snapshot scans the whole tree, as without a daemon.
"""

from __future__ import annotations

import itertools
import json
import os

from git_agentckpt.daemon import client
from git_agentckpt.daemon.find import PROTOCOL, agent_dir, timeout_seconds
from git_agentckpt.daemon.watcher import COOKIES, TreeWatcher
from git_agentckpt.git.watch_view import WatchView, log_line

_counter = itertools.count()


def make_cookie(agent: str) -> str | None:
    """Create a new cookie file in `agent`'s cookie directory: its name (None: cannot)."""
    cookie = f"{os.getpid()}-{next(_counter)}"
    try:
        path = os.path.join(agent, COOKIES, cookie)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        log_line(agent, f"full scan: cannot write a cookie ({exc})")
        return None
    return cookie


class Barrier:
    """The view source of a daemon child (`watch_view.activate`)."""

    def __init__(self, workdir: str, git_dir: str) -> None:
        self.workdir = workdir
        self.git_dir = git_dir

    def view(self) -> WatchView | None:
        cookie = make_cookie(agent_dir(self.git_dir))
        if cookie is None:
            return None
        timeout = timeout_seconds(os.environ)  # then a full scan
        reply = client.ask(self.git_dir, ["view", PROTOCOL, "*", cookie], timeout)
        if reply is None or reply[0] != "V":
            log_line(agent_dir(self.git_dir), "full scan: the daemon did not answer the barrier")
            return None
        return parse_view(reply[1])


class InProcess:
    """The view source of a process that runs the watcher itself (tests, benchmarks):
    the same cookie barrier, answered here."""

    def __init__(self, watcher: TreeWatcher) -> None:
        self.watcher = watcher
        self.workdir = watcher.workdir

    def view(self) -> WatchView | None:
        cookie = make_cookie(self.watcher.agent_dir)
        return None if cookie is None else self.watcher.answer(cookie)


def parse_view(body: bytes) -> WatchView | None:
    """The daemon's answer (`encode_view`); None for no view, or anything malformed."""
    try:
        doc = json.loads(body)
        if doc is None:
            return None
        changed = {str(p): int(at) for p, at in doc["changed"].items()}
        nested = frozenset(str(p) for p in doc["nested"])
        return WatchView(
            str(doc["watcher"]), int(doc["seq"]), int(doc["full_before"]), changed, nested
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def encode_view(view: WatchView | None) -> bytes:
    if view is None:
        return b"null"
    doc = {
        "watcher": view.watcher_id,
        "seq": view.seq,
        "full_before": view.full_before,
        "changed": view.changed,
        "nested": sorted(view.nested),
    }
    return json.dumps(doc, separators=(",", ":")).encode()
