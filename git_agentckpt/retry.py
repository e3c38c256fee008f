"""One retry loop for every compare-and-swap in the project (pure: no git, no I/O but sleep).

A writer that lost a race (a ref moved under it, a lock was held, a remote
refused a push because another clone pushed first) calls `retry`: it runs
`attempt` until that returns something other than None, sleeping with
jittered exponential backoff in between, and raises the error `exhausted()`
gives when the tries or the deadline run out. Nothing is written by the
loop itself, so "exhausted" always means "nothing was changed".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from git_agentckpt.errors import CkptError, ConflictError

T = TypeVar("T")


def retry(
    attempt: Callable[[], T | None],
    *,
    what: str,
    tries: int | None = 200,
    deadline_seconds: float | None = None,
    first_delay: float = 0.0005,
    max_delay: float = 0.05,
    exhausted: Callable[[], CkptError] | None = None,
) -> T:
    """Run `attempt` until it returns non-None; at most `tries` times / `deadline_seconds`."""
    delay = first_delay
    deadline = None if deadline_seconds is None else time.monotonic() + deadline_seconds
    count = 0
    while True:
        result = attempt()
        if result is not None:
            return result
        count += 1
        if (tries is not None and count >= tries) or (
            deadline is not None and time.monotonic() > deadline
        ):
            break
        if delay > 0:
            time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.6, max_delay)
    if exhausted is not None:
        raise exhausted()
    raise ConflictError(
        f"{what}: another writer kept updating the same ref",
        hint="nothing was changed; run the command again",
    )
