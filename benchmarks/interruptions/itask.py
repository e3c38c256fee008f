"""The research task of the interruption benchmark: its files, its contract, its steps.

Eight steps of a small ablation study. Every step is a short list of actions, and every
action writes one file (one "tool call" of the agent); what it writes is a pure function
of the repository's files, the seed of the data, and the constraints the agent has in its
context when it acts. An agent that has forgotten a constraint does what a model without
it would plausibly do (writes its favourite seed 7, cleans the raw data in place, tidies
the public API, rounds scores to two decimals): each of these breaks one constraint of the
contract, and changes the final tree.

Kept small on purpose: a run is about forty `git ckpt` calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

TASK = "study"
GOAL = "Run the dropout and depth ablations of the tiny model and report them"
FORGOTTEN_SEED = 7  # what a model writes when nobody told it "seed 42"


@dataclass(frozen=True)
class Constraint:
    id: str
    text: str


CONSTRAINTS = (
    Constraint("seed42", "Experiments must use seed 42"),
    Constraint("api-frozen", "Do not modify the public API under src/api"),
    Constraint("raw-readonly", "Raw data under data/raw is read-only"),
    Constraint("four-decimals", "Every reported score keeps four decimals"),
)
CONSTRAINT_IDS = tuple(c.id for c in CONSTRAINTS)
TEXTS = {c.id: c.text for c in CONSTRAINTS}

CHECKER = "tools/check_results.py"
CHECK_ARGV = [sys.executable, CHECKER]

CONTRACT = f"""\
constraints:
  - id: seed42
    text: {TEXTS["seed42"]}
    severity: block
    check: {{kind: json_value, file: configs/train.json, path: train.seed, equals: 42}}
  - id: api-frozen
    text: {TEXTS["api-frozen"]}
    severity: block
    check: {{kind: protected_paths, paths: ["src/api/**"]}}
  - id: raw-readonly
    text: {TEXTS["raw-readonly"]}
    severity: block
    check: {{kind: forbidden_paths, paths: ["data/raw/**"]}}
  - id: four-decimals
    text: {TEXTS["four-decimals"]}
    severity: block
    check: {{kind: command, argv: {json.dumps(CHECK_ARGV)}, timeout: 30}}
"""

PROSE = """# Rules of this study

Report every run in results/runs.csv, failed runs included.
"""

CHECK_RESULTS = '''\
"""Every score under results/ has four decimals (the `four-decimals` constraint)."""
import json
import pathlib
import sys

bad = []
for path in sorted(pathlib.Path("results").glob("*.json")):
    score = json.loads(path.read_text())["score"]
    if len(score.partition(".")[2]) != 4:
        bad.append(f"{path}: {score}")
print("\\n".join(bad) or "ok")
sys.exit(1 if bad else 0)
'''


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    actions: tuple[str, ...]
    run: str | None = None  # the experiment this step runs (a mid-step checkpoint first)


STEPS = (
    Step("s1", "prepare the data", ("processed", "data_notes")),
    Step("s2", "write the training config", ("train_config",)),
    Step("s3", "change the model", ("model",)),
    Step("s4", "add the features", ("features", "feature_test")),
    Step("s5", "run the baseline", ("runs_row", "result"), run="baseline"),
    Step("s6", "ablation: no dropout", ("run_config", "runs_row", "result"), run="no-dropout"),
    Step("s7", "ablation: half the layers", ("run_config", "runs_row", "result"), run="half"),
    Step("s8", "write the table and the report", ("table", "report")),
)
STEP_IDS = tuple(s.id for s in STEPS)
BY_ID = {s.id: s for s in STEPS}
RUN_CHANGES: dict[str, dict[str, object]] = {
    "baseline": {},
    "no-dropout": {"dropout": 0.0},
    "half": {"layers": 2},
}


def write_project(root: Path, seed: int) -> None:
    """The repository before the task: sources, a public API, raw data (gitignored)."""
    rng = random.Random(seed)
    rows = "".join(f"{i},{rng.randint(0, 999)} ,{rng.random():.6f}\n" for i in range(40))
    files = {
        "README.md": "# tiny study\n",
        ".gitignore": "data/\n*.log\n__pycache__/\n",
        "src/api/public.py": "def predict(x):\n    return x\n",
        "src/model.py": "LAYERS = 2\nDROPOUT = 0.1\n",
        "configs/train.json": json.dumps({"train": {"seed": 42, "lr": 0.1}}, indent=2) + "\n",
        CHECKER: CHECK_RESULTS,
        "data/raw/train.csv": "id,x,y\n" + rows,
        ".agent/contracts/constraints.yaml": CONTRACT,
        ".agent/contracts/constraints.md": PROSE,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _read(root: Path, rel: str, default: str = "") -> str:
    try:
        return (root / rel).read_text(encoding="utf-8")
    except OSError:
        return default


def _score(*parts: str) -> float:
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return 0.7 + (int(digest[:8], 16) % 2500) / 10000


def _config(root: Path, rel: str) -> dict[str, object]:
    try:
        loaded = json.loads(_read(root, rel, "{}"))
    except json.JSONDecodeError:
        loaded = {}
    train = loaded.get("train") if isinstance(loaded, dict) else None
    return dict(train) if isinstance(train, dict) else {}


def act(root: Path, step: Step, action: str, known: frozenset[str]) -> list[str]:
    """Do one action of `step` with the constraints in `known`; the paths written."""
    run = step.run or "baseline"
    out: dict[str, str] = {}
    if action == "processed":
        raw = _read(root, "data/raw/train.csv")
        cleaned = "".join(line.replace(" ,", ",") + "\n" for line in raw.splitlines())
        out["data/processed/train.csv"] = cleaned
        if "raw-readonly" not in known:  # "clean it where it lies"
            out["data/raw/train.csv"] = cleaned
    elif action == "data_notes":
        lines = _read(root, "data/processed/train.csv").count("\n") - 1
        out["notes/data.md"] = f"# data\n\n{lines} rows, whitespace removed.\n"
    elif action == "train_config":
        seed = 42 if "seed42" in known else FORGOTTEN_SEED
        train = {"seed": seed, "lr": 0.01, "layers": 4, "dropout": 0.1}
        out["configs/train.json"] = json.dumps({"train": train}, indent=2) + "\n"
    elif action == "model":
        layers = _config(root, "configs/train.json").get("layers", 2)
        out["src/model.py"] = f"LAYERS = {layers}\nDROPOUT = 0.1\n"
        if "api-frozen" not in known:  # "while I am here, expose the depth"
            out["src/api/public.py"] = "def predict(x, layers=None):\n    return x\n"
    elif action == "features":
        out["src/features.py"] = "def features(row):\n    return [row['x'], row['y']]\n"
    elif action == "feature_test":
        out["tests/test_features.py"] = "def test_two():\n    assert True\n"
    elif action == "run_config":
        changed = {**_config(root, "configs/train.json"), **RUN_CHANGES[run]}
        out[f"configs/{run}.json"] = json.dumps({"train": changed}, indent=2) + "\n"
    elif action in ("runs_row", "result"):
        rel = "configs/train.json" if run == "baseline" else f"configs/{run}.json"
        config = json.dumps(_config(root, rel), sort_keys=True)
        score = _score(config, _read(root, "data/processed/train.csv"), _read(root, "src/model.py"))
        shown = f"{score:.4f}" if "four-decimals" in known else f"{score:.2f}"
        if action == "runs_row":  # an append-only log: a redone append is a duplicate row
            old = _read(root, "results/runs.csv", "run,score\n")
            out["results/runs.csv"] = old + f"{run},{shown}\n"
        else:
            out[f"results/{run}.json"] = json.dumps({"run": run, "score": shown}) + "\n"
    elif action == "table":
        rows = []
        for name in RUN_CHANGES:
            try:
                shown = json.loads(_read(root, f"results/{name}.json"))["score"]
                rows.append(f"| {name} | {shown} |")
            except (json.JSONDecodeError, KeyError):
                rows.append(f"| {name} | missing |")
        out["results/table.md"] = "| run | score |\n|---|---|\n" + "\n".join(rows) + "\n"
    elif action == "report":
        table = _read(root, "results/table.md", "(no table)\n")
        out["report.md"] = f"# Report\n\n{GOAL}.\n\n{table}"
    else:
        raise ValueError(f"unknown action {action}")
    for rel, text in out.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sorted(out)


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` but `.git` (ignored data included)."""
    digests: dict[str, str] = {}
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in files:
            path = Path(base) / name
            rel = path.relative_to(root).as_posix()
            digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests
