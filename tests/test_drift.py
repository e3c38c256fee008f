"""The drift alarm: its three signals, each recorded once as `drift.suspected`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import ckpt, forge_event, write

import git_agentckpt.cli.commands_contracts  # noqa: F401  (registers check and trust)
from git_agentckpt.api import Checkpointer
from git_agentckpt.contracts.drift import (
    DRIFT_EVENT,
    REFUSED_START_EVENT,
    check_drift,
    context_tokens,
    detect_drift,
    recommendation,
    record_drift,
)
from git_agentckpt.contracts.engine import context_drop_setting, run_check_now
from git_agentckpt.errors import UsageError
from git_agentckpt.model import Event
from git_agentckpt.store.checkpoints import Extra
from git_agentckpt.store.refs import TaskName
from git_agentckpt.store.workspace import Resumed

T = TaskName("t")
SEED = (
    "constraints:\n"
    "  - {id: seed, text: seed 42,\n"
    "     check: {kind: json_value, file: c.json, path: seed, equals: 42}}\n"
)


@pytest.fixture
def task(repo: Path) -> Checkpointer:
    write(repo / "c.json", '{"seed": 42}')
    write(repo / ".agent/contracts/constraints.yaml", SEED)
    ck = Checkpointer.open(str(repo))
    ck.task_start("t", "reproduce table 2", [("s1", "read"), ("s2", "write")])
    return ck


def drift_events(ck: Checkpointer) -> list[Event]:
    return [e for e in ck.events("t") if e.type == DRIFT_EVENT]


def report(ck: Checkpointer, tokens: float, where: str = "usage") -> None:
    payloads: dict[str, dict[str, Any]] = {
        "usage": {"usage": {"context_tokens": tokens}},
        "flat": {"context_tokens": tokens},
        "output": {"output": {"usage": {"context_tokens": tokens}}},
    }
    payload = payloads[where]
    ck.event("t", "model.call", payload)


def test_constraint_that_held_and_now_fails(task: Checkpointer, repo: Path) -> None:
    ck = task
    assert run_check_now(ck, "t").drift == ()
    write(repo / "c.json", '{"seed": 7}')
    outcome = run_check_now(ck, "t")
    assert [s.signal for s in outcome.drift] == ["constraint_regressed"]
    assert outcome.recommendation == "git ckpt resume --brief-only t"
    (ev,) = drift_events(ck)
    assert ev.data["signal"] == "constraint_regressed"
    assert ev.data["subject"] == "seed"
    assert ev.data["recommendation"] == "git ckpt resume --brief-only t"
    previous_check = next(e for e in ck.events("t") if e.type == "constraint.check")
    assert ev.data["evidence"] == [previous_check.id]
    again = run_check_now(ck, "t")  # same evidence: no second alarm
    assert again.drift == () and again.recommendation is None
    assert len(drift_events(ck)) == 1


def test_a_constraint_failing_from_the_start_is_no_drift(task: Checkpointer, repo: Path) -> None:
    write(repo / "c.json", '{"seed": 7}')
    assert run_check_now(task, "t").drift == ()
    assert run_check_now(task, "t").drift == ()


def test_done_step_started_again_through_the_event_log(task: Checkpointer) -> None:
    ck = task
    ck.step_start("t", "s1")
    ck.step_done("t", "s1")
    run_check_now(ck, "t")
    ck.step_start("t", "s2")  # a pending step: fine
    assert detect_drift(ck.log, T) == []
    forge_event(Path(ck.repo.workdir), "t", "step.start", {"step": "s1"})  # e.g. a fetched log
    outcome = run_check_now(ck, "t")
    assert [(s.signal, s.subject) for s in outcome.drift] == [("step_redone", "s1")]
    (ev,) = drift_events(ck)
    assert ev.links["step"] == "s1"
    assert run_check_now(ck, "t").drift == ()
    assert len(drift_events(ck)) == 1


def test_refused_start_of_a_done_step_raises_the_alarm_at_once(task: Checkpointer) -> None:
    ck = task
    ck.step_start("t", "s1")
    ck.step_done("t", "s1")
    with pytest.raises(UsageError, match="step 's1' is done"):
        ck.step_start("t", "s1")
    refused, alarm = ck.events("t")[-2:]
    assert (refused.type, alarm.type) == (REFUSED_START_EVENT, DRIFT_EVENT)
    assert alarm.data["evidence"] == [refused.id]
    assert run_check_now(ck, "t").drift == ()  # already recorded: no duplicate
    assert len(drift_events(ck)) == 1
    ck.create("t", state={"steps": [{"id": "s2", "status": "skipped"}]})
    with pytest.raises(UsageError, match="step 's2' is skipped"):
        ck.step_start("t", "s2")  # refused and logged, but a skipped step is no drift
    assert ck.events("t")[-1].type == REFUSED_START_EVENT
    assert len(drift_events(ck)) == 1


def test_restarting_a_step_reopened_by_a_checkpoint_is_no_drift(task: Checkpointer) -> None:
    ck = task
    ck.step_start("t", "s1")
    ck.step_done("t", "s1")

    # what a resume does: a checkpoint whose note sets the step back to pending
    state = ck.state("t")
    state["steps"][0]["status"] = "pending"
    state["status"] = "recovering"
    ck.resume_checkpoint(T, Resumed("resume", state, [], None, lambda _made: Extra()))
    ck.step_start("t", "s1", force=True)
    assert detect_drift(ck.log, T) == []


def test_done_steps_carry_over_from_the_previous_check(task: Checkpointer) -> None:
    ck = task
    ck.step_start("t", "s1")
    ck.step_done("t", "s1")
    run_check_now(ck, "t")
    check = [e for e in ck.events("t") if e.type == "constraint.check"][-1]
    assert check.data["drift"]["done_steps"] == ["s1"]
    forge_event(Path(ck.repo.workdir), "t", "step.start", {"step": "s1"})
    assert [s.signal for s in detect_drift(ck.log, T)] == ["step_redone"]


@pytest.mark.parametrize("where", ["usage", "flat", "output"])
def test_context_size_drop(task: Checkpointer, where: str) -> None:
    ck = task
    report(ck, 100_000, where)
    report(ck, 120_000, where)
    report(ck, 70_000, where)  # -42%: below the default 50% share
    assert detect_drift(ck.log, T) == []
    report(ck, 30_000, where)  # -57%
    outcome = run_check_now(ck, "t")
    (signal,) = outcome.drift
    assert signal.signal == "context_drop"
    assert signal.extra == {"previous": 70_000, "current": 30_000}
    assert run_check_now(ck, "t").drift == ()
    assert len(drift_events(ck)) == 1


def test_context_drop_across_a_check_uses_the_carried_value(task: Checkpointer) -> None:
    ck = task
    report(ck, 100_000)
    run_check_now(ck, "t")
    report(ck, 10_000)
    assert [s.signal for s in detect_drift(ck.log, T)] == ["context_drop"]


def test_context_drop_share_is_configurable(task: Checkpointer, repo: Path) -> None:
    write(repo / ".agent/ckpt.toml", "[drift]\ncontext_drop = 0.9\n")
    ck = Checkpointer.open(str(repo))
    assert context_drop_setting(ck.settings) == 0.9
    report(ck, 100_000)
    report(ck, 20_000)
    assert run_check_now(ck, "t").drift == ()
    report(ck, 1_000)
    assert [s.signal for s in run_check_now(ck, "t").drift] == ["context_drop"]
    write(repo / ".agent/ckpt.toml", "[drift]\ncontext_drop = 2\n")
    with pytest.raises(UsageError, match="context_drop"):
        run_check_now(Checkpointer.open(str(repo)), "t")


def test_check_drift_between_checks_is_not_repeated(task: Checkpointer) -> None:
    ck = task
    report(ck, 100_000)
    report(ck, 1_000)
    assert len(check_drift(ck.log, T)) == 1
    assert check_drift(ck.log, T) == []
    assert run_check_now(ck, "t").drift == ()
    assert len(drift_events(ck)) == 1
    assert record_drift(ck.log, T, []) == []


def test_context_tokens_reading() -> None:
    def ev(**fields: Any) -> Event:
        return Event("01", 1, "", "t", "model.call", **fields)

    assert context_tokens(ev(data={"usage": {"context_tokens": 5}})) == 5
    assert context_tokens(ev(data={"context_tokens": 6.5})) == 6.5
    assert context_tokens(ev(output={"usage": {"context_tokens": 7}})) == 7
    assert context_tokens(ev(data={"context_tokens": True})) is None
    assert context_tokens(ev(data={"context_tokens": -1})) is None
    assert context_tokens(ev(data={"context_tokens": "9"})) is None
    assert context_tokens(ev()) is None


def test_recommendation_is_shell_safe() -> None:
    assert recommendation("a/b") == "git ckpt resume --brief-only a/b"
    assert recommendation("x;rm") == "git ckpt resume --brief-only 'x;rm'"


def test_each_signal_through_the_cli(task: Checkpointer, repo: Path) -> None:
    ck = task
    ckpt(repo, "check", "t")
    ck.step_start("t", "s1")
    ck.step_done("t", "s1")
    forge_event(repo, "t", "step.start", {"step": "s1"})
    ckpt(repo, "event", "t", "--type", "model.call", "--json", '{"usage": {"context_tokens": 9e4}}')
    ckpt(repo, "event", "t", "--type", "model.call", "--json", '{"usage": {"context_tokens": 9}}')
    write(repo / "c.json", '{"seed": 1}')
    result = ckpt(repo, "check", "t", "--json", ok=False)
    doc = json.loads(result.stdout)
    assert result.exit_code == 1
    assert sorted(d["signal"] for d in doc["drift"]) == [
        "constraint_regressed",
        "context_drop",
        "step_redone",
    ]
    assert doc["recommendation"] == "git ckpt resume --brief-only t"
    assert len(drift_events(ck)) == 3


def test_regression_of_a_constraint_whose_id_looks_secret(task: Checkpointer, repo: Path) -> None:
    write(repo / ".agent/contracts/constraints.yaml", SEED.replace("id: seed", "id: api_key"))
    assert run_check_now(task, "t").drift == ()
    write(repo / "c.json", '{"seed": 7}')
    assert [s.subject for s in run_check_now(task, "t").drift] == ["api_key"]
