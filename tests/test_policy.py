"""tick, the checkpoint policy end to end, step boundaries, and `config get|set`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from conftest import git
from helpers import ckpt, ckpt_json, write

from git_agentckpt.triggers import Policy


def decisions(repo: Path, task: str = "t") -> list[dict[str, object]]:
    lines = ckpt(repo, "log", task, "--json").stdout.splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "trigger.decision"]


def test_init_writes_policy_defaults_and_config_round_trips(repo: Path) -> None:
    ckpt(repo, "init")
    path = repo / ".agent" / "ckpt.toml"
    doc = tomllib.loads(path.read_text())
    assert Policy.from_mapping(doc["policy"]) == Policy()
    with path.open("a") as fh:
        fh.write("\n[custom]\n# mine, untouched\nanswer = 42\n")
    before = path.read_text()
    out = ckpt_json(repo, "config", "set", "policy.light_every_calls", "3")
    assert out["kept_comments"] is True
    after = path.read_text()
    assert ckpt(repo, "config", "get", "policy.light_every_calls").stdout.strip() == "3"
    # only the one line changed; every comment and the unknown table are kept
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [("light_every_calls = 10", "light_every_calls = 3")]
    assert "# mine, untouched" in after and tomllib.loads(after)["custom"]["answer"] == 42
    ckpt(repo, "config", "set", "policy.budget_thresholds", "[0.5, 0.9]")
    assert tomllib.loads(path.read_text())["policy"]["budget_thresholds"] == [0.5, 0.9]
    ckpt(repo, "config", "set", "--add", "custom.name", "text value")  # a table of mine
    assert ckpt(repo, "config", "get", "custom.name").stdout.strip() == "text value"
    bad = ckpt(repo, "config", "set", "policy.light_every_calls", "many", ok=False)
    assert bad.exit_code == 2 and "must be an integer" in bad.stderr
    assert tomllib.loads(path.read_text())["policy"]["light_every_calls"] == 3
    assert ckpt(repo, "config", "get", "nope.key", ok=False).exit_code == 3


def test_config_set_keeps_comments_around_a_multi_line_value(repo: Path) -> None:
    """A value over several lines (where the hand-written editor rewrote the whole file
    and dropped every comment) is replaced in place; the rest stays byte for byte."""
    ckpt(repo, "init")
    path = repo / ".agent" / "ckpt.toml"
    with path.open("a") as fh:
        fh.write(
            '\n[extra]\n# the list below\nlist = [\n  "a",  # first\n  "b",\n]\n'
            "# after the list\nkept = true  # trailing\n"
        )
    before = path.read_text()
    ckpt(repo, "config", "set", "extra.list", '["c"]')
    after = path.read_text()
    assert tomllib.loads(after)["extra"] == {"list": ["c"], "kept": True}
    assert "# the list below" in after and "# after the list" in after
    assert "kept = true  # trailing" in after
    head = before.split("[extra]")[0]
    assert after.startswith(head)  # everything before the edited table is unchanged
    ckpt(repo, "config", "set", "--add", "deep.nested.key", "7")
    assert tomllib.loads(path.read_text())["deep"]["nested"]["key"] == 7
    bad = ckpt(repo, "config", "set", "extra.kept.x", "1", ok=False)
    assert bad.exit_code == 2 and "extra.kept.x" in bad.stderr


def test_tick_counts_calls_from_the_log(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g")
    assert ckpt_json(repo, "tick", "t")["tier"] == "none"
    ckpt_json(repo, "tick", "t")
    for i in range(10):
        ckpt(repo, "event", "t", "--type", "tool.call", "--json", json.dumps({"i": i}))
    out = ckpt_json(repo, "tick", "t")
    assert out["tier"] == "light" and out["rule"] == "light_calls"
    assert out["signals"]["calls_since"] == 10
    assert out["checkpoint"]["kind"] == "light" and out["checkpoint"]["trigger"] == "light_calls"
    again = ckpt_json(repo, "tick", "t")
    assert again["tier"] == "none" and again["signals"]["calls_since"] == 0
    logged = decisions(repo)
    assert [d["data"]["decision"]["rule"] for d in logged] == [  # type: ignore[index]
        "nothing_due",
        "nothing_due",
        "light_calls",
        "nothing_due",
    ]
    assert logged[2]["links"]["checkpoint"] == out["checkpoint"]["commit"]  # type: ignore[index]


def test_fifty_calls_with_a_shrinking_budget(repo: Path) -> None:
    """Light checkpoints in between, full ones at 80% and 95%, and one right before the end."""
    ckpt(repo, "task", "start", "t", "--goal", "g")
    import git_agentckpt

    ck = git_agentckpt.open(str(repo))
    budget, per_call, tiers = 100_000, 2_000, []
    for call in range(1, 51):
        ck.append_events("t", [{"type": "tool.call", "input": {"call": call}}])
        result = ck.tick(
            "t", tokens_used=call * per_call, token_budget=budget, next_step_cost=3_000
        )
        tiers.append((call, result.decision.tier, result.decision.rule))
    fulls = [(c, r) for c, t, r in tiers if t == "full"]
    lights = [c for c, t, _ in tiers if t == "light"]
    assert (40, "budget_threshold_0.80") in fulls
    assert (48, "budget_threshold_0.95") in fulls
    # 98k used of 100k: the next call (3k) would not fit: full before running out
    assert (49, "budget_exhausting") in fulls and (50, "budget_exhausting") in fulls
    assert not [c for c, _ in fulls if c < 40]
    assert lights[:3] == [10, 20, 30]
    logged = decisions(repo)
    assert len(logged) == 50
    last = logged[-2]["data"]
    assert last["signals"]["tokens_used"] == 98_000  # type: ignore[index]
    assert any("would not cover" in r or "left" in r for r in last["decision"]["reasons"])  # type: ignore[index]
    chain = ckpt_json(repo, "list", "t")
    assert chain[0]["trigger"] == "budget_exhausting" and chain[0]["kind"] == "full"


def test_five_percent_rule_on_a_slow_repository(repo: Path) -> None:
    for i in range(1500):
        write(repo / "data" / f"d{i % 30}" / f"f{i}.txt", f"{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many files")
    ckpt(repo, "init")
    ckpt(repo, "config", "set", "policy.min_full_gap_seconds", "0")
    ckpt(repo, "task", "start", "t", "--goal", "g")  # a full checkpoint: measures the cost
    cost = json.loads((repo / ".git" / "agent" / "snapshot-cost.json").read_text())
    assert cost["ewma_seconds"] > 0
    short_step = cost["ewma_seconds"] * 5  # the snapshot costs 20% of this step
    out = ckpt_json(
        repo, "tick", "t", "--next-step-risk", "high", "--next-step-seconds", f"{short_step:.6f}"
    )
    d = out["decision"]
    assert out["tier"] == "light" and d["rule"] == "five_percent_rule"
    assert d["demoted_from"] == "pre_expensive_step" and d["full_pending"] is True
    assert any("5%" in r for r in d["reasons"])
    # the owed full checkpoint comes at the next step boundary
    boundary = ckpt_json(
        repo, "tick", "t", "--step-boundary", "--next-step-seconds", f"{short_step:.6f}"
    )
    assert boundary["tier"] == "full" and boundary["rule"] == "full_pending"
    assert boundary["signals"]["full_pending"] is True
    after = ckpt_json(repo, "tick", "t", "--step-boundary")
    assert after["signals"]["full_pending"] is False


def test_step_boundaries(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:a", "--step", "s2:b")
    ev = ckpt_json(repo, "step", "start", "t", "s1", "--risk", "high")
    pre = ckpt_json(repo, "show", "t")["checkpoint"]
    assert pre["trigger"] == "pre_expensive_step" and pre["kind"] == "full"
    assert ev["data"]["checkpoint"] == pre["commit"]
    done = ckpt_json(repo, "step", "done", "t", "s1")
    assert done["trigger"] == "step_end" and done["kind"] == "full"
    ckpt(repo, "config", "set", "policy.pre_expensive_step", "false")
    ckpt(repo, "create", "-t", "t", "--state", '{"steps": [{"id": "s2", "risk": "high"}]}')
    tip = ckpt_json(repo, "show", "t")["checkpoint"]["commit"]
    ckpt(repo, "step", "start", "t", "s2")
    assert ckpt_json(repo, "show", "t")["checkpoint"]["commit"] == tip  # turned off


def test_tick_counts_finished_steps_since_the_last_full_checkpoint(repo: Path) -> None:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "s1:a", "--step", "s2:b")
    ckpt(repo, "create", "-t", "t", "--light")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "step", "fail", "t", "s1")  # a step.end (failed) without a full checkpoint
    out = ckpt_json(repo, "tick", "t", "--step-boundary", "--now", "9999999999")
    assert out["signals"]["steps_since"] == 1
    assert out["tier"] == "full" and out["rule"] == "steps"
