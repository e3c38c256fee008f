"""The one retry loop: tries, deadline, backoff, and the error when it runs out."""

from __future__ import annotations

import pytest

from git_agentckpt.errors import ConflictError, RepositoryError
from git_agentckpt.retry import retry


def test_returns_the_first_non_none_result() -> None:
    calls: list[int] = []

    def attempt() -> str | None:
        calls.append(1)
        return "done" if len(calls) == 3 else None

    assert retry(attempt, what="x", first_delay=0) == "done"
    assert len(calls) == 3


def test_false_is_a_result_not_a_retry() -> None:
    assert retry(lambda: False, what="x") is False


def test_runs_out_of_tries_with_a_conflict_that_says_nothing_changed() -> None:
    calls: list[int] = []

    def attempt() -> None:
        calls.append(1)

    with pytest.raises(ConflictError) as info:
        retry(attempt, what="moving refs/x", tries=4, first_delay=0)
    assert len(calls) == 4
    assert "moving refs/x" in info.value.one_line() and "nothing was changed" in (
        info.value.hint or ""
    )


def test_a_deadline_bounds_the_loop_and_the_caller_names_the_error() -> None:
    with pytest.raises(RepositoryError, match="stayed locked"):
        retry(
            lambda: None,
            what="x",
            tries=None,
            deadline_seconds=0.0,
            exhausted=lambda: RepositoryError("refs/x stayed locked"),
        )
