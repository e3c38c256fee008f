"""The Python API for custom harnesses (issue 13): `with ck.step(...)` and `ck.tick(...)`,
in process, and `examples/custom_harness.py` run as a script in a real repository."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import ckpt, ckpt_json

from git_agentckpt.api import Checkpointer
from git_agentckpt.errors import NotFound, UsageError

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "custom_harness.py"
SECRET = "sk-" + "ant-" + "api03-" + "Ab9_cD8-" * 11 + "AA"


def log(repo: Path, task: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in ckpt(repo, "log", task, "--json").stdout.splitlines()]


def started(repo: Path) -> Checkpointer:
    ckpt(repo, "task", "start", "t", "--goal", "g", "--step", "a:first", "--step", "b:second")
    return Checkpointer.open(str(repo))


def test_a_step_that_ends_is_done_with_its_outputs_and_checkpoint(repo: Path) -> None:
    ck = started(repo)
    with ck.step("a", risk="high") as run:  # the single active task
        assert run.started.data == {
            "mode": "start",
            "risk": "high",
            "checkpoint": run.started.data["checkpoint"],
        }
        (repo / "out.txt").write_text("result\n")
        run.outputs = {"file": "out.txt"}
    assert run.checkpoint is not None and run.checkpoint.trigger == "step_end"
    assert git(repo, "show", f"{run.checkpoint.commit}:out.txt") == "result"
    state = ckpt_json(repo, "task", "show", "t")
    assert state["steps"][0] == {
        **state["steps"][0],
        "status": "done",
        "outputs": {"file": "out.txt"},
    }
    events = [
        (e["type"], e.get("links", {}).get("step"), e.get("data", {}).get("status"))
        for e in log(repo, "t")
    ]
    assert ("step.start", "a", None) in events and ("step.end", "a", "done") in events
    triggers = [c["trigger"] for c in ckpt_json(repo, "list", "t")]
    assert triggers[:2] == ["step_end", "pre_expensive_step"]  # newest first


def test_an_exception_marks_the_step_failed_redacted_and_propagates(repo: Path) -> None:
    ck = started(repo)
    boom = ValueError(f"bad key {SECRET} in config")
    with pytest.raises(ValueError) as raised, ck.step("b", task="t"):
        raise boom
    assert raised.value is boom  # the block's own exception, unchanged
    end = [e for e in log(repo, "t") if e["type"] == "step.end"][-1]
    assert end["links"]["step"] == "b" and end["data"]["status"] == "failed"
    error = end["data"]["outputs"]["error"]
    assert error["type"] == "ValueError" and error["message"].startswith("bad key [REDACTED")
    assert SECRET not in json.dumps(log(repo, "t"))
    assert ckpt_json(repo, "task", "show", "t")["steps"][1]["status"] == "failed"
    with ck.step("b", task="t") as run:  # retried
        pass
    assert run.started.data["mode"] == "retry" and run.checkpoint is not None


def test_an_interrupt_leaves_the_step_in_progress_and_refusals_run_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ck = started(repo)
    with pytest.raises(KeyboardInterrupt), ck.step("a"):
        raise KeyboardInterrupt
    assert ckpt_json(repo, "task", "show", "t")["steps"][0]["status"] == "in_progress"
    assert not [e for e in log(repo, "t") if e["type"] == "step.end"]
    ran = []
    with pytest.raises(NotFound, match="no step 'zz'"), ck.step("zz"):
        ran.append(1)
    ckpt(repo, "task", "start", "u", "--goal", "other", "--step", "a:x")
    with pytest.raises(UsageError, match="2 active tasks"), ck.step("a"):
        ran.append(2)
    monkeypatch.setenv("GIT_CKPT_TASK", "u")
    with ck.step("a") as run:
        ran.append(3)
    assert ran == [3] and run.task == "u"
    assert ckpt_json(repo, "task", "show", "u")["status"] == "done"


def test_the_example_harness_fails_a_step_then_retries_it_and_finishes(repo: Path) -> None:
    def harness() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(EXAMPLE)], cwd=repo, capture_output=True, text=True, timeout=120
        )

    first = harness()
    assert first.returncode == 1, first.stderr
    assert "run-ablation-2: failed (CUDA out of memory" in first.stdout
    assert ckpt_json(repo, "task", "show", "ablation")["steps"][2]["status"] == "failed"
    second = harness()
    assert second.returncode == 0, second.stderr
    assert "fetch-data: done before, skipped" in second.stdout
    assert "run-ablation-2: retry -> done" in second.stdout
    assert second.stdout.rstrip().endswith("task ablation is done")

    state = ckpt_json(repo, "task", "show", "ablation")
    assert [s["status"] for s in state["steps"]] == ["done"] * 4 and state["status"] == "done"
    assert state["steps"][2]["outputs"] == {"file": "results/run-ablation-2.json", "score": 0.84}
    events = log(repo, "ablation")
    fails = [e for e in events if e["type"] == "step.end" and e["data"]["status"] == "failed"]
    assert [f["data"]["outputs"]["error"] for f in fails] == [
        {
            "type": "MemoryError",
            "message": "CUDA out of memory while allocating 2.5 GiB (simulated)",
        }
    ]
    modes = [e["data"]["mode"] for e in events if e["type"] == "step.start"]
    assert modes == ["start", "start", "start", "retry", "start"]
    calls = [e for e in events if e["type"] == "model.call"]
    assert len(calls) == 9 and calls[0]["data"] == {"input_tokens": 2150, "output_tokens": 400}
    decisions = [e["data"] for e in events if e["type"] == "trigger.decision"]
    assert [d["signals"]["calls_used"] for d in decisions] == list(range(1, 10))
    assert decisions[-1]["signals"]["tokens_used"] == sum(
        c["data"]["input_tokens"] + c["data"]["output_tokens"] for c in calls
    )
    triggers = [c["trigger"] for c in ckpt_json(repo, "list", "ablation")]
    assert triggers.count("step_end") == 4 and triggers.count("pre_expensive_step") == 2
    assert "budget_threshold_0.80" in triggers
    tip = ckpt_json(repo, "list", "ablation")[0]["commit"]
    report = json.loads(git(repo, "show", f"{tip}:results/report.json"))
    assert report["step"] == "report"
