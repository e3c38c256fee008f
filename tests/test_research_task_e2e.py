"""End to end: a research task interrupted in each way the design names, resumed, and the
brief checked for the facts it must state (issue 10, "What must be shown").

The task: four steps (read papers, change the model, run the ablations, write the
report), a tracked config with the seed, a gitignored data directory whose training
file is a key input, results written by the steps, a contract with a value check, a
protected path and a (trusted) command check, and prose rules in constraints.md.
Interruptions: killed mid-step, a quota cut, a silent compaction followed by drift,
files changed while away, the key input changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from helpers import BIN_DIR, KILLED, ckpt, ckpt_json, forge_event, write

from git_agentckpt.contracts.engine import repo_identity
from git_agentckpt.contracts.trust import TrustStore
from git_agentckpt.git.repo import GitRepo

SMOKE = [sys.executable, "-c", "import json; json.load(open('config.json'))"]
CONTRACT = f"""\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {{kind: json_value, file: config.json, path: train.seed, equals: 42}}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
    check: {{kind: protected_paths, paths: ["src/api/**"]}}
  - id: smoke
    text: The config still parses
    severity: warn
    check: {{kind: command, argv: {json.dumps(SMOKE)}, timeout: 30}}
"""
PROSE = """# Rules of this project

Never push to main on a Friday.
Results tables keep four decimals.
"""
CONSTRAINT_TEXTS = [
    "[seed42] (block) Experiments must use seed 42",
    "[api-frozen] (block) Do not modify the public API under src/api",
    "[smoke] (warn) The config still parses",
]


@pytest.fixture
def task(repo: Path) -> Path:
    """s1 and s2 done, s3 started and partly run (results/run1.csv written)."""
    ckpt(repo, "init")
    write(repo / ".agent" / "contracts" / "constraints.yaml", CONTRACT)
    write(repo / ".agent" / "contracts" / "constraints.md", PROSE)
    write(repo / ".gitignore", "*.log\nbuild/\ndata/\n")
    write(repo / "config.json", '{"train": {"seed": 42, "lr": 0.1}}\n')
    write(repo / "src" / "api" / "public.py", "def predict(x): ...\n")
    write(repo / "src" / "model.py", "LAYERS = 2\n")
    write(repo / "data" / "train.csv", "x,y\n1,2\n")
    ckpt(repo, "config", "set", "env.key_inputs", '["data/train.csv"]')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "research project")
    TrustStore().approve(repo_identity(GitRepo.discover(str(repo))), SMOKE)
    steps = ["s1:read the papers", "s2:change the model", "s3:run the ablations"]
    args = ["task", "start", "t", "--goal", "Reproduce table 2 with a 3-layer model"]
    for s in [*steps, "s4:write the report"]:
        args += ["--step", s]
    ckpt(repo, *args, "--constraint", "seed42", "--constraint", "api-frozen")
    ckpt(repo, "step", "start", "t", "s1")
    ckpt(repo, "event", "t", "--type", "tool.call", "--json", '{"input": "read A", "output": "ok"}')
    ckpt(repo, "step", "done", "t", "s1", "--output", '{"papers": 2}')
    ckpt(repo, "step", "start", "t", "s2")
    write(repo / "src" / "model.py", "LAYERS = 3\n")
    ckpt(repo, "step", "done", "t", "s2", "--output", '{"layers": 3}')
    ckpt(repo, "step", "start", "t", "s3")
    write(repo / "results" / "run1.csv", "seed,score\n42,0.9100\n")
    ckpt(
        repo,
        "event",
        "t",
        "--type",
        "tool.call",
        "--json",
        '{"input": "python train.py --run 1", "output": "score 0.91"}',
    )
    return repo


def resume(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = ckpt(repo, "resume", "t", "--json", *args, ok=False)
    return result.exit_code, json.loads(result.stdout)


def assert_always_stated(out: dict[str, Any], next_step: str) -> str:
    """What every brief states: every constraint and prose rule verbatim, the steps done
    with their outputs, the next step, the budget, and how to continue."""
    md = str(out["brief_markdown"])
    for text in CONSTRAINT_TEXTS:
        assert text in md
    assert PROSE.rstrip("\n") in md
    assert "s1 [done]: read the papers (done: do not redo)" in md
    assert '"papers": 2' in md and '"layers": 3' in md
    assert f"**Next step:** {next_step}" in md
    assert out["brief"]["next_step"] == next_step
    assert "## Budget" in md
    return md


def test_killed_mid_step(task: Path) -> None:
    env = {**os.environ, "GIT_CKPT_CRASH_AT": "checkpoint.ref"}  # killed mid-checkpoint
    killed = subprocess.run(
        [os.path.join(BIN_DIR, "git-ckpt"), "create", "-t", "t", "--light"], cwd=task, env=env
    )
    assert killed.returncode in KILLED
    code, out = resume(task)
    assert code == 10  # results/run1.csv is work of the unfinished step: a person decides
    code, out = resume(task, "--restore")
    assert code == 0, out["message"]
    md = assert_always_stated(out, "s3")
    assert "step s3 was started and not finished" in md
    assert "`results/run1.csv`: deleted (restore)" in md
    assert out["brief"]["recovery"]["safety_checkpoint"] in md
    assert out["brief"]["recovery"]["steps_reset_to_pending"] == ["s3"]
    assert not (task / "results" / "run1.csv").exists()
    assert "python train.py --run 1" in md  # the agent's own last work


def test_quota_cut(task: Path) -> None:
    ckpt(task, "tick", "t", "--tokens-used", "96000", "--token-budget", "100000")
    ckpt(task, "event", "t", "--type", "quota.exceeded", "--json", '{"error": "429 quota"}')
    code, out = resume(task, "--accept-drift")  # keep run1.csv: the agent may reuse it
    assert code == 0, out["message"]
    md = assert_always_stated(out, "s3")
    assert "tokens used: 96000 of 100000 (4000 left)" in md
    assert "the last session stopped: #" in md and "429 quota" in md
    assert "`results/run1.csv`: kept (accept drift)" in md
    note = ckpt_json(task, "show", out["resume_checkpoint"]["id"])["state"]
    assert note["usage"]["tokens_used"] == 96000


def test_compaction_then_drift(task: Path) -> None:
    # after a silent compaction the agent forgets: it restarts done step s1 and
    # changes the seed
    forge_event(task, "t", "step.start", {"step": "s1"})
    write(task / "config.json", '{"train": {"seed": 7, "lr": 0.1}}\n')
    code, out = resume(task, "--accept-drift")
    assert code == 14, out["message"]  # recovered, but a block constraint fails
    assert out["outcome"] == "not_ready" and "seed42" in out["message"]
    md = assert_always_stated(out, "s3")  # never s1: it is done
    assert any(
        "step.start of a done step" in d for d in out["brief"]["recovery"]["suspected_drift"]
    )
    failing = out["brief"]["recovery"]["constraints_failing"]
    assert [c["id"] for c in failing] == ["seed42"]
    assert "[seed42] (block)" in md.split("constraints failing now", 1)[1]


def test_files_changed_while_away(task: Path) -> None:
    ckpt(task, "create", "-t", "t", "-m", "mid-step")  # a light one would not be a start
    write(task / "src" / "model.py", "LAYERS = 4  # a person's edit\n")
    code, out = resume(task)
    assert code == 10 and "src/model.py" in str(out["verify"]["source_drift"])
    code, out = resume(task, "--restore")
    assert code == 0, out["message"]
    md = assert_always_stated(out, "s3")
    assert "`src/model.py`: restored (restore)" in md
    safety = out["brief"]["recovery"]["safety_checkpoint"]
    tree = ckpt_json(task, "show", safety)["checkpoint"]["tree"]
    assert "a person's edit" in git(task, "cat-file", "-p", f"{tree}:src/model.py")
    assert (task / "src" / "model.py").read_text() == "LAYERS = 3\n"


def test_key_input_changed(task: Path) -> None:
    write(task / "data" / "train.csv", "x,y\n1,3\n")  # the training data changed under s1, s2
    code, out = resume(task, "--accept-drift")
    assert code == 11, out["message"]  # no checkpoint vouches for the new data
    message = str(out["message"])
    assert "data/train.csv" in message
    assert "done steps that ran with the pinned value: s1, s2" in message
    write(task / "data" / "train.csv", "x,y\n1,2\n")  # the person puts the data back
    code, out = resume(task, "--accept-drift")
    assert code == 0, out["message"]
    assert_always_stated(out, "s3")
