"""`git ckpt check` and workspace verification, side by side with `git status`.

The budgets: `git ckpt check` under 200 ms on a 10k-file repository with 10
built-in constraints (issue 4); workspace verification ≤ 1.2× `git status`
(design section 8). The reference is git's own `git status --porcelain` on the
same repository, in the same rounds, alternating which runs first; it runs with
GIT_OPTIONAL_LOCKS=0 (as all our git calls do), so it never refreshes
`.git/index`.

Runs last, on the suite's repository: everything earlier sections changed is
committed together with a contract of 10 constraints (one of each built-in kind
but `command`) and the files they check, then a task is started (its baseline
is that commit). Every round first modifies 20 files and adds 2 (the suite's
`Mutator`), so the stat caches work as in real use. Verification is measured
against a checkpoint made just before those changes (resume's usual case), and
against the task's first checkpoint with every round's changes piled up.

Not tests: pytest never collects these files (`bench_*.py`); `benchmarks/run.sh` runs them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pstats
import subprocess
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_check_child import MAIN, OPEN, RUN, SCRIPT
from bench_lib import (
    Mutator,
    Row,
    Series,
    alternate,
    cli_path,
    cli_python,
    git,
    median,
    paired,
    run_cli,
    start_server,
)
from bench_profile import frame_label, git_subcommand

if TYPE_CHECKING:
    from git_agentckpt.api import Checkpointer

CHECK_BUDGET_MS = 200.0
VERIFY_BUDGET = 1.2
TASK = "bench-check"

_CONTRACT = """\
# 10 constraints, one of each built-in kind but `command` (benchmarks/bench_check.py)
constraints:
  - id: seed42
    text: Experiments must use seed 42
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: layers
    text: The model keeps 4 layers
    check: {kind: yaml_value, file: params.yaml, path: model.layers, equals: 4}
  - id: project-name
    text: The project is still called bench
    check: {kind: toml_value, file: settings.toml, path: project.name, equals: bench}
  - id: public-api
    text: Do not change the public interface
    check: {kind: protected_paths, paths: ["api/**"]}
  - id: raw-data-read-only
    text: Raw data is read-only
    check: {kind: forbidden_paths, paths: ["data/raw/**"]}
  - id: data-present
    text: The training data stays where the config says
    check: {kind: file_exists, file: data/raw/train.csv}
  - id: readme-seed
    text: The README states the seed
    check: {kind: file_contains, file: README.md, text: "seed 42"}
  - id: predict-defined
    text: api/public.py defines predict()
    check: {kind: file_matches, file: api/public.py, regex: "^def predict\\\\("}
  - id: data-pinned
    text: The training data is the pinned version
    check: {kind: file_sha256, file: data/raw/train.csv, sha256: "%(sha)s"}
  - id: small-diffs
    text: Keep changes reviewable
    severity: warn
    check: {kind: max_changed_files, max: 100000}
"""
N_CONSTRAINTS = 10


def write_contract(repo: Path) -> None:
    """The contract and the files it checks, committed with whatever else changed."""
    files = {
        "config.json": json.dumps(
            {"train": {"seed": 42, "epochs": 10, "lr": 0.001}, "data": "data/raw/train.csv"},
            indent=2,
        )
        + "\n",
        "params.yaml": "model:\n  name: resnet\n  layers: 4\n  dropout: 0.1\n",
        "settings.toml": '[project]\nname = "bench"\nversion = "1.0.0"\n',
        "api/__init__.py": "from api.public import predict\n",
        "api/public.py": "def predict(x):\n    return x\n",
        "README.md": "# bench\n\nExperiments use seed 42 (config.json).\n",
        "data/raw/train.csv": "id,x,y\n" + "".join(f"{i},{i * 0.5},{i % 7}\n" for i in range(4000)),
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    sha = hashlib.sha256(files["data/raw/train.csv"].encode()).hexdigest()
    contracts = repo / ".agent" / "contracts"
    contracts.mkdir(parents=True, exist_ok=True)
    (contracts / "constraints.yaml").write_text(_CONTRACT % {"sha": sha})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "contract for the check benchmark")


@dataclass
class CheckBench:
    check: Series = field(default_factory=Series)  # in-process run_check_now
    git_check: Series = field(default_factory=Series)  # git status, same rounds
    cli: Series = field(default_factory=Series)  # git-ckpt -C repo check TASK (warm server)
    git_cli: Series = field(default_factory=Series)
    cli_cold: Series = field(default_factory=Series)  # the same, GIT_CKPT_SERVER=off
    git_cli_cold: Series = field(default_factory=Series)
    verify: Series = field(default_factory=Series)  # in-process verify_workspace
    git_verify: Series = field(default_factory=Series)
    verify_far: Series = field(default_factory=Series)  # against the task's first checkpoint
    git_verify_far: Series = field(default_factory=Series)
    drift_far: int = 0
    changed: int = 0  # paths changed against the baseline at the end
    drift: int = 0  # verify: source differences found at the end
    status_lines: int = 0  # lines of `git status --porcelain` at the end
    startup: dict[str, Series] = field(default_factory=dict)


# What the CLI `check` imports before it does any work (`python -c ...`).
_IMPORTS = {
    "python start-up (`python -c pass`)": "pass",
    "+ every import `check` needs (CLI, facade, pygit2, contracts engine, yaml)": (
        "import git_agentckpt.cli.main, git_agentckpt.api, git_agentckpt.contracts.engine"
    ),
}


def bench_check(
    ck: Checkpointer, repo: Path, mut: Mutator, rounds: int, env: Mapping[str, str]
) -> CheckBench:
    from git_agentckpt.contracts.engine import run_check_now
    from git_agentckpt.recovery.verify import verify_workspace
    from git_agentckpt.store.refs import TaskName

    write_contract(repo)
    ck.task_start(TASK, "keep the contract while benchmarking")
    res = CheckBench()
    status = functools.partial(git, repo, "status", "--porcelain")

    def in_process() -> None:
        outcome = run_check_now(ck, TaskName(TASK))
        if outcome.report.counts["pass"] != N_CONSTRAINTS:
            raise RuntimeError(f"check did not pass: {outcome.to_json()}")
        res.changed = outcome.changed

    mut.step()
    in_process()  # warm-up; and every constraint must pass
    status()
    for i in range(rounds):
        mut.step()
        alternate(i, functools.partial(res.check.add, in_process), _add(res.git_check, status))

    argv = [cli_path(), "-C", str(repo), "check", TASK]
    cli = functools.partial(run_cli, argv, env)
    cold = functools.partial(
        run_cli, argv, {**env, "GIT_CKPT_SERVER": "off", "GIT_CKPT_DAEMON": "off"}
    )
    mut.step()
    cold()  # warm-up (exit status 0: every block constraint passed)
    start_server(env, repo)  # this work tree's daemon (bench_cli may have started it)
    mut.step()
    cli()  # handed to the daemon
    for i in range(rounds):  # rounds of their own: they share the private index
        mut.step()
        alternate(i, functools.partial(res.cli.add, cli), _add(res.git_cli, status))
        mut.step()
        alternate(i, functools.partial(res.cli_cold.add, cold), _add(res.git_cli_cold, status))

    first = ck.store.tip(TaskName(TASK))  # the task's start: changes pile up against it
    if first is None:
        raise RuntimeError(f"task {TASK} has no checkpoint")
    settings = ck.settings

    def verify_against(tree: str, into: list[int]) -> Callable[[], None]:
        def verify() -> None:
            v = verify_workspace(
                ck.repo, tree, settings.regenerable, settings.secret_paths, clean=False
            )
            into.append(len(v.source))

        return verify

    drift: list[int] = []
    for i in range(rounds + 1):  # the first round warms up
        made = ck.create(task=TASK, message=f"verify base {i}", light=False)  # untimed
        mut.step()  # 20 modified + 2 new since that checkpoint; git status sees the same
        verify = verify_against(made.tree, drift)
        if i == 0:
            verify()
            continue
        alternate(i, functools.partial(res.verify.add, verify), _add(res.git_verify, status))
    res.drift = drift[-1]
    piled: list[int] = []
    verify_first = verify_against(first.tree, piled)
    verify_first()  # warm-up
    for i in range(rounds):
        mut.step()
        alternate(
            i, functools.partial(res.verify_far.add, verify_first), _add(res.git_verify_far, status)
        )
    res.drift_far = piled[-1]
    res.status_lines = len(status().splitlines())

    for label, code in _IMPORTS.items():
        run = functools.partial(run_cli, [cli_python(), "-c", code], env)
        run()
        res.startup[label] = Series()
        for _ in range(rounds):
            res.startup[label].add(run)
    return res


def _add(series: Series, fn: Callable[[], object]) -> Callable[[], None]:
    return functools.partial(series.add, fn)


def check_rows(files: int, res: CheckBench) -> list[Row]:
    n = f"{files:,} files"
    under = f"< {CHECK_BUDGET_MS:.0f} ms" + ("" if files >= 10000 else " (set for 10k files)")
    git_note = (
        "git = `git status --porcelain` in the same rounds, alternating which runs first "
        "(GIT_OPTIONAL_LOCKS=0: it does not refresh `.git/index`)"
    )
    rows = [
        Row.of(
            f"`git ckpt check`, 10 built-in constraints, {n}, 20 modified + 2 new per round "
            "(in-process `run_check_now`)",
            res.check,
            res.git_check,
            budget=under,
            ok=res.check.med < CHECK_BUDGET_MS,
            note=f"{git_note}; {res.changed} paths changed against the task's baseline at the "
            "end; every check writes its `constraint.check` event. Per-round ratios: "
            f"{paired(res.check.wall, res.git_check.wall)}",
        ),
        Row.of(
            f"`git ckpt check` via the CLI (`git-ckpt -C repo check {TASK}`, subprocess), "
            "handed to the warm server (the default once a first call started it)",
            res.cli,
            res.git_cli,
            budget=under,
            ok=res.cli.med < CHECK_BUDGET_MS,
            note=f"rounds of its own (it shares the private index with the in-process row); "
            f"{git_note}. Bytecode cached, as when installed. Per-round ratios: "
            f"{paired(res.cli.wall, res.git_cli.wall)}",
        ),
        Row.of(
            "`git ckpt check` via the CLI in its own process (GIT_CKPT_SERVER=off: Python "
            "start-up and every import each call)",
            res.cli_cold,
            res.git_cli_cold,
            note="rounds interleaved with the row above; the cost a first call pays, and "
            f"every call where the server is off. Per-round ratios: "
            f"{paired(res.cli_cold.wall, res.git_cli_cold.wall)}",
        ),
    ]
    for label, series in res.startup.items():
        rows.append(Row.of(f"`check` CLI start-up parts: {label}", series))
    rows.append(
        Row.of(
            f"workspace verification, {n}, 20 modified + 2 new since the checkpoint "
            "(in-process `verify_workspace` against the tip made just before, `clean=False`)",
            res.verify,
            res.git_verify,
            budget=f"≤ {VERIFY_BUDGET:.2f}× git status",
            ok=res.verify.med <= VERIFY_BUDGET * res.git_verify.med,
            note=f"{git_note}; each round first makes a full checkpoint (untimed), then "
            f"changes 22 files; {res.drift} source differences found in the last round, "
            f"{res.status_lines} `git status` lines at the end (nothing is ever committed). "
            f"Per-round ratios: {paired(res.verify.wall, res.git_verify.wall)}",
        )
    )
    rows.append(
        Row.of(
            f"workspace verification, {n}, against the task's first checkpoint: changes "
            "piling up (in-process `verify_workspace`, `clean=False`)",
            res.verify_far,
            res.git_verify_far,
            note=f"{res.drift_far} source differences at the end, in every directory: the "
            "expected tree differs from the private index there, which `git status` never "
            "compares (its index matches HEAD), so this costs more than `git status` by "
            "nature. Per-round ratios: "
            f"{paired(res.verify_far.wall, res.git_verify_far.wall)}",
        )
    )
    return rows


# -- where the CLI `check` spends its time ------------------------------------------------

CHILD = Path(__file__).resolve().parent / "bench_check_child.py"
# two parts derived from the child's (see `bench_check_child` for the others)
REST = "· the rest (read the baseline commit, build the context)"
CLICK = "click, output, exit (`main()` − the above)"


def _child(mode: str, out: str, repo: Path, env: Mapping[str, str]) -> dict[str, Any]:
    argv = [cli_python(), str(CHILD), mode, out, "-C", str(repo), "check", TASK]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    with open(out + ".json", encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    os.unlink(out + ".json")
    if doc["exit"] not in (0, None):
        raise RuntimeError(f"the CLI check in {CHILD.name} exited {doc['exit']}")
    return doc


def profile_cli_check(
    repo: Path,
    mut: Mutator,
    rounds: tuple[int, int],
    env: Mapping[str, str],
    res: CheckBench,
    out: Path,
) -> tuple[str, dict[str, Any]]:
    """Where the CLI `check` spends its time: `rounds[0]` runs of `bench_check_child.py`
    timing its parts (unprofiled; medians), then `rounds[1]` runs under cProfile."""
    parts: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds[0]):
        mut.step()
        doc = _child("timers", str(out), repo, env)
        ms_run: dict[str, float] = doc["ms"]
        inner = ms_run.get(RUN, 0.0)
        ms_run[REST] = inner - sum(v for k, v in ms_run.items() if k.startswith("· "))
        ms_run[CLICK] = ms_run[MAIN] - inner - ms_run.get(OPEN, 0.0)
        for k, v in ms_run.items():
            parts[k].append(v)
        seen: dict[str, float] = defaultdict(float)
        for argv, ms in doc["calls"]:
            seen[git_subcommand(argv) if argv[0] == "git" else argv[0]] += ms
        for k, v in seen.items():
            parts[f"subprocess: {k}"].append(v)
    med = {k: median(v) for k, v in parts.items()}
    py = res.startup[next(iter(_IMPORTS))].med
    known = [k for k in med if k.startswith("· ") and k != REST]
    cli, script = res.cli_cold.med, med[SCRIPT]
    lines = [
        "",
        f"## Where the CLI `check` spends its time ({rounds[0]} timed runs, {rounds[1]} profiled)",
        "",
        f"The CLI `check` in its own process (GIT_CKPT_SERVER=off): {cli:.1f} ms (median), "
        f"which the warm server brings to {res.cli.med:.1f} ms (budget {CHECK_BUDGET_MS:.0f} ms: "
        + ("met" if res.cli.med < CHECK_BUDGET_MS else "**not** met")
        + "). `benchmarks/bench_check_child.py` runs "
        "the same command in a child with its parts timed by wrappers (no profiler; medians "
        "of each part, so they need not add up exactly); python's start-up is the "
        "`python -c pass` row. The same check in a warm process (the in-process row) takes "
        f"{res.check.med:.1f} ms.",
        "",
        "| part | ms | share of the CLI |",
        "|---|---:|---:|",
        f"| python start-up (`python -c pass`) | {py:.1f} | {py / cli:.0%} |",
    ]
    # (label, depth): the parts of `main()` are indented under it
    order = [(k, 0) for k in med if k.startswith("import")]
    order += [(MAIN, 0), (OPEN, 1), (RUN, 1), *((k, 2) for k in known), (REST, 2), (CLICK, 1)]
    order += [(SCRIPT, 0)]
    overlap = [k for k in med if k.startswith(("regular", "subprocess"))]
    pad = {0: "", 1: "↳ ", 2: "↳ ↳ "}

    def row(k: str, depth: int = 0) -> str:
        return f"| {pad[depth]}{k.removeprefix('· ')} | {med[k]:.1f} | {med[k] / cli:.0%} |"

    lines += [row(k, d) for k, d in order if k in med]
    lines.append(
        f"| python start-up + this script (≈ the CLI row) | {py + script:.1f} "
        f"| {(py + script) / cli:.0%} |"
    )
    lines += ["| *inside `main()`, counted above as well:* | | |", *map(row, overlap)]

    files = []
    for i in range(rounds[1]):
        mut.step()
        files.append(f"{out}.{i}")
        _child("profile", files[-1], repo, env)
    summary = Path(f"{out}.txt")
    with summary.open("w") as fh:
        stats = pstats.Stats(*files, stream=fh)
        stats.sort_stats("cumulative").print_stats(60)
        stats.sort_stats("tottime").print_stats(30)
    for f in files:
        os.unlink(f)
    entries: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    n = len(files)
    by_self = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:10]
    ours = [kv for kv in entries.items() if "git_agentckpt/" in kv[0][0]]
    by_cum = sorted(ours, key=lambda kv: kv[1][3], reverse=True)[:12]
    lines += ["", "cProfile of the whole child (ms per run, mean; the profiler inflates "]
    lines[-1] += "Python-heavy work such as imports and regex compilation):"
    lines += ["", "| heaviest by self time | self ms | cumulative ms |", "|---|---:|---:|"]
    lines += [
        f"| `{frame_label(k)}` | {v[2] * 1000 / n:.2f} | {v[3] * 1000 / n:.2f} |"
        for k, v in by_self
    ]
    lines += ["", "| our functions by cumulative time | cumulative ms |", "|---|---:|"]
    lines += [f"| `{frame_label(k)}` | {v[3] * 1000 / n:.2f} |" for k, v in by_cum]
    lines += ["", f"(pstats of the profiled runs: `{summary.name}`.)"]
    doc_out = {
        "cli_ms": round(cli, 3),
        "python_startup_ms": round(py, 3),
        "parts_ms": {k: round(v, 3) for k, v in med.items()},
    }
    return "\n".join(lines) + "\n", doc_out
