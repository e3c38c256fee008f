"""Issue 10, item 12: a tick checkpoint taken during a step records the step; a tick
reason names the rule that fired; an error is printed once per channel, and as JSON
only when the command's own output option asked for JSON."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git
from helpers import ckpt, ckpt_json

from git_agentckpt.triggers import Signals, decide


def calls(repo: Path, n: int) -> None:
    for i in range(n):
        ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps({"i": i}))


def test_a_tick_checkpoint_during_a_step_records_the_step(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:one", "--step", "s2:two")
    ckpt(repo, "step", "start", "t", "s1")
    calls(repo, 10)
    out = ckpt_json(repo, "tick", "t")
    assert out["rule"] == "light_calls" and out["checkpoint"]["step"] == "s1"
    commit = out["checkpoint"]["commit"]
    assert "Step: s1" in git(repo, "log", "-1", "--format=%B", commit)
    assert ckpt_json(repo, "list", "t")[0]["step"] == "s1"
    ckpt(repo, "step", "done", "t", "s1")
    calls(repo, 10)
    between = ckpt_json(repo, "tick", "t")  # no step runs now
    assert between["checkpoint"] is not None and between["checkpoint"]["step"] is None


def test_other_proposals_are_named_after_the_rule_that_fired() -> None:
    """A high-risk next step inside the minimum gap while a budget threshold forces a
    full: the pre-expensive proposal is `also pre_expensive_step`, never `also
    min_full_gap`, and its demotion is not listed under a full decision."""
    s = Signals(
        now=1000,
        last_checkpoint_at=990,
        last_full_at=990,
        tokens_used=90,
        token_budget=100,
        next_step_risk="high",
    )
    d = decide(s)
    assert (d.tier, d.rule) == ("full", "budget_threshold_0.80")
    assert "also pre_expensive_step: full before the step: next step is high-risk" in d.reasons
    assert not any(r.startswith("also min_full_gap") for r in d.reasons)
    assert not any("demoted to light" in r for r in d.reasons)


def test_a_demoted_proposal_among_lights_keeps_its_demotion_under_its_own_rule() -> None:
    s = Signals(
        now=1000,
        last_checkpoint_at=990,
        last_full_at=990,
        full_pending=True,
        at_step_boundary=True,
        steps_since=1,
    )
    d = decide(s)
    assert (d.tier, d.rule, d.demoted_from) == ("light", "min_full_gap", "full_pending")
    assert "also steps: 1 finished steps since the last full >= 1" in d.reasons
    assert any(r.startswith("also steps: full demoted to light") for r in d.reasons)


def test_tick_text_says_which_rule_a_demotion_lowered(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    out = ckpt(repo, "tick", "t", "--next-step-risk", "high").stdout
    assert out.startswith("light (min_full_gap, demoted from pre_expensive_step)")
    later = ("--now", "4000000000", "--next-step-risk", "high", "--next-step-seconds", "0.001")
    slow = ckpt(repo, "tick", "t", *later).stdout  # any snapshot costs > 5% of 1 ms
    assert slow.startswith("light (five_percent_rule, demoted from pre_expensive_step)")
    assert "of 0.001 s step" in slow  # (was "of 0 s step")


def test_a_bad_event_payload_is_one_text_error_and_no_json(repo: Path) -> None:
    """`event --json` takes a payload, not an output format: on main a bad payload also
    printed a JSON error document on stdout."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    result = ckpt(repo, "event", "t", "--type", "tool.call", "--json", "{bad", ok=False)
    assert result.exit_code == 2
    assert result.stdout == ""
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("git ckpt: error: --json payload")


def test_a_json_option_value_elsewhere_does_not_switch_errors_to_json(repo: Path) -> None:
    result = ckpt(repo, "task", "start", "t", "--goal", "--json", "--constraint", "x", ok=False)
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_commands_own_json_option_gives_one_json_error_and_one_text_line(repo: Path) -> None:
    result = ckpt(repo, "check", "nosuch", "--json", ok=False)
    assert result.exit_code == 3
    (line,) = result.stdout.splitlines()
    assert json.loads(line)["exit"] == 3 and "no task 'nosuch'" in json.loads(line)["error"]
    (err,) = result.stderr.strip().splitlines()
    assert err.startswith("git ckpt: error: no task 'nosuch'")
    nested = ckpt(repo, "step", "done", "nosuch", "s1", "--json", ok=False)  # a subgroup
    assert json.loads(nested.stdout)["exit"] == 3
