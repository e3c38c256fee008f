"""Work that may wait until the caller has its answer (calls served by the daemon).

A call the daemon serves answers its client as soon as the command returns
(`cli/daemon_child.report_exit`). Tidying that nothing in the answer depends on
(packing a checkpoint's loose objects, `git/packing.py`) is queued with `later`
and then runs in a grandchild of its own session, as `git gc --auto` detaches:
the caller, and its next call, never wait for it. Anywhere else (a process of
its own, the Python API) `later` runs the work at once.

The queued work must be crash-safe on its own (packing is: a pack is renamed
into place before any loose copy goes) and must not need the caller's files:
the grandchild has /dev/null for its standard streams.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

Work = Callable[[], object]
_queue: list[Work] | None = None


def defer_in_this_process() -> None:
    """From now on `later` queues (a daemon child, before it runs the command)."""
    global _queue
    _queue = []


def later(work: Work) -> None:
    """Run `work` after the answer when this process defers, else now. Its errors are
    its own: they never reach the command."""
    if _queue is None:
        with contextlib.suppress(Exception):
            work()
    else:
        _queue.append(work)


def run_queued() -> int:
    """Run what was queued, here and now (how many); the queue empties."""
    global _queue
    queued, _queue = (_queue or []), ([] if _queue is not None else None)
    for work in queued:
        with contextlib.suppress(Exception):
            work()
    return len(queued)


def run_detached() -> None:
    """In a daemon child whose command returned, before it reports: what was queued, in a
    grandchild of its own session that keeps none of the caller's files (its pipes see
    their end when the child's end) and has /dev/null for stdin, stdout and stderr.
    Returns at once in the child. Forked before the report: once the caller has its
    answer and hangs up, the daemon may kill the child at any instant."""
    if not _queue:
        return
    try:
        pid = os.fork()
    except OSError:
        return  # no process to spare: the work waits for a later call
    if pid:
        return
    try:
        os.setsid()
        os.closerange(0, 1 << 20)
        null = os.open(os.devnull, os.O_RDWR)  # 0
        os.dup2(null, 1)
        os.dup2(null, 2)
        run_queued()
    finally:
        os._exit(0)
