"""Read-modify-write of the task state happens under the task's lock (issue 9, item 3).

`step done` in one process while another takes light checkpoints in a loop: no
acknowledged completion may come back as `in_progress` or `pending`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git_agentckpt

STEPPER = """
import sys, git_agentckpt
ck = git_agentckpt.open(sys.argv[1])
for i in range(int(sys.argv[2])):
    ck.step_start("race", f"s{i}")
    ck.step_done("race", f"s{i}", outputs={"i": i})
    print(f"s{i}", flush=True)
"""

LIGHT_LOOP = """
import os, sys, git_agentckpt
ck = git_agentckpt.open(sys.argv[1])
stop = sys.argv[2]
n = 0
print("ready", flush=True)
while not os.path.exists(stop):
    ck.create(task="race", message=f"light {n}", light=True, force=True)
    n += 1
print(n, flush=True)
"""


def _race(repo: Path, steps: int, loopers: int) -> tuple[list[str], int]:
    ck = git_agentckpt.open(str(repo))
    ck.task_start("race", "g", steps=[(f"s{i}", f"step {i}") for i in range(steps)])
    stop = repo.parent / "stop"
    lights = [
        subprocess.Popen(
            [sys.executable, "-c", LIGHT_LOOP, str(repo), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(loopers)
    ]
    for p in lights:  # every looper has opened the repository and is about to loop
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    stepper = subprocess.run(
        [sys.executable, "-c", STEPPER, str(repo), str(steps)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    stop.write_text("")
    made = 0
    for p in lights:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        made += int(out.split()[-1])
    assert stepper.returncode == 0, stepper.stderr
    return stepper.stdout.split(), made


def test_step_completions_racing_light_checkpoints_are_never_lost(
    repo: Path, long_run: bool
) -> None:
    steps = 60 if long_run else 12
    acknowledged, made = _race(repo, steps, loopers=2 if long_run else 1)
    assert acknowledged == [f"s{i}" for i in range(steps)]
    assert made > 0  # the loop did run against the completions
    ck = git_agentckpt.open(str(repo))
    state = ck.state("race")
    lost = [s["id"] for s in state["steps"] if s["status"] != "done"]
    assert lost == []
    assert state["status"] == "done"
    # the tip's note itself says so (not only the replay of events after it)
    tip = ck.checkpoints("race")[0]
    note = ck.store.state_note(tip.commit)
    assert note is not None
    assert [s["status"] for s in note["steps"]] == ["done"] * steps
    # every step's outputs survived too
    assert [s["outputs"] for s in note["steps"]] == [{"i": i} for i in range(steps)]
