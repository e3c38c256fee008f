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
    # checkpoint creation (design section 2): one transaction
    "checkpoint.objects",  # its commit, notes and events written, no ref moved yet
    "checkpoint.ref",  # the transaction committed: every ref moved
    # a batch of objects written as one pack (git/object_batch.py)
    "objects.pack",  # the pack in place, its index not yet (git sees no pack)
    # one event-log append
    "event.object",  # the event commit written, the log ref not yet moved
    "event.ref",  # the log ref moved
    # restore (api.py; also reached by `resume --restore` and rollbacks)
    "restore.safety",  # the safety checkpoint taken (when one is needed), nothing written yet
    "restore.logged",  # workspace.restore (the intent) logged, no file written yet
    "restore.write",  # after each file written (deletions are done by then)
    "restore.done",  # every file written and workspace.restored logged
    # resume (recovery/flow.py)
    "resume.verified",  # the workspace verified (restored if asked), no recovery.* event yet
    "resume.checkpoint",  # the resume's transaction built (checkpoint, report, events), not
    # committed
    "resume.report",  # a resume that stops or finishes: its report built, not yet stored
    # confirm (recovery/confirming.py)
    "confirm.checked",  # the restatement checked, nothing written yet
    "confirm.logged",  # verdict and state.update logged, the report not yet updated
    # sharing (store/share.py; `push` runs a fetch first and reaches these too)
    "fetch.mirrored",  # the remote's refs copied under refs/ckpt-remotes/, none integrated
    "fetch.integrated",  # event logs, notes and reports integrated: before each checkpoint ref
    "push.merged",  # fetched and merged, before the atomic push
    # export (audit/export_write.py)
    "export.write",  # after each file written into DIR.partial
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
