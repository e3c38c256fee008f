"""The pure trigger policy (issue 5): a decision table, hypothesis properties, config mapping."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from git_agentckpt.triggers import (
    DEFAULT_POLICY,
    POLICY_DOCS,
    RISK_ORDER,
    TIER_ORDER,
    Decision,
    Policy,
    Signals,
    decide,
    usage_share,
)

NOW = 1_000_000.0
# Quiet defaults: a checkpoint 10 s ago, a full one 1000 s ago, nothing due.
QUIET: dict[str, Any] = {"now": NOW, "last_checkpoint_at": NOW - 10, "last_full_at": NOW - 1000}
SLOW = {"snapshot_cost_seconds": 3.0, "next_step_seconds": 30.0}  # 10% > 5%
IN_GAP = {"last_full_at": NOW - 30}
PROPS = settings(max_examples=300, derandomize=True, database=None, deadline=None)


def sig(**kw: Any) -> Signals:
    return Signals(**{**QUIET, **kw})


def rank(d: Decision) -> int:
    return TIER_ORDER.index(d.tier)


# id, signals, policy overrides, tier, rule, forced, full_pending
# fmt: off
TABLE: list[tuple[str, dict[str, Any], dict[str, Any], str, str, bool, bool]] = [
    ("quiet", {}, {}, "none", "nothing_due", False, False),
    ("step_end", {"at_step_end": True}, {}, "full", "step_end", True, False),
    ("step_end_in_gap_slow", {"at_step_end": True, **IN_GAP, **SLOW}, {},
     "full", "step_end", True, False),
    ("tokens_below_cost_plus_margin",
     {"tokens_used": 94_600, "token_budget": 100_000, "next_step_cost": 5_000,
      "usage_at_last_checkpoint": 0.946}, {}, "full", "budget_exhausting", True, False),
    ("tokens_cover_cost_plus_margin",
     {"tokens_used": 94_000, "token_budget": 100_000, "next_step_cost": 5_000,
      "usage_at_last_checkpoint": 0.90}, {}, "none", "nothing_due", False, False),
    ("tokens_exhausted_cost_unknown",
     {"tokens_used": 100_000, "token_budget": 100_000, "usage_at_last_checkpoint": 1.0}, {},
     "full", "budget_exhausting", True, False),
    ("calls_below_floor", {"calls_used": 49, "calls_budget": 50, "usage_at_last_checkpoint": 0.98},
     {}, "full", "budget_exhausting", True, False),
    ("calls_below_next_step_calls",
     {"calls_used": 90, "calls_budget": 100, "next_step_calls": 10,
      "usage_at_last_checkpoint": 0.9}, {}, "full", "budget_exhausting", True, False),
    ("both_budgets_tighter_wins",
     {"tokens_used": 10, "token_budget": 100_000, "calls_used": 99, "calls_budget": 100,
      "usage_at_last_checkpoint": 0.99}, {}, "full", "budget_exhausting", True, False),
    ("budget_in_gap_forced",
     {**IN_GAP, **SLOW, "tokens_used": 99_000, "token_budget": 100_000, "next_step_cost": 5_000},
     {}, "full", "budget_exhausting", True, False),
    ("rate_limit_requests", {"rate_limit_remaining": 1, "rate_limit_reset": 30.0}, {},
     "full", "rate_limit", True, False),
    ("rate_limit_plenty", {"rate_limit_remaining": 5}, {}, "none", "nothing_due", False, False),
    ("rate_limit_tokens_below_cost",
     {"rate_limit_remaining": 2_000, "rate_limit_unit": "tokens", "next_step_cost": 3_000},
     {}, "full", "rate_limit", True, False),
    ("threshold_80_crossed",
     {"tokens_used": 81_000, "token_budget": 100_000, "usage_at_last_checkpoint": 0.70},
     {}, "full", "budget_threshold_0.80", True, False),
    ("threshold_80_already_crossed",
     {"tokens_used": 85_000, "token_budget": 100_000, "usage_at_last_checkpoint": 0.82},
     {}, "none", "nothing_due", False, False),
    ("threshold_jump_names_highest",
     {"tokens_used": 96_000, "token_budget": 100_000, "usage_at_last_checkpoint": 0.5},
     {}, "full", "budget_threshold_0.95", True, False),
    ("threshold_in_gap_forced",
     {**IN_GAP, "calls_used": 80, "calls_budget": 100, "usage_at_last_checkpoint": 0.79},
     {}, "full", "budget_threshold_0.80", True, False),
    ("custom_threshold_name",
     {"tokens_used": 50, "token_budget": 100, "usage_at_last_checkpoint": 0.0},
     {"budget_thresholds": [0.5]}, "full", "budget_threshold_0.50", True, False),
    ("high_risk", {"next_step_risk": "high"}, {}, "full", "pre_expensive_step", False, False),
    ("expensive_cost", {"next_step_cost": 60_000}, {}, "full", "pre_expensive_step", False, False),
    ("high_risk_in_gap", {"next_step_risk": "high", **IN_GAP}, {},
     "light", "min_full_gap", False, False),
    ("high_risk_end_of_gap", {"next_step_risk": "high", "last_full_at": NOW - 119.5}, {},
     "light", "min_full_gap", False, False),
    ("high_risk_gap_over", {"next_step_risk": "high", "last_full_at": NOW - 120}, {},
     "full", "pre_expensive_step", False, False),
    ("high_risk_slow_snapshot", {"next_step_risk": "high", **SLOW}, {},
     "light", "five_percent_rule", False, True),
    ("high_risk_snapshot_exactly_5pct",
     {"next_step_risk": "high", "snapshot_cost_seconds": 1.5, "next_step_seconds": 30.0}, {},
     "full", "pre_expensive_step", False, False),
    ("five_percent_rule_off", {"next_step_risk": "high", **SLOW}, {"max_snapshot_share": 0},
     "full", "pre_expensive_step", False, False),
    ("pre_expensive_off", {"next_step_risk": "high"}, {"pre_expensive_step": False},
     "none", "nothing_due", False, False),
    ("medium_risk", {"next_step_risk": "medium"}, {}, "none", "nothing_due", False, False),
    ("steps_at_boundary", {"steps_since": 1, "at_step_boundary": True}, {},
     "full", "steps", False, False),
    ("steps_not_at_boundary", {"steps_since": 3}, {}, "none", "nothing_due", False, False),
    ("steps_below_every", {"steps_since": 2, "at_step_boundary": True}, {"full_every_steps": 3},
     "none", "nothing_due", False, False),
    ("steps_slow_snapshot", {"steps_since": 1, "at_step_boundary": True, **SLOW}, {},
     "light", "five_percent_rule", False, True),
    ("pending_paid_despite_slow", {"full_pending": True, "at_step_boundary": True, **SLOW}, {},
     "full", "full_pending", False, False),
    ("pending_in_gap_still_owed", {"full_pending": True, "at_step_boundary": True, **IN_GAP}, {},
     "light", "min_full_gap", False, True),
    ("pending_not_at_boundary", {"full_pending": True}, {}, "none", "nothing_due", False, True),
    ("pending_paid_by_forced_full", {"full_pending": True, "rate_limit_remaining": 0}, {},
     "full", "rate_limit", True, False),
    ("light_calls", {"calls_since": 10}, {}, "light", "light_calls", False, False),
    ("light_calls_not_yet", {"calls_since": 9}, {}, "none", "nothing_due", False, False),
    ("light_calls_off", {"calls_since": 100}, {"light_every_calls": 0},
     "none", "nothing_due", False, False),
    ("light_time", {"last_checkpoint_at": NOW - 600}, {}, "light", "light_time", False, False),
    ("light_time_no_checkpoint", {"last_checkpoint_at": None, "last_full_at": None}, {},
     "light", "light_time", False, False),
    ("light_time_uses_later_full", {"last_checkpoint_at": NOW - 700, "last_full_at": NOW - 5},
     {}, "none", "nothing_due", False, False),
    ("demoted_full_outranks_light", {"calls_since": 50, "next_step_risk": "high", **SLOW}, {},
     "light", "five_percent_rule", False, True),
]
# fmt: on


@pytest.mark.parametrize(
    ("signals", "policy", "tier", "rule", "forced", "pending"),
    [pytest.param(*row[1:], id=row[0]) for row in TABLE],
)
def test_decision_table(
    signals: dict[str, Any],
    policy: dict[str, Any],
    tier: str,
    rule: str,
    forced: bool,
    pending: bool,
) -> None:
    d = decide(sig(**signals), Policy.from_mapping(policy))
    assert (d.tier, d.rule, d.forced, d.full_pending) == (tier, rule, forced, pending)
    assert d.reasons and all(isinstance(r, str) and r for r in d.reasons)


def test_table_covers_every_rule() -> None:
    rules = {row[4] for row in TABLE}
    expected = {
        "step_end",
        "budget_exhausting",
        "rate_limit",
        "budget_threshold_0.80",
        "pre_expensive_step",
        "full_pending",
        "steps",
        "light_calls",
        "light_time",
        "min_full_gap",
        "five_percent_rule",
        "nothing_due",
    }
    assert expected <= rules


def test_demotions_say_so() -> None:
    d = decide(sig(next_step_risk="high", snapshot_cost_seconds=2.1, next_step_seconds=30.0))
    assert d.demoted_from == "pre_expensive_step"
    assert any("full demoted to light: snapshot 2.1 s > 5% of 30 s step" in r for r in d.reasons)
    g = decide(sig(next_step_risk="high", last_full_at=NOW - 30))
    assert g.demoted_from == "pre_expensive_step"
    assert any("last full checkpoint 30 s ago < min gap 120 s" in r for r in g.reasons)


def test_other_rules_are_listed_and_usage_reported() -> None:
    d = decide(sig(tokens_used=99_000, token_budget=100_000, next_step_cost=5_000, calls_since=20))
    assert d.rule == "budget_exhausting"
    assert d.usage == pytest.approx(0.99)
    assert any(r.startswith("also light_calls:") for r in d.reasons)
    assert any(r.startswith("also budget_threshold_0.95:") for r in d.reasons)


def test_to_json_is_json() -> None:
    s = sig(next_step_risk="high", **SLOW)
    d = decide(s)
    data = json.loads(json.dumps({"decision": d.to_json(), "signals": s.to_json()}))
    assert data["decision"]["tier"] == "light"
    assert data["decision"]["rule"] == "five_percent_rule"
    assert data["decision"]["full_pending"] is True
    assert data["decision"]["reasons"] == list(d.reasons)
    assert data["signals"]["next_step_risk"] == "high"
    assert data["signals"]["snapshot_cost_seconds"] == 3.0


def test_usage_share_takes_the_larger_share() -> None:
    assert usage_share(sig()) is None
    assert usage_share(sig(tokens_used=50, token_budget=100, calls_used=9, calls_budget=10)) == 0.9


def test_decide_is_deterministic() -> None:
    s = sig(calls_since=12, next_step_risk="high", full_pending=True, **SLOW)
    assert decide(s) == decide(s)


# Policy <-> [policy] table


def test_policy_defaults_round_trip_through_toml() -> None:
    mapping = DEFAULT_POLICY.to_mapping()
    assert set(mapping) == set(POLICY_DOCS)
    assert mapping["budget_thresholds"] == [0.8, 0.95]
    parsed = tomllib.loads(tomli_w.dumps({"policy": mapping}))["policy"]
    assert Policy.from_mapping(parsed) == DEFAULT_POLICY


def test_from_mapping_coerces_ignores_unknown_and_sorts() -> None:
    p = Policy.from_mapping(
        {"light_every_seconds": 60, "budget_thresholds": [0.95, 0.5, 0.5], "future_key": "x"}
    )
    assert p.light_every_seconds == 60.0 and isinstance(p.light_every_seconds, float)
    assert p.budget_thresholds == (0.5, 0.95)
    assert p.light_every_calls == DEFAULT_POLICY.light_every_calls


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("light_every_calls", "10"),
        ("light_every_calls", 1.5),
        ("light_every_calls", True),
        ("light_every_seconds", "600"),
        ("pre_expensive_step", 1),
        ("budget_thresholds", 0.8),
        ("budget_thresholds", [0.8, "x"]),
        ("budget_thresholds", [True]),
        ("budget_thresholds", [1.5]),
        ("budget_thresholds", [0.0]),
        ("budget_margin", -0.1),
        ("min_full_gap_seconds", float("inf")),
        ("rate_limit_floor", -1),
    ],
)
def test_from_mapping_rejects_bad_values_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        Policy.from_mapping({key: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("calls_since", -1),
        ("token_budget", 0),
        ("next_step_cost", float("nan")),
        ("now", float("inf")),
        ("next_step_risk", "extreme"),
        ("rate_limit_unit", "bytes"),
    ],
)
def test_signals_reject_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        sig(**{field: value})


# Hypothesis properties

RISKS = (None, *RISK_ORDER)


def _ago(limit: float) -> st.SearchStrategy[float | None]:
    return st.none() | st.floats(-5.0, limit).map(lambda x: NOW - x)


def opt_int(hi: int) -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(0, hi)


def opt_float(hi: float) -> st.SearchStrategy[float | None]:
    return st.none() | st.floats(0.0, hi)


@st.composite
def signals_st(draw: st.DrawFn) -> Signals:
    return Signals(
        now=NOW,
        last_checkpoint_at=draw(_ago(2_000.0)),
        last_full_at=draw(_ago(2_000.0)),
        calls_since=draw(st.integers(0, 30)),
        steps_since=draw(st.integers(0, 4)),
        tokens_used=draw(opt_int(250_000)),
        token_budget=draw(st.none() | st.integers(1, 200_000)),
        calls_used=draw(opt_int(120)),
        calls_budget=draw(st.none() | st.integers(1, 100)),
        usage_at_last_checkpoint=draw(opt_float(1.2)),
        rate_limit_remaining=draw(opt_int(10_000)),
        rate_limit_reset=draw(opt_float(120.0)),
        rate_limit_unit=draw(st.sampled_from(("requests", "tokens"))),
        next_step_risk=draw(st.sampled_from(RISKS)),
        next_step_cost=draw(opt_float(100_000.0)),
        next_step_calls=draw(opt_int(20)),
        next_step_seconds=draw(opt_float(600.0)),
        snapshot_cost_seconds=draw(opt_float(30.0)),
        at_step_end=draw(st.booleans()),
        full_pending=draw(st.booleans()),
        at_step_boundary=draw(st.booleans()),
    )


policies = st.builds(
    Policy,
    light_every_calls=st.integers(0, 20),
    light_every_seconds=st.floats(0.0, 1_000.0),
    full_every_steps=st.integers(0, 3),
    pre_expensive_step=st.booleans(),
    expensive_step_cost=st.floats(0.0, 100_000.0),
    budget_margin=st.floats(0.0, 1.0),
    budget_thresholds=st.lists(st.floats(0.01, 1.0), max_size=3).map(tuple),
    min_full_gap_seconds=st.floats(0.0, 600.0),
    max_snapshot_share=st.floats(0.0, 0.5),
    min_calls_left=st.integers(0, 3),
    rate_limit_floor=st.integers(0, 3),
) | st.just(DEFAULT_POLICY)


@PROPS
@given(signals_st(), policies)
def test_monotone_in_risk(s: Signals, p: Policy) -> None:
    tiers = [rank(decide(replace(s, next_step_risk=r), p)) for r in RISKS]
    assert tiers == sorted(tiers)


def sweep(budget: int, *extra: int) -> list[int]:
    """Usage values from 0 to 110% of the budget in 1% steps, plus drawn ones, ascending."""
    return sorted({*extra, *(budget * k // 100 for k in range(111))})


@PROPS
@given(signals_st(), policies, st.integers(1, 200_000), st.integers(0, 250_000))
def test_monotone_in_token_use(s: Signals, p: Policy, budget: int, extra: int) -> None:
    used = sweep(budget, extra)
    tiers = [rank(decide(replace(s, token_budget=budget, tokens_used=u), p)) for u in used]
    assert tiers == sorted(tiers)


@PROPS
@given(signals_st(), policies, st.integers(1, 100), st.integers(0, 120))
def test_monotone_in_call_use(s: Signals, p: Policy, budget: int, extra: int) -> None:
    used = sweep(budget, extra)
    tiers = [rank(decide(replace(s, calls_budget=budget, calls_used=u), p)) for u in used]
    assert tiers == sorted(tiers)


@PROPS
@given(
    signals_st(),
    policies,
    st.integers(1, 200_000),
    st.integers(0, 250_000),
    st.floats(0.0, 300_000.0),
)
def test_full_when_budget_left_below_next_cost(
    s: Signals, p: Policy, budget: int, used: int, cost: float
) -> None:
    s = replace(s, token_budget=budget, tokens_used=used, next_step_cost=cost)
    d = decide(s, p)
    if budget - used < cost:
        assert d.tier == "full" and d.forced
    if budget - used <= 0:
        assert d.tier == "full" and d.forced


@PROPS
@given(signals_st(), policies)
def test_no_full_within_min_gap_unless_forced(s: Signals, p: Policy) -> None:
    d = decide(s, p)
    if s.last_full_at is not None and 0 <= s.now - s.last_full_at < p.min_full_gap_seconds:
        assert d.tier != "full" or d.forced


@PROPS
@given(signals_st(), policies, st.floats(0.0, 1.0))
def test_unforced_full_waits_for_the_gap(s: Signals, p: Policy, share: float) -> None:
    # Nothing quota-related or step_end: no rule may force, so nothing is full within the gap.
    s = replace(s, at_step_end=False, rate_limit_remaining=None, tokens_used=None, calls_used=None)
    s = replace(s, last_full_at=s.now - share * p.min_full_gap_seconds)
    d = decide(s, p)
    assert not d.forced
    assert s.last_full_at is not None
    if s.now - s.last_full_at < p.min_full_gap_seconds:
        assert d.tier != "full"


@PROPS
@given(signals_st(), policies)
def test_step_end_always_full(s: Signals, p: Policy) -> None:
    d = decide(replace(s, at_step_end=True), p)
    assert (d.tier, d.rule, d.forced, d.full_pending) == ("full", "step_end", True, False)


@PROPS
@given(signals_st(), policies)
def test_decision_invariants(s: Signals, p: Policy) -> None:
    d = decide(s, p)
    assert d.tier in TIER_ORDER and d.reasons
    assert not d.forced or d.tier == "full"
    assert not d.full_pending or d.tier != "full"
    if s.full_pending and d.tier != "full":
        assert d.full_pending  # a debt is never silently dropped
    assert (d.demoted_from is not None) == (d.rule in ("min_full_gap", "five_percent_rule"))
    assert json.loads(json.dumps(d.to_json()))["rule"] == d.rule


@PROPS
@given(policies)
def test_policy_mapping_round_trip(p: Policy) -> None:
    assert Policy.from_mapping(tomllib.loads(tomli_w.dumps(p.to_mapping()))) == p
