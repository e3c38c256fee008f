"""A custom agent harness on the `git ckpt` Python API: a tiny scripted "agent" loop.

Run it inside a git repository (it writes `results/` there):

    python examples/custom_harness.py            # or: --repo PATH

The first run starts task `ablation` (four steps), works through them with
`ck.step(...)`, logs every model call and feeds its token counts to `ck.tick(...)`
(the trigger policy decides when to checkpoint), and stops when the high-risk step
`run-ablation-2` raises (a simulated out-of-memory): the step is logged failed with the
exception, and the harness exits with status 1. Run it again: done steps are skipped,
the failed step is retried (and succeeds), and the task ends done. Look at what it left:

    git ckpt task show ablation
    git ckpt log ablation
    git ckpt list ablation
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from git_agentckpt.api import Checkpointer, StepRun
from git_agentckpt.errors import CkptError

TASK = "ablation"
GOAL = "Run two ablations of the baseline and report the difference"
STEPS = [
    ("fetch-data", "Fetch the evaluation set", "low"),
    ("run-ablation-1", "Ablation 1: no attention dropout", "medium"),
    ("run-ablation-2", "Ablation 2: half the layers", "high"),
    ("report", "Report the difference", "low"),
]
TOKEN_BUDGET = 30_000


class ScriptedModel:
    """Stands in for the model: a canned answer and the token counts of each call. The
    usage so far (an earlier run's too) is what the event log holds."""

    def __init__(self, ck: Checkpointer) -> None:
        calls = [e for e in ck.events(TASK) if e.type == "model.call"]
        self.calls = len(calls)
        self.tokens = sum(int(e.data["input_tokens"]) + int(e.data["output_tokens"]) for e in calls)

    def complete(self, prompt: str) -> tuple[str, int, int]:
        self.calls += 1
        tokens_in, tokens_out = 2_000 + 150 * self.calls, 400
        self.tokens += tokens_in + tokens_out
        return f"plan for: {prompt}", tokens_in, tokens_out


def ask(ck: Checkpointer, model: ScriptedModel, prompt: str) -> str:
    """One model call: logged as an event, then the trigger policy is asked (`tick`)."""
    reply, tokens_in, tokens_out = model.complete(prompt)
    ck.event(
        TASK,
        "model.call",
        {"input": prompt, "output": reply, "input_tokens": tokens_in, "output_tokens": tokens_out},
    )
    decided = ck.tick(
        TASK, tokens_used=model.tokens, token_budget=TOKEN_BUDGET, calls_used=model.calls
    )
    if decided.checkpoint is not None:
        print(f"  tick: {decided.decision.tier} checkpoint ({decided.decision.rule})")
    return reply


def work(ck: Checkpointer, model: ScriptedModel, step_id: str, run: StepRun, out: Path) -> None:
    """The step's work: a model call or two, then a file written."""
    plan = ask(ck, model, f"how to do {step_id}")
    if step_id == "run-ablation-2" and run.started.data.get("mode") == "start":
        raise MemoryError("CUDA out of memory while allocating 2.5 GiB (simulated)")
    ask(ck, model, f"check the result of {step_id}")
    result = {"step": step_id, "plan": plan, "score": round(0.7 + 0.01 * len(step_id), 3)}
    (out / f"{step_id}.json").write_text(json.dumps(result, indent=2) + "\n")
    run.outputs = {"file": f"results/{step_id}.json", "score": result["score"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A scripted agent loop on the git ckpt API.")
    parser.add_argument("--repo", default=".", help="the git repository to work in")
    args = parser.parse_args(argv)
    ck = Checkpointer.open(args.repo)
    if TASK not in {t.name for t in ck.tasks()}:
        ck.task_start(TASK, GOAL, steps=[(sid, title) for sid, title, _ in STEPS])
        print(f"started task {TASK}")
    out = Path(ck.repo.workdir) / "results"
    out.mkdir(exist_ok=True)
    model = ScriptedModel(ck)
    status = {s["id"]: s["status"] for s in ck.state(TASK)["steps"]}
    for step_id, _title, risk in STEPS:
        if status[step_id] == "done":
            print(f"{step_id}: done before, skipped")
            continue
        try:
            with ck.step(step_id, task=TASK, risk=risk) as run:
                work(ck, model, step_id, run, out)
        except MemoryError as exc:  # logged as the step's failure by ck.step; we stop here
            print(f"{step_id}: failed ({exc}); run the harness again to retry it")
            return 1
        assert run.checkpoint is not None
        print(f"{step_id}: {run.started.data['mode']} -> done, checkpoint {run.checkpoint.id}")
    print(f"task {TASK} is {ck.state(TASK)['status']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CkptError as exc:  # the tool's refusals: one line, as `git ckpt` prints them
        print(f"custom_harness: error: {exc.one_line()}", file=sys.stderr)
        sys.exit(int(exc.exit_status))
