"""Work that may wait until the caller has its answer (calls served by the daemon).

A call the daemon serves answers its client as soon as the command returns
(`daemon/child.report_exit`). Tidying that nothing in the answer depends on
(packing a checkpoint's loose objects, `git/packing.py`; writing the cache files
of `.git/agent/state/`, `store/state_cache.py`) is queued with `later` and runs
after the report, in the same child: before it reports, the child closes every
file of its caller (its pipes see their end) and marks its slot in the daemon's
shared page as reported (`daemon/child.ReportedSlots`), so the daemon no longer
kills it when its client hangs up, and reaps it when the work is done. A child the daemon gave
no slot (more calls at once than slots) runs the queue in a grandchild of its own
session before it reports, as `git gc --auto` detaches (`run_detached`). Anywhere
else (a process of its own, the Python API) `later` runs the work at once.

The queued work must be crash-safe on its own (packing is: a pack is renamed
into place before any loose copy goes; a cache file is renamed into place whole)
and must not need the caller's files, nor any file the child had open: all of
them are closed at the report (a pack file libgit2 had open included), so it
opens what it uses, as packing (git's own commands) and the cache writes do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

Work = Callable[[], object]
_queue: list[Work] | None = None
_keys: set[object] = set()  # what `later_once` queued


def defer_in_this_process() -> None:
    """From now on `later` queues (a daemon child, before it runs the command)."""
    global _queue
    _queue = []
    _keys.clear()


def stop_deferring() -> None:
    """`later` runs work at once again; what is still queued is dropped (run it first)."""
    global _queue
    _queue = None
    _keys.clear()


def deferring() -> bool:
    """Whether `later` queues in this process (a daemon child) instead of running now."""
    return _queue is not None


def later(work: Work) -> None:
    """Run `work` after the answer when this process defers, else now. Its errors are
    its own: they never reach the command."""
    if _queue is None:
        with contextlib.suppress(Exception):
            work()
    else:
        _queue.append(work)


def later_once(key: object, work: Work) -> None:
    """`later`, unless work under the same `key` is queued already (deferring only)."""
    if _queue is not None and key in _keys:
        return
    if _queue is not None:
        _keys.add(key)
    later(work)


def run_queued() -> int:
    """Run what was queued, here and now (how many); the queue empties. Work queued
    while it runs (a flush that queues another) runs too."""
    global _queue
    done = 0
    while _queue:
        queued, _queue = _queue, []
        for work in queued:
            with contextlib.suppress(Exception):
                work()
        done += len(queued)
    return done


def run_after_report() -> None:
    """In a daemon child the daemon lets finish (`daemon/child.ReportedSlots`), after its
    report: the queued work, here, with /dev/null for stdin, stdout and stderr (the
    caller's were closed before the report)."""
    if not _queue:
        return
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            if fd != null:
                os.dup2(null, fd)
        if null > 2:
            os.close(null)
    run_queued()


def run_detached() -> None:
    """In a daemon child the daemon may kill once its client hangs up (no slot in
    `daemon/child.ReportedSlots`), whose command returned, before it reports: what was
    queued, in a grandchild of its own session that keeps none of the caller's files (its
    pipes see their end when the child's end) and has /dev/null for stdin, stdout and
    stderr. Returns at once in the child. Forked before the report: once the caller has
    its answer and hangs up, the daemon may kill that child at any instant."""
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
