"""Named crash points: a documented, test-only way to stop the process at an exact step.

`GIT_CKPT_CRASH_AT=NAME` (or `NAME@N`: at the N-th time the point is reached,
or several of either, comma-separated) makes the process kill itself with
SIGKILL when it reaches the named point, exactly as `kill -9` would at that
instant: no cleanup, no `finally`, no buffered output flushed. The reliability
tests use it to prove the write-ahead order at every step instead of killing
at a random moment and hoping to land in the right place.

Unset (the normal case), a point costs one dictionary lookup. The names are
listed in `POINTS` and in the man page (ENVIRONMENT); an unknown name never
fires, so a typo in a test fails that test's assertions instead of passing.
"""

from __future__ import annotations

import os
import signal

ENV = "GIT_CKPT_CRASH_AT"

POINTS = (
    # checkpoint creation (design section 2), in write-ahead order
    "checkpoint.objects",  # tree and commit written, nothing points at them
    "checkpoint.notes",  # state and assertion notes written
    "checkpoint.prepare",  # checkpoint.prepare appended
    "checkpoint.ref",  # the ref moved (the commit point), checkpoint.commit not yet logged
    # one event-log append
    "event.object",  # the event commit written, the log ref not yet moved
    "event.ref",  # the log ref moved
    # `step done`: step.end logged, its checkpoint not yet begun
    "step.end",
    # restore: after the safety checkpoint, after each file written, after the log event
    "restore.safety",
    "restore.write",
    "restore.logged",
    # resume and confirm
    "resume.verified",
    "resume.checkpoint",
    "resume.report",
    "confirm.checked",
    # sharing
    "fetch.mirrored",
    "fetch.integrated",
    "push.merged",
)

_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process if `GIT_CKPT_CRASH_AT` names `name` (test use only)."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    count = _hits[name] = _hits.get(name, 0) + 1
    for item in wanted.split(","):
        point, _, nth = item.strip().partition("@")
        if point == name and (not nth or (nth.isdigit() and int(nth) == count)):
            os.kill(os.getpid(), signal.SIGKILL)
