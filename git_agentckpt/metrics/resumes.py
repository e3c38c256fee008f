"""One resume's figures as a JSON-ready dict, and the totals over resumes (pure but for
`Trees`). The shape is documented in the man page (`git ckpt metrics --json`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from git_agentckpt.metrics.figures import (
    Trees,
    failing,
    redone_steps,
    repeated_tool_calls,
    rewritten_files,
    seconds,
    tokens_between,
    violations,
)
from git_agentckpt.metrics.timeline import STEP_START, ResumeSpan
from git_agentckpt.model import JSON, Event

__all__ = ["resume_figures", "totals"]


def _restatement(events: Sequence[Event], span: ResumeSpan) -> dict[str, JSON]:
    rejected = 0
    for i in range(span.first, span.after_end):
        ev = events[i]
        if ev.type == "recovery.rejected":
            rejected += 1
        elif ev.type == "recovery.confirmed":
            by_person = ev.data.get("by") == "human"
            outcome = "by_person" if by_person else "first_try" if not rejected else "after_retries"
            return {"outcome": outcome, "tries": rejected + 1, "confirmed_at": ev.ts, "at": i}
    return {"outcome": "not_confirmed", "tries": rejected, "confirmed_at": None, "at": None}


def _drift(events: Sequence[Event], span: ResumeSpan) -> dict[str, JSON]:
    items: list[JSON] = []
    for i in range(span.first, span.after_end):
        ev = events[i]
        if ev.type != "drift.suspected":
            continue
        item: dict[str, JSON] = {
            "seq": ev.seq,
            "signal": ev.data.get("signal"),
            "subject": ev.data.get("subject"),
            "passed_seq": None,
            "seconds_to_pass": None,
            "steps_to_pass": None,
        }
        steps = 0
        for later in events[i + 1 :]:
            if later.type == STEP_START:
                steps += 1
            elif later.type == "constraint.check" and not failing(later):
                item.update(
                    passed_seq=later.seq,
                    seconds_to_pass=seconds(ev.ts, later.ts),
                    steps_to_pass=steps,
                )
                break
        items.append(item)
    return {"alarms": len(items), "items": items}


def _getting_going(
    events: Sequence[Event], span: ResumeSpan, confirmed_at: int | None
) -> dict[str, JSON]:
    cut = events[span.interruption].ts if span.interruption >= 0 else None
    first = next(
        (i for i in range(span.ready + 1, span.after_end) if events[i].type == STEP_START), None
    )
    end = first if first is not None else span.after_end
    tokens, source = tokens_between(events, span.interruption + 1, end, span.before_start)
    return {
        "gap_seconds": seconds(cut, events[span.first].ts),
        "seconds_to_confirm": seconds(cut, events[confirmed_at].ts)
        if confirmed_at is not None
        else None,
        "seconds_to_first_step": seconds(cut, events[first].ts) if first is not None else None,
        "first_step": events[first].links.get("step") if first is not None else None,
        "tokens_to_first_step": tokens,
        "tokens_source": source,
    }


def _interruption(events: Sequence[Event], span: ResumeSpan) -> JSON:
    if span.interruption < 0:
        return None
    from git_agentckpt.model import is_stop_signal

    ev = events[span.interruption]
    return {"seq": ev.seq, "type": ev.type, "ts": ev.ts, "stop_signal": is_stop_signal(ev)}


def resume_figures(
    events: Sequence[Event],
    span: ResumeSpan,
    *,
    task: str,
    window: int,
    report: Mapping[str, JSON],
    trees: Trees,
    worktree: str | None,
    recorded: bool,
) -> dict[str, JSON]:
    """Every figure of one resume (module docs of `figures.py` and `timeline.py`)."""
    said = _restatement(events, span)
    at = said.pop("at")
    steps = redone_steps(events, span)
    files = rewritten_files(events, span, trees, worktree)
    calls = repeated_tool_calls(events, span)
    locate = report.get("locate")
    start = locate.get("start") if isinstance(locate, dict) else None
    made = report.get("resume_checkpoint")
    ready = events[span.ready]
    out: dict[str, JSON] = {
        "report": span.report,
        "reports": list(span.reports),
        "attempts": len(span.reports),
        "outcome": report.get("outcome") or "ready",
        "resumed_at": events[span.first].ts,
        "from_checkpoint": start.get("commit") if isinstance(start, dict) else None,
        "resume_checkpoint": made.get("commit")
        if isinstance(made, dict)
        else ready.links.get("checkpoint"),
        "interruption": _interruption(events, span),
        "window": {
            "size": window,
            "steps_after": span.steps_after,
            "steps_before": span.steps_before,
            "passed": span.passed,
            "closed_by": span.closed_by,
        },
        "violations": violations(events, span, report),
        "redone": {
            "steps": steps,
            **{k: sum(1 for s in steps if isinstance(s, dict) and s["kind"] == k) for k in _KINDS},
            "files": files,
            "files_count": len(files),
            "tool_calls": calls,
            "tool_calls_count": len(calls),
        },
        "getting_going": _getting_going(events, span, at if isinstance(at, int) else None),
        "restatement": said,
        "drift": _drift(events, span),
        "recorded": recorded,
    }
    out["verdict"], out["verdict_line"] = verdict(task, out)
    return out


_KINDS = ("unfinished", "done", "rolled_back", "failed")


def _num(value: JSON) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _get(d: Mapping[str, JSON], *keys: str) -> JSON:
    cur: JSON = d
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    return cur


def verdict(task: str, r: Mapping[str, JSON]) -> tuple[str, str]:
    """`ok` or `attention`, and one line saying why."""
    after, before = _num(_get(r, "violations", "after")), _num(_get(r, "violations", "before"))
    done = _num(_get(r, "redone", "done")) + _num(_get(r, "redone", "rolled_back"))
    files = _num(_get(r, "redone", "files_count"))
    calls = _num(_get(r, "redone", "tool_calls_count"))
    said = _get(r, "restatement", "outcome")
    tries = _num(_get(r, "restatement", "tries"))
    alarms = _get(r, "drift", "items")
    open_alarms = (
        sum(1 for a in alarms if isinstance(a, dict) and a.get("passed_seq") is None)
        if isinstance(alarms, list)
        else 0
    )
    issues = []
    if after > before:
        issues.append("more violations after than before")
    if done:
        issues.append(f"{done} done step(s) redone")
    if files or calls:
        issues.append("work repeated")
    if said == "not_confirmed":
        issues.append("not confirmed")
    if open_alarms:
        issues.append(f"{open_alarms} drift alarm(s) with no passing check since")
    how = {
        "first_try": "confirmed first try",
        "after_retries": f"confirmed after {tries} tries",
        "by_person": "confirmed by a person",
        "not_confirmed": "not confirmed",
    }.get(str(said), str(said))
    going = _get(r, "getting_going", "seconds_to_confirm")
    tokens = _get(r, "getting_going", "tokens_to_first_step")
    line = (
        f"resume {str(r.get('report'))[:10]} of {task}: {how}"
        + (f" {going:g} s after the interruption" if isinstance(going, int | float) else "")
        + (f", {tokens} tokens before the first step" if isinstance(tokens, int) else "")
        + f"; violations {after} after / {before} before"
        + f" ({_get(r, 'window', 'steps_after')}/{_get(r, 'window', 'size')} steps after)"
        + f"; redone: {_num(_get(r, 'redone', 'unfinished'))} unfinished (expected), {done} done"
        + f"; {files} file(s) rewritten, {calls} repeated tool call(s)"
        + f"; {_num(_get(r, 'drift', 'alarms'))} drift alarm(s)"
    )
    word = "attention" if issues else "ok"
    return word, line + f" — {word}" + (f" ({'; '.join(issues)})" if issues else "")


TOTAL_KEYS = (
    "resumes",
    "violations_after",
    "violations_before",
    "redone_unfinished",
    "redone_done",
    "redone_rolled_back",
    "files_rewritten",
    "tool_calls_repeated",
    "drift_alarms",
    "confirmed_first_try",
    "confirmed_after_retries",
    "confirmed_by_person",
    "not_confirmed",
)


def totals(resumes: Sequence[Mapping[str, JSON]]) -> dict[str, JSON]:
    """Sums over resumes (`seconds_to_confirm` and `tokens_to_first_step`: None when no
    resume gave one)."""
    out: dict[str, JSON] = dict.fromkeys(TOTAL_KEYS, 0)
    secs: list[float] = []
    toks: list[int] = []
    for r in resumes:
        add = {
            "resumes": 1,
            "violations_after": _num(_get(r, "violations", "after")),
            "violations_before": _num(_get(r, "violations", "before")),
            "redone_unfinished": _num(_get(r, "redone", "unfinished")),
            "redone_done": _num(_get(r, "redone", "done")),
            "redone_rolled_back": _num(_get(r, "redone", "rolled_back")),
            "files_rewritten": _num(_get(r, "redone", "files_count")),
            "tool_calls_repeated": _num(_get(r, "redone", "tool_calls_count")),
            "drift_alarms": _num(_get(r, "drift", "alarms")),
        }
        said = _get(r, "restatement", "outcome")
        key = "not_confirmed" if said == "not_confirmed" else f"confirmed_{said}"
        if key in out:
            add[key] = 1
        for k, v in add.items():
            out[k] = _num(out[k]) + v
        s = _get(r, "getting_going", "seconds_to_confirm")
        if isinstance(s, int | float):
            secs.append(float(s))
        t = _get(r, "getting_going", "tokens_to_first_step")
        if isinstance(t, int):
            toks.append(t)
    out["seconds_to_confirm"] = round(sum(secs), 3) if secs else None
    out["tokens_to_first_step"] = sum(toks) if toks else None
    return out
