"""Ref names in one place: a task name value type and the refs built from it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from git_agentckpt.errors import BadTaskName

CHECKPOINTS = "refs/agent/checkpoints/"
EVENTS = "refs/agent/events/"
REPORTS = "refs/agent/reports/"
STATE_NOTES = "refs/notes/agent/state"
ASSERTION_NOTES = "refs/notes/agent/assertions"
TASK_PREFIXES = (CHECKPOINTS, EVENTS, REPORTS)

_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_MAX_LEN = 200


def _why_bad(name: str) -> str | None:
    if not name:
        return "it is empty"
    if len(name) > _MAX_LEN:
        return f"it is longer than {_MAX_LEN} characters"
    if _BAD_CHARS.search(name):
        return "it contains a space, a control character or one of ~ ^ : ? * [ \\"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "it starts or ends with '/' or contains '//'"
    if ".." in name:
        return "it contains '..'"
    if "@{" in name or name == "@":
        return "it contains '@{' or is '@'"
    if name.endswith("."):
        return "it ends with '.'"
    for part in name.split("/"):
        if part.startswith("."):
            return f"the component {part!r} starts with '.'"
        if part.endswith(".lock"):
            return f"the component {part!r} ends with '.lock'"
    return None


@dataclass(frozen=True, order=True)
class TaskName:
    """A task name: the rules of `git check-ref-format`, one or more components."""

    name: str

    def __post_init__(self) -> None:
        why = _why_bad(self.name)
        if why is not None:
            raise BadTaskName(
                f"invalid task name {self.name!r}: {why}",
                hint="use letters, digits, '-', '_', '.' and '/' between components",
            )

    def __str__(self) -> str:
        return self.name

    @property
    def checkpoints_ref(self) -> str:
        return CHECKPOINTS + self.name

    @property
    def events_ref(self) -> str:
        return EVENTS + self.name

    @property
    def reports_ref(self) -> str:
        return REPORTS + self.name

    @classmethod
    def from_ref(cls, ref: str) -> TaskName:
        for prefix in TASK_PREFIXES:
            if ref.startswith(prefix):
                return cls(ref[len(prefix) :])
        raise BadTaskName(f"{ref!r} is not a task ref")

    def check_no_prefix_clash(self, existing: Iterable[TaskName]) -> None:
        """No `a` beside `a/b`: git cannot store both refs."""
        for other in existing:
            if other == self:
                continue
            a, b = self.name + "/", other.name + "/"
            if a.startswith(b) or b.startswith(a):
                raise BadTaskName(
                    f"task {self.name!r} cannot exist beside task {other.name!r}",
                    hint="a task name may not be a path prefix of another; pick another name",
                )


def is_valid_task_name(name: str) -> bool:
    return _why_bad(name) is None
