"""Resume step 5: check an agent's restatement against the task state (pure).

The restatement passes when it
- restates the goal (at least half of the goal's key terms),
- covers every constraint in force, by id or by its key terms (two thirds),
- names the next step on a line such as `Next step: s5`, and that step is the
  current or next pending step,
- plans no done step again: a line naming a done step together with words such
  as "redo", "rerun" or "again" fails, unless it says the step is done or is
  "not to be redone".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from git_agentckpt.model import JSON

_STOP = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "must",
        "never",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "was",
        "were",
        "will",
        "with",
        "without",
        "you",
        "your",
        "all",
        "any",
        "each",
        "every",
        "may",
        "can",
        "only",
    )
)
_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_NEXT = re.compile(r"next\s+step\s*(?:is|:|-|=|will\s+be)?\s*[`'\"*]*([A-Za-z0-9_.-]+)", re.I)
_REDO = re.compile(
    r"\b(redo|re-do|rerun|re-run|again|repeat|restart|start over|from scratch)\b", re.I
)
_NEGATED = re.compile(
    r"\b(not|never|no need|don't|do not|won't|without|skip|already|done|completed|finished)\b",
    re.I,
)


def key_terms(text: str) -> set[str]:
    words = {w.strip(".-_") for w in _WORD.findall(text.lower())}
    return {w for w in words if w and w not in _STOP and (len(w) >= 3 or w.isdigit())}


def _mentions(text: str, ident: str) -> bool:
    return (
        re.search(rf"(?<![A-Za-z0-9_.-]){re.escape(ident)}(?![A-Za-z0-9_-])", text, re.I)
        is not None
    )


@dataclass
class Verdict:
    passed: bool
    problems: list[str] = field(default_factory=list)
    named_next_step: str | None = None
    expected_next_step: str | None = None
    constraints: dict[str, str] = field(default_factory=dict)  # id -> covered-by-id|terms|missing

    def to_json(self) -> dict[str, JSON]:
        return {
            "passed": self.passed,
            "problems": list(self.problems),
            "named_next_step": self.named_next_step,
            "expected_next_step": self.expected_next_step,
            "constraints": dict(self.constraints),
        }


def check_restatement(
    text: str,
    *,
    goal: str,
    constraints: Sequence[dict[str, JSON]],
    expected_next: str | None,
    done_steps: Sequence[str],
    step_titles: dict[str, str] | None = None,
) -> Verdict:
    v = Verdict(passed=False, expected_next_step=expected_next)
    words = key_terms(text)
    goal_terms = key_terms(goal)
    if goal_terms and len(goal_terms & words) * 2 < len(goal_terms):
        v.problems.append(
            "the goal is not restated (expected terms like: "
            + ", ".join(sorted(goal_terms)[:6])
            + ")"
        )
    for c in constraints:
        cid = str(c.get("id"))
        terms = key_terms(str(c.get("text", "")))
        if _mentions(text, cid):
            v.constraints[cid] = "id"
        elif terms and len(terms & words) * 3 >= 2 * len(terms):
            v.constraints[cid] = "terms"
        else:
            v.constraints[cid] = "missing"
            v.problems.append(f"constraint {cid!r} is not restated: {c.get('text')}")
    m = _NEXT.search(text)
    if m:
        named = m.group(1).rstrip(".")
        if step_titles and named not in step_titles:
            for sid, title in step_titles.items():
                if title and title.lower() in text[m.start() : m.end() + len(title) + 2].lower():
                    named = sid
        v.named_next_step = named
    if expected_next is None:
        if v.named_next_step not in (None, "none", "None"):
            v.problems.append(
                f"the task has no next step, but the restatement names {v.named_next_step!r}"
            )
    elif v.named_next_step is None:
        v.problems.append(f"no line such as 'Next step: {expected_next}' was found")
    elif v.named_next_step != expected_next:
        v.problems.append(
            f"the next step named is {v.named_next_step!r}, "
            f"but the task's next step is {expected_next!r}"
        )
    for line in text.splitlines():
        if not _REDO.search(line):
            continue
        for sid in done_steps:
            if _mentions(line, sid) and not _NEGATED.search(line):
                v.problems.append(f"done step {sid!r} is planned again: {line.strip()[:120]}")
    v.passed = not v.problems
    return v
