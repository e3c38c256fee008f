"""When to checkpoint: the pure trigger policy behind `git ckpt tick` (design section 4, issue 5).

`decide(signals, policy)` is pure and deterministic: no git, no I/O, no clock. The
caller measures the signals and records the `Decision` with `Signals.to_json()` as a
`trigger.decision` event.

Tiers are ordered none < light < full. Every rule that fires proposes a tier; the
decision is the highest proposed tier, named after the first rule (in this order) that
proposed it. Taking the maximum keeps the policy monotone: more risk or more budget
use only adds proposals.

 1. step_end            `step done`: full, forced, decided alone; nothing demotes it.
 2. budget_exhausting   full, forced, when a budget left would not cover the next step.
                        Tokens: left < next_step_cost * (1 + budget_margin), or left <= 0.
                        Calls: left < max(min_calls_left, next_step_calls * (1 + margin)),
                        or left <= 0. With both budgets given, either fires (the tighter).
 3. rate_limit          full, forced, when rate_limit_remaining <= rate_limit_floor or,
                        if the API counts tokens (rate_limit_unit="tokens"), when it is
                        < next_step_cost * (1 + budget_margin). The reset is only reported.
 4. budget_threshold_X  full, forced, when budget use crossed share X since the last
                        checkpoint: usage_at_last_checkpoint < X <= usage. Use is the larger
                        of the token and call shares; unknown use at the last checkpoint
                        counts as 0. Several crossed: named after the highest.
 5. pre_expensive_step  full before a step with next_step_risk "high" or next_step_cost >=
                        expensive_step_cost, if pre_expensive_step is on. Medium risk alone
                        triggers nothing.
 6. full_pending        full at a step boundary when a 5% demotion owes one.
 7. steps               full at a step boundary when steps_since >= full_every_steps.
 8. light_calls         light when calls_since >= light_every_calls.
 9. light_time          light when the last checkpoint of any tier is >= light_every_seconds
                        old, or when there is none yet.
10. nothing_due         none.

Rules 5-7 are not forced; their full is demoted to light by, checked in this order:
  min_full_gap       the last full is < min_full_gap_seconds old (a clock that went back
                     counts as 0 s). Nothing is owed: that recent full protects the work.
  five_percent_rule  snapshot_cost_seconds > max_snapshot_share * next_step_seconds, both
                     known. A full is then owed at the next step boundary. Rule 6 skips
                     this check: it was demoted once already.
A demotion names the decision; `demoted_from` names the rule that wanted a full.
The reasons start with the deciding proposal's, then list every other proposal as
`also RULE: why`, RULE being the rule that fired (never the demotion that lowered it;
a demotion line is kept only when the decision is not full).
`forced` is true only when rules 1-4 chose the full, and only those land within the gap.
`full_pending` is true when a full is owed (carried from `Signals.full_pending` or a new
5% demotion) and this decision is not full: any full checkpoint pays the debt.

Budget rules fire on every call while their condition holds: any call may be the last.
Units: next_step_cost and expensive_step_cost are tokens; times are seconds. A policy
value of 0 turns off light_every_calls, light_every_seconds, full_every_steps,
expensive_step_cost, min_full_gap_seconds and max_snapshot_share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal, TypeGuard

Tier = Literal["none", "light", "full"]
Risk = Literal["low", "medium", "high"]
RateLimitUnit = Literal["requests", "tokens"]
TIER_ORDER: tuple[Tier, ...] = ("none", "light", "full")
RISK_ORDER: tuple[Risk, ...] = ("low", "medium", "high")
RATE_LIMIT_UNITS: tuple[RateLimitUnit, ...] = ("requests", "tokens")

POLICY_DOCS: dict[str, str] = {
    "light_every_calls": "light checkpoint every N tool calls since the last checkpoint (0 = off)",
    "light_every_seconds": "light checkpoint when the last checkpoint is this old (0 = off)",
    "full_every_steps": "full checkpoint at a step boundary after N finished steps (0 = off)",
    "pre_expensive_step": "full checkpoint before a high-risk or expensive step",
    "expensive_step_cost": "estimated tokens from which a step counts as expensive (0 = off)",
    "budget_margin": "full checkpoint when the budget left < next step cost * (1 + margin)",
    "budget_thresholds": "full checkpoint when budget use crosses each of these shares",
    "min_full_gap_seconds": "no two full checkpoints closer than this unless forced (0 = off)",
    "max_snapshot_share": "light instead of full if a snapshot costs more than this share of "
    "the step it protects (0 = off)",
    "min_calls_left": "full checkpoint when fewer calls than this remain in the calls budget",
    "rate_limit_floor": "full checkpoint when the rate limit remaining is at or below this",
}


def _num(x: float) -> str:
    """Short human rendering of a number: 600, 2.1, 0.05, 0.0012 (never a bare 0 for
    a value that is not 0)."""
    if not math.isfinite(x):
        return str(x)
    if 0 < abs(x) < 0.01:
        return f"{x:.2g}"
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _pct(share: float) -> str:
    return f"{_num(share * 100)}%"


def _share_name(t: float) -> str:
    """Rule suffix of a threshold: 0.8 -> "0.80", 0.875 -> "0.875"."""
    return f"{t:.2f}" if math.isclose(t, round(t, 2), abs_tol=1e-12) else repr(t)


def _check_number(label: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{label} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class Policy:
    """The [policy] table of .agent/ckpt.toml. See POLICY_DOCS for each key."""

    light_every_calls: int = 10
    light_every_seconds: float = 600.0
    full_every_steps: int = 1
    pre_expensive_step: bool = True
    expensive_step_cost: float = 50_000.0
    budget_margin: float = 0.10
    budget_thresholds: tuple[float, ...] = (0.80, 0.95)
    min_full_gap_seconds: float = 120.0
    max_snapshot_share: float = 0.05
    min_calls_left: int = 2
    rate_limit_floor: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            label = f"policy key {f.name!r}"
            if isinstance(value, bool):
                continue
            if isinstance(value, tuple):
                for t in value:
                    if not (math.isfinite(t) and 0 < t <= 1):
                        raise ValueError(f"{label}: each share must be in (0, 1], got {t!r}")
                object.__setattr__(self, f.name, tuple(sorted(set(value))))
            else:
                _check_number(label, value)

    @classmethod
    def from_mapping(cls, d: Mapping[str, object]) -> Policy:
        """Build from a parsed [policy] table. Unknown keys are ignored; missing keys
        take their defaults; a wrong type or range raises ValueError naming the key."""
        defaults = cls()
        changes: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in d:
                changes[f.name] = _coerce(f.name, d[f.name], getattr(defaults, f.name))
        return replace(defaults, **changes)

    def to_mapping(self) -> dict[str, object]:
        """TOML-ready mapping (lists, not tuples) with the same keys as from_mapping."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


_KINDS = {bool: "true or false", int: "an integer", float: "a number", tuple: "a list of numbers"}


def _coerce(key: str, value: object, default: object) -> object:
    if isinstance(default, bool) and isinstance(value, bool):
        return value
    if isinstance(default, int) and not isinstance(default, bool) and type(value) is int:
        return value
    if isinstance(default, float) and _is_number(value):
        return float(value)
    if isinstance(default, tuple) and isinstance(value, list | tuple):
        numbers = [float(x) for x in value if _is_number(x)]
        if len(numbers) == len(value):
            return tuple(numbers)
    raise ValueError(f"policy key {key!r} must be {_KINDS[type(default)]}, got {value!r}")


@dataclass(frozen=True)
class Signals:
    """What the caller measured. Times are unix seconds; None means unknown."""

    now: float
    last_checkpoint_at: float | None = None  # any tier
    last_full_at: float | None = None
    calls_since: int = 0  # tool calls since the last checkpoint
    steps_since: int = 0  # finished steps since the last full checkpoint
    tokens_used: int | None = None
    token_budget: int | None = None
    calls_used: int | None = None
    calls_budget: int | None = None
    usage_at_last_checkpoint: float | None = None  # share of budget used then (see usage_share)
    rate_limit_remaining: int | None = None  # as the API reports it
    rate_limit_reset: float | None = None  # seconds until the rate limit window resets
    rate_limit_unit: RateLimitUnit = "requests"
    next_step_risk: Risk | None = None
    next_step_cost: float | None = None  # estimated tokens of the next step
    next_step_calls: int | None = None  # estimated tool calls of the next step
    next_step_seconds: float | None = None  # estimated duration of the protected step
    snapshot_cost_seconds: float | None = None  # running estimate of a full snapshot's cost
    at_step_end: bool = False  # `step done`: always full
    full_pending: bool = False  # an earlier 5% demotion owes a full checkpoint
    at_step_boundary: bool = False

    def __post_init__(self) -> None:
        timestamps = ("now", "last_checkpoint_at", "last_full_at")
        budgets = ("token_budget", "calls_budget")
        for f in fields(self):
            value = getattr(self, f.name)
            label = f"signal {f.name!r}"
            if value is None or isinstance(value, bool | str):
                continue
            if f.name in timestamps:
                if not math.isfinite(value):
                    raise ValueError(f"{label} must be a finite timestamp, got {value!r}")
            else:
                _check_number(label, value, positive=f.name in budgets)
        if self.next_step_risk is not None and self.next_step_risk not in RISK_ORDER:
            raise ValueError(f"signal 'next_step_risk' must be one of {RISK_ORDER}")
        if self.rate_limit_unit not in RATE_LIMIT_UNITS:
            raise ValueError(f"signal 'rate_limit_unit' must be one of {RATE_LIMIT_UNITS}")

    def to_json(self) -> dict[str, object]:
        """The signal values, for the trigger.decision event."""
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    tier: Tier
    rule: str  # the rule that fired (see the module docstring)
    reasons: tuple[str, ...]  # human-readable, including demotions
    forced: bool = False  # a forced rule (step_end or quota) chose this full checkpoint
    full_pending: bool = False  # a full checkpoint is owed at the next step boundary
    demoted_from: str | None = None  # the rule that wanted full, when demoted to light
    usage: float | None = None  # share of budget used now: record it with the checkpoint

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["reasons"] = list(self.reasons)
        return d


@dataclass(frozen=True)
class _Proposal:
    tier: Tier
    rule: str
    reasons: tuple[str, ...]  # why the rule fired, then (if demoted) why it was demoted
    forced: bool = False
    demoted_from: str | None = None
    owes_full: bool = False

    @property
    def fired(self) -> str:
        """The rule that fired (a demotion names the decision, not the rule)."""
        return self.demoted_from or self.rule

    @property
    def own_reasons(self) -> tuple[str, ...]:
        """Why the rule fired, without the line of its demotion."""
        return self.reasons[:-1] if self.demoted_from else self.reasons


def usage_share(s: Signals) -> float | None:
    """Share of the budget used: the larger of the token and call shares, None if unknown."""
    shares = [
        used / budget
        for used, budget in ((s.tokens_used, s.token_budget), (s.calls_used, s.calls_budget))
        if used is not None and budget is not None
    ]
    return max(shares) if shares else None


def _age(now: float, then: float | None) -> float | None:
    return None if then is None else max(0.0, now - then)


def _full(rule: str, reason: str, *, forced: bool = False) -> _Proposal:
    return _Proposal("full", rule, (reason,), forced=forced)


def _budget(s: Signals, p: Policy) -> _Proposal | None:
    lines: list[str] = []
    grow = 1 + p.budget_margin
    if s.token_budget is not None and s.tokens_used is not None:
        left = s.token_budget - s.tokens_used
        cost = s.next_step_cost
        if left <= 0 or (cost is not None and left < cost * grow):
            need = "" if cost is None else f" < next step ~{_num(cost)} + {_pct(p.budget_margin)}"
            lines.append(f"{left} of {s.token_budget} tokens left{need}")
    if s.calls_budget is not None and s.calls_used is not None:
        left = s.calls_budget - s.calls_used
        need_calls = max(float(p.min_calls_left), (s.next_step_calls or 0) * grow)
        if left <= 0 or left < need_calls:
            lines.append(f"{left} of {s.calls_budget} calls left < {_num(need_calls)} needed")
    if not lines:
        return None
    why = "checkpoint before the quota runs out: " + "; ".join(lines)
    return _full("budget_exhausting", why, forced=True)


def _rate_limit(s: Signals, p: Policy) -> _Proposal | None:
    left = s.rate_limit_remaining
    if left is None:
        return None
    low = left <= p.rate_limit_floor
    if s.rate_limit_unit == "tokens" and s.next_step_cost is not None:
        low = low or left < s.next_step_cost * (1 + p.budget_margin)
    if not low:
        return None
    reset = "" if s.rate_limit_reset is None else f", resets in {_num(s.rate_limit_reset)} s"
    why = f"rate limit nearly exhausted: {left} {s.rate_limit_unit} remaining{reset}"
    return _full("rate_limit", why, forced=True)


def _threshold(s: Signals, p: Policy, usage: float | None) -> _Proposal | None:
    if usage is None:
        return None
    before = s.usage_at_last_checkpoint or 0.0
    crossed = [t for t in p.budget_thresholds if before < t <= usage]
    if not crossed:
        return None
    shares = ", ".join(_pct(t) for t in crossed)
    why = f"budget use {_pct(usage)} crossed {shares} since the last checkpoint ({_pct(before)})"
    return _full(f"budget_threshold_{_share_name(crossed[-1])}", why, forced=True)


def _five_percent(s: Signals, p: Policy) -> str | None:
    cost, step = s.snapshot_cost_seconds, s.next_step_seconds
    if p.max_snapshot_share <= 0 or cost is None or step is None:
        return None
    if cost <= p.max_snapshot_share * step:
        return None
    return (
        f"full demoted to light: snapshot {_num(cost)} s > {_pct(p.max_snapshot_share)}"
        f" of {_num(step)} s step; full checkpoint owed at the next step boundary"
    )


def _demote(prop: _Proposal, s: Signals, p: Policy, *, five_percent: bool) -> _Proposal:
    """Apply the minimum gap, then (if asked) the 5% rule, to a non-forced full proposal."""
    age = _age(s.now, s.last_full_at)
    if age is not None and age < p.min_full_gap_seconds:
        line = (
            f"full demoted to light: last full checkpoint {_num(age)} s ago"
            f" < min gap {_num(p.min_full_gap_seconds)} s"
        )
        return _Proposal("light", "min_full_gap", (*prop.reasons, line), demoted_from=prop.rule)
    slow = _five_percent(s, p) if five_percent else None
    if slow is None:
        return prop
    reasons = (*prop.reasons, slow)
    return _Proposal("light", "five_percent_rule", reasons, demoted_from=prop.rule, owes_full=True)


def _pre_expensive(s: Signals, p: Policy) -> _Proposal | None:
    if not p.pre_expensive_step:
        return None
    why: list[str] = []
    if s.next_step_risk == "high":
        why.append("next step is high-risk")
    cost = s.next_step_cost
    if p.expensive_step_cost > 0 and cost is not None and cost >= p.expensive_step_cost:
        why.append(f"next step ~{_num(cost)} tokens >= {_num(p.expensive_step_cost)}")
    if not why:
        return None
    prop = _full("pre_expensive_step", "full before the step: " + "; ".join(why))
    return _demote(prop, s, p, five_percent=True)


def _pending(s: Signals, p: Policy) -> _Proposal | None:
    if not (s.full_pending and s.at_step_boundary):
        return None
    prop = _full("full_pending", "step boundary: paying the full checkpoint owed by a demotion")
    return _demote(prop, s, p, five_percent=False)


def _steps(s: Signals, p: Policy) -> _Proposal | None:
    every = p.full_every_steps
    if not (every > 0 and s.at_step_boundary and s.steps_since >= every):
        return None
    prop = _full("steps", f"{s.steps_since} finished steps since the last full >= {every}")
    return _demote(prop, s, p, five_percent=True)


def _light_calls(s: Signals, p: Policy) -> _Proposal | None:
    if p.light_every_calls <= 0 or s.calls_since < p.light_every_calls:
        return None
    why = f"{s.calls_since} tool calls since the last checkpoint >= {p.light_every_calls}"
    return _Proposal("light", "light_calls", (why,))


def _last_checkpoint(s: Signals) -> float | None:
    known = [t for t in (s.last_checkpoint_at, s.last_full_at) if t is not None]
    return max(known) if known else None


def _light_time(s: Signals, p: Policy) -> _Proposal | None:
    age = _age(s.now, _last_checkpoint(s))
    if p.light_every_seconds <= 0 or (age is not None and age < p.light_every_seconds):
        return None
    why = "no checkpoint yet" if age is None else f"last checkpoint {_num(age)} s ago"
    return _Proposal("light", "light_time", (f"{why} (every {_num(p.light_every_seconds)} s)",))


DEFAULT_POLICY = Policy()
_OWED = "a full checkpoint is still owed at the next step boundary"


def decide(signals: Signals, policy: Policy = DEFAULT_POLICY) -> Decision:
    """Decide none, light or full for these signals. Pure and deterministic."""
    s, p = signals, policy
    usage = usage_share(s)
    if s.at_step_end:
        why = "step done: the step-end checkpoint is always full"
        return Decision("full", "step_end", (why,), forced=True, usage=usage)
    rules = (_pre_expensive, _pending, _steps, _light_calls, _light_time)
    found = [_budget(s, p), _rate_limit(s, p), _threshold(s, p, usage)]
    props = [prop for prop in found + [rule(s, p) for rule in rules] if prop is not None]
    # max() keeps the first of equal maxima: priority order breaks ties.
    best = max(props, key=lambda prop: TIER_ORDER.index(prop.tier), default=None)
    owed = s.full_pending or any(prop.owes_full for prop in props)
    pending = owed and (best is None or best.tier != "full")
    carried = (_OWED,) if pending and s.full_pending else ()
    if best is None:
        age = _age(s.now, _last_checkpoint(s))
        since = "" if age is None else f", last checkpoint {_num(age)} s ago"
        why = f"nothing due: {s.calls_since} calls{since}"
        return Decision("none", "nothing_due", (why, *carried), full_pending=pending, usage=usage)
    # each other proposal under the name of the rule that fired; its demotion matters
    # only when no full checkpoint is taken anyway
    others = tuple(
        f"also {x.fired}: {line}"
        for x in props
        if x is not best
        for line in (x.reasons if best.tier != "full" else x.own_reasons)
    )
    reasons = (*best.reasons, *carried, *others)
    return Decision(best.tier, best.rule, reasons, best.forced, pending, best.demoted_from, usage)
