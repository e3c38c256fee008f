"""Resume step 5: check an agent's restatement against the task state (pure, a heuristic).

The brief ends with a form (`recovery/restatement.py`): goal, one line per
constraint id, done steps, next step. A filled-in form is checked strictly:
- the goal line restates the goal (at least half of its key words);
- every constraint in force has its line `- <id>: ...`, filled in, sharing at
  least one word (or value) with the constraint;
- the done steps are exactly the task's done steps;
- no placeholder `<...>` is left.
Free text (no `- <id>:` line) is the fallback: the goal is restated, every
constraint is named by id or by two thirds of its key words.

Both are then checked the same way:
- no sentence dismisses, overrides or contradicts a constraint
  (`recovery/contradictions.py`: dismissal words near its id or its words, a
  different value for a value it fixes, "may modify" for "do not modify");
- a line such as `Next step: s5` names the current or next pending step;
- no done step is planned again ("redo", "rerun", "again", "restart", "run s1",
  ... next to a done step's id), unless negated: steps listed as done or "not
  to be redone" are done, not a plan to redo them.

Every problem is one line that names the constraint or step and says why.
What it cannot see is listed in the man page (`git ckpt confirm`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from git_agentckpt.contracts.schema import Contract, check_to_json
from git_agentckpt.model import JSON
from git_agentckpt.recovery.checked import differences, states_value
from git_agentckpt.recovery.contradictions import (
    WINDOW,
    ConstraintRef,
    constraint_ref,
    find_contradictions,
)
from git_agentckpt.recovery.restatement import FilledForm, is_empty, parse_form
from git_agentckpt.recovery.words import (
    Tok,
    excerpt,
    key_stems,
    negated,
    sentences,
    stem,
    tokens,
    with_synonyms,
)

_NEXT = re.compile(
    r"next\s+step\s*(?:is|:|-|=|will\s+be)?[\s`'\"*:]*([A-Za-z0-9_.-]+)([^\n]*)", re.I
)
_REDO = frozenset(
    (
        "redo",
        "redoing",
        "redone",
        "re-do",
        "re-done",
        "rerun",
        "reruns",
        "rerunning",
        "re-run",
        "re-running",
        "again",
        "repeat",
        "repeating",
        "restart",
        "restarting",
        "re-execute",
        "retrain",
        "retraining",
        "recompute",
        "recomputing",
    )
)
_REDO_PHRASES = (("start", "over"), ("from", "scratch"), ("once", "more"), ("go", "back", "to"))
_RUN_VERBS = frozenset(("do", "run", "start", "begin", "execute", "perform"))
# each kind of finding: what it does to the constraint, and what to write instead
_KIND = {
    "dismissed": ("is dismissed", "restate it as binding"),
    "replaced": ("is replaced", "restate the value it fixes, not another"),
    "different value": ("is contradicted", "restate the value it fixes, exactly"),
    "allowed": ("is contradicted", "restate what it forbids as forbidden"),
    "excepted": ("is given an exception", "restate it for every case, without exceptions"),
    "conditional": ("is made conditional", "restate it as always in force, without conditions"),
    "relaxed": ("is relaxed", "restate it as binding, without permissions or softening words"),
    "left to chance": ("is left to chance", "restate the one value it fixes"),
    "negated": ("is negated", "restate it as it stands, not its opposite"),
}


@dataclass
class Verdict:
    passed: bool
    problems: list[str] = field(default_factory=list)
    named_next_step: str | None = None
    expected_next_step: str | None = None
    # id -> line (form) | id | terms (free text) | missing | contradicted
    constraints: dict[str, str] = field(default_factory=dict)
    form: bool = False  # the restatement filled in the brief's form (else: free text)
    refused: dict[str, list[str]] = field(default_factory=dict)  # id -> the words refused

    def to_json(self) -> dict[str, JSON]:
        return {
            "passed": self.passed,
            "problems": list(self.problems),
            "named_next_step": self.named_next_step,
            "expected_next_step": self.expected_next_step,
            "constraints": dict(self.constraints),
            "form": self.form,
            "refused": {k: list(v) for k, v in self.refused.items()},
        }


def check_restatement(
    text: str,
    *,
    goal: str,
    constraints: Sequence[dict[str, JSON]],
    expected_next: str | None,
    done_steps: Sequence[str],
    step_titles: dict[str, str] | None = None,
    contract: Contract | None = None,
    checks: Mapping[str, Mapping[str, object]] | None = None,
) -> Verdict:
    """`contract` (or `checks`, id -> check object): where the values a constraint fixes
    (`equals`, `sha256`, `max`) are read; a constraint dict's own "check" is used otherwise."""
    checks = {**contract_checks(contract), **(checks or {})}
    refs = [_ref(c, checks) for c in constraints]
    steps = list(step_titles or {}) or [*done_steps, *([expected_next] if expected_next else [])]
    form = parse_form(text, [r.id for r in refs], steps)
    v = Verdict(passed=False, expected_next_step=expected_next, form=form is not None)
    if form is None:
        _check_goal(v, text, goal)
        _check_free_text(v, text, refs)
    else:
        if form.goal is None:
            v.problems.append("the form has no 'Goal:' line")
        else:
            _check_goal(v, form.goal, goal)
        _check_form(v, text, form, refs, done_steps)
    _check_next(v, text, expected_next, step_titles or {})
    reference = [goal, *(step_titles or {}).values()]
    for f in find_contradictions(text, refs, reference, form.constraints if form else None):
        v.constraints[f.constraint] = "contradicted"
        about = next((r.text for r in refs if r.id == f.constraint), "")
        said = v.refused.setdefault(f.constraint, [])
        said += [w for w in f.words if w not in said]
        does, instead = _KIND[f.kind]
        v.problems.append(
            f"constraint {f.constraint!r} ({excerpt(about, 60)}) {does}: {f.reason}; {instead}"
        )
    for sid, sentence in planned_redos(text, done_steps, steps):
        v.problems.append(f'done step {sid!r} is planned again: "{excerpt(sentence)}"')
    v.passed = not v.problems
    return v


def contract_checks(contract: Contract | None) -> dict[str, dict[str, object]]:
    """The check object of each constraint of the contract, by id."""
    if contract is None:
        return {}
    return {c.id: check_to_json(c.check) for c in contract.constraints if c.check is not None}


def _ref(c: Mapping[str, JSON], checks: Mapping[str, Mapping[str, object]] | None) -> ConstraintRef:
    check = (checks or {}).get(str(c.get("id")))
    own = c.get("check")
    return constraint_ref(c, check if check is not None else own if isinstance(own, dict) else None)


def _check_goal(v: Verdict, restated: str, goal: str) -> None:
    goal_terms = key_stems(goal)
    if goal_terms and len(goal_terms & key_stems(restated)) * 2 < len(goal_terms):
        v.problems.append(
            "the goal is not restated (expected words like: "
            + ", ".join(sorted(_words(goal))[:6])
            + ")"
        )


def _words(text: str) -> set[str]:
    return {t.raw for t in tokens(text) if stem(t.raw) in key_stems(text)}


def _check_free_text(v: Verdict, text: str, refs: Sequence[ConstraintRef]) -> None:
    restated = key_stems(text)
    for r in refs:
        terms = key_stems(r.text)
        if _names(text, r.id):
            v.constraints[r.id] = "id"
        elif terms and len(terms & restated) * 3 >= 2 * len(terms):
            v.constraints[r.id] = "terms"
        else:
            v.constraints[r.id] = "missing"
            v.problems.append(f"constraint {r.id!r} is not restated: {excerpt(r.text, 80)}")


def _check_form(
    v: Verdict, text: str, form: FilledForm, refs: Sequence[ConstraintRef], done: Sequence[str]
) -> None:
    if form.unfilled:
        v.problems.append(
            "the form is not filled in: replace each <...> ("
            + "; ".join(form.unfilled[:3])
            + ("; ..." if len(form.unfilled) > 3 else "")
            + ")"
        )
    for r in refs:
        lines = form.constraints.get(r.id)
        if not lines:
            v.constraints[r.id] = "missing"
            v.problems.append(
                f"constraint {r.id!r} has no line in the form "
                f"(write '- {r.id}: ' and what it requires, in your own words)"
            )
            continue
        v.constraints[r.id] = "line"
        for line in lines:
            if is_empty(line):
                if not any(p in line for p in ("<", ">")):
                    v.problems.append(f"constraint {r.id!r}: its line restates nothing")
                continue
            # the id repeated is no restatement (`- seed42: seed42`); an id that is a word
            # ("smoke") is a word of the line
            bare = line if r.id.isalpha() else re.sub(_id_pattern(r.id), " ", line, flags=re.I)
            said = key_stems(bare)
            shown = r.carried is not None and r.carried.text.lower() in line.lower()
            if not shown and not with_synonyms(said) & (r.terms | r.values()):
                v.problems.append(
                    f"constraint {r.id!r}: '{excerpt(line, 60)}' shares no word with it "
                    f"({excerpt(r.text, 60)})"
                )
            elif r.carried is not None and r.carried.required:
                stated = any(states_value(r.carried, x) for x in lines)
                if not stated and not any(differences(r.carried, x, True) for x in lines):
                    v.problems.append(
                        f"constraint {r.id!r}: its line drops the checked value "
                        f"`{r.carried.text}`; restate it with that value, as the form prints it"
                    )
                    break
    if form.done is None:  # no "Done steps" line: each done step named somewhere will do
        missing = [sid for sid in done if not _names(text, sid)]
        if missing:
            v.problems.append(
                f"the form has no 'Done steps' line, and done step(s) {', '.join(missing)} "
                "are not named"
            )
        return
    for sid in done:
        if sid not in form.done:
            v.problems.append(f"done step {sid!r} is not listed under 'Done steps'")
    for sid in dict.fromkeys(form.done):
        if sid not in done:
            v.problems.append(f"step {sid!r} is listed as done, but it is not done")


def _id_pattern(ident: str) -> str:
    return rf"(?<![A-Za-z0-9_.-]){re.escape(ident)}(?![A-Za-z0-9_-])"


def _names(text: str, ident: str) -> bool:
    return re.search(_id_pattern(ident), text, re.I) is not None


def _check_next(
    v: Verdict, text: str, expected: str | None, step_titles: Mapping[str, str]
) -> None:
    m = _NEXT.search(text)
    if m:
        named = m.group(1).rstrip(".")
        if step_titles and named not in step_titles:
            later = [t for t in re.findall(r"[A-Za-z0-9_.-]+", m.group(2)) if t in step_titles]
            titled = [
                sid
                for sid, title in step_titles.items()
                if title and title.lower() in text[m.start(1) : m.end(1) + len(title) + 2].lower()
            ]
            named = later[0] if later else titled[-1] if titled else named
        v.named_next_step = named
    if expected is None:
        if v.named_next_step not in (None, "none", "None"):
            v.problems.append(
                f"the task has no next step, but the restatement names {v.named_next_step!r}"
            )
    elif v.named_next_step is None:
        v.problems.append(f"no line such as 'Next step: {expected}' was found")
    elif v.named_next_step != expected:
        v.problems.append(
            f"the next step named is {v.named_next_step!r}, "
            f"but the task's next step is {expected!r}"
        )


def _redo_cues(toks: Sequence[Tok], steps: Mapping[str, str]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for i, t in enumerate(toks):
        if t.raw in _REDO:
            found.append((i, i + 1))
        for phrase in _REDO_PHRASES:
            if tuple(x.raw for x in toks[i : i + len(phrase)]) == phrase:
                found.append((i, i + len(phrase)))
        if t.raw in _RUN_VERBS:
            nxt = [x.raw for x in toks[i + 1 : i + 3]]
            if nxt[:1] and (nxt[0] in steps or (nxt[0] == "step" and nxt[1:] and nxt[1] in steps)):
                found.append((i, i + 1))
    return found


def planned_redos(text: str, done: Sequence[str], steps: Sequence[str]) -> list[tuple[str, str]]:
    """(done step, sentence) for each sentence that plans a done step again."""
    by_lower = {s.lower(): s for s in [*steps, *done]}
    out: list[tuple[str, str]] = []
    for sentence in sentences(text):
        toks = tokens(sentence)
        where = [(i, by_lower[t.raw]) for i, t in enumerate(toks) if t.raw in by_lower]
        if not where:
            continue
        for start, end in _redo_cues(toks, by_lower):
            after = toks[end].raw if end < len(toks) else ""
            if negated(toks, start) or after in ("nothing", "none", "neither", "no"):
                continue
            near = [
                (start - i if i < start else i - end + 1, sid)
                for i, sid in where
                if not start <= i < end
            ]
            near = [(d, sid) for d, sid in near if d <= WINDOW]
            if not near:
                continue
            closest = min(d for d, _ in near)
            for d, sid in near:
                if d == closest and sid in done and (sid, sentence) not in out:
                    out.append((sid, sentence))
    return out
