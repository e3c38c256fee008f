"""Interruption benchmark: how much work is redone, and how many constraints are broken,
when an agent is interrupted and resumed with `git ckpt`'s five-step recovery, against a
restart from the last checkpoint without it.

For each seed, one plan of 1 to `--max-interruptions` interruptions at seeded moments of
the eight-step task of `itask.py` (kinds, steps and points drawn from the seed):

- `kill`: SIGKILL of the agent's whole process group, after an action whose result the
  transcript has not recorded yet, after a step's `step done` returned, or inside
  `step done` itself (the call dies at the crash point `step.end` or `checkpoint.ref`);
- `quota`: the agent reports a quota cut (a `quota` event, or the StopFailure hook with
  `rate_limit`) and its session ends;
- `compact`: the context is cut in place (a forgetful agent keeps its progress, not its
  constraints), and the work goes on.

After a kill or a quota cut the next session continues the transcript (the agent's memory
as it was flushed: a kill loses the last action's result), except with chance `--fresh`
(0.5; drawn per session from the seed) where the transcript is lost and the agent starts
with an empty context: no constraints, no progress.

The same plan runs under each variant of the recovery (a fresh repository each time):

- `full`: after a kill or a quota cut, `git ckpt resume` (with `--restore` when it stops
  for drifted files: the person's answer); the agent reads the brief and restates it until
  `confirm` accepts. After a compaction, the brief (`resume --brief-only`, or what the
  SessionStart `compact` hook returns).
- `no-confirm`: the same, but the harness confirms for the agent (a restatement made from
  the recorded state): nobody checks what the agent took in.
- `no-brief`: `resume` and `confirm`, but the agent never reads a brief: it restates from
  memory and learns from the refusals. Nothing after a compaction.
- `brief-only`: no verification: the last checkpoint's files are written back with plain
  git, then the agent reads `resume --brief-only`; no confirmation. The brief after a
  compaction.
- `baseline`: the last checkpoint's files written back with plain git; the agent goes on
  from what it remembers. Nothing after a compaction.

Everything else is the same in every variant: the checkpoints (step ends, a full one
before each run, the quota and pre-compaction ones), the event log and `git ckpt check`
after each step. The agent never acts on a check's result, so violations measure what the
recovery gave it. Driver `claude-code` runs `full` and `baseline` through the hook entry
point (`git ckpt hook claude-code EVENT` with Claude Code's payloads); for the baseline
the SessionStart hook's output is not read.

Figures per run (and their means per variant): final tree equal to the uninterrupted run
(every file but `.git`, the gitignored data included), redone-work ratio (step
executions / steps), executions of a step that was already done, constraint violations
after the first interruption (distinct constraint ids failing in a check after it), and
resumes confirmed by the agent's restatement. `git ckpt metrics --json` gives the same
figures from the event log where the command exists (printed beside ours).

Usage:

    .venv/bin/python benchmarks/interruptions/bench_interruptions.py [--seeds 20]
        [--variants full,baseline] [--drivers cli] [--skim 0.1] [--out DIR] [--no-plot]

The plot (`interruptions.png`, matplotlib) is skipped with a note when matplotlib is
missing: `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import itask  # noqa: E402

VARIANTS: dict[str, dict[str, bool]] = {
    "full": {"verify": True, "brief": True, "confirm": True},
    "no-confirm": {"verify": True, "brief": True, "confirm": False},
    "no-brief": {"verify": True, "brief": False, "confirm": True},
    "brief-only": {"verify": False, "brief": True, "confirm": False},
    "baseline": {"verify": False, "brief": False, "confirm": False},
}
HOOK_VARIANTS = ("full", "baseline")
MAX_SESSIONS = 24
KILL_CRASH_POINTS = ("step.end", "checkpoint.ref")


def seal(root: Path) -> None:
    """A temporary HOME (trust store, git config), no system git config, fixed identity."""
    home = root / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    for name in list(os.environ):
        if name.startswith("GIT_"):
            del os.environ[name]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
            "GIT_CKPT_WATCH": "off",
            "TZ": "UTC",
        }
    )
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


def git_ckpt_binary() -> str:
    beside = Path(sys.executable).with_name("git-ckpt")
    found = str(beside) if beside.exists() else shutil.which("git-ckpt")
    if not found:
        raise SystemExit("git-ckpt is not installed: pip install -e . first")
    return found


def run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, check=True
    )


# -- the plan -----------------------------------------------------------------------------


def plan_for(seed: int, max_k: int, n_steps: int) -> list[dict[str, Any]]:
    """1..max_k interruptions at distinct (step, point)s, drawn from the seed."""
    rng = random.Random(seed)
    k = rng.randint(1, max_k)
    chosen: list[dict[str, Any]] = []
    taken: set[tuple[str, str]] = set()
    while len(chosen) < k:
        kind = rng.choice(("kill", "quota", "compact"))
        step = rng.choice(itask.STEPS[:n_steps])
        points = [f"a{j}" for j in range(len(step.actions))]
        points += ["crash", "after"] if kind == "kill" else ["done"]
        point = rng.choice(points)
        where = (step.id, "done" if point == "crash" else point)
        if where in taken:
            continue
        taken.add(where)
        item = {"kind": kind, "step": step.id, "point": point}
        if point == "crash":
            item["crash"] = rng.choice(KILL_CRASH_POINTS)
        chosen.append(item)
    return chosen


# -- one run --------------------------------------------------------------------------------


def make_template(root: Path, seed: int, binary: str) -> Path:
    """The project, committed, with `git ckpt init` and the key config pinned."""
    repo = root / f"template-{seed}"
    repo.mkdir(parents=True)
    itask.write_project(repo, seed)
    run(["git", "init", "-q"], repo)
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-qm", "the study before the task"], repo)
    off = {"GIT_CKPT_SERVER": "off"}
    run([binary, "init"], repo, **off)
    run([binary, "config", "set", "env.key_inputs", '["configs/train.json"]'], repo, **off)
    return repo


def reference_tree(root: Path, seed: int, binary: str, n_steps: int) -> dict[str, str]:
    """The final tree of the uninterrupted run: every action with every constraint known."""
    repo = root / f"reference-{seed}"
    shutil.copytree(make_template(root / "ref", seed, binary), repo, symlinks=True)
    for step in itask.STEPS[:n_steps]:
        for action in step.actions:
            itask.act(repo, step, action, frozenset(itask.CONSTRAINT_IDS))
    return itask.tree_digest(repo)


def start_task(repo: Path, binary: str, n_steps: int) -> None:
    from git_agentckpt.contracts.engine import repo_identity
    from git_agentckpt.contracts.trust import TrustStore
    from git_agentckpt.git.repo import GitRepo

    # the person trusted the contract's command check (`git ckpt trust` at a terminal)
    TrustStore().approve(repo_identity(GitRepo.discover(str(repo))), itask.CHECK_ARGV)
    args = [binary, "task", "start", itask.TASK, "--goal", itask.GOAL]
    for step in itask.STEPS[:n_steps]:
        args += ["--step", f"{step.id}:{step.title}"]
    for cid in itask.CONSTRAINT_IDS:
        args += ["--constraint", cid]
    run(args, repo)


def plain_git_restore(repo: Path) -> str | None:
    """The baseline's restart: the last checkpoint's files written back by git itself."""
    tip = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", f"refs/agent/checkpoints/{itask.TASK}"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not tip:
        return None
    index = repo / ".git" / "bench-restore-index"
    run(["git", "read-tree", tip], repo, GIT_INDEX_FILE=str(index))
    run(["git", "checkout-index", "-a", "-f"], repo, GIT_INDEX_FILE=str(index))
    index.unlink()
    return tip


@dataclass
class Outcome:
    seed: int
    driver: str
    variant: str
    interruptions: int
    kinds: list[str]
    finished: bool = False
    tree_equal: bool = False
    executions: int = 0
    ratio: float = 0.0
    redone_done: int = 0
    violations: int = 0
    violating_checks: int = 0
    resumes: int = 0
    confirmed_first_try: int = 0
    confirmed_later: int = 0
    confirmed_by_harness: int = 0
    sessions: int = 0
    seconds: float = 0.0
    differing: list[str] = field(default_factory=list)
    metrics: dict[str, Any] | None = None


def run_one(
    root: Path,
    template: Path,
    reference: dict[str, str],
    seed: int,
    driver: str,
    variant: str,
    plan: list[dict[str, Any]],
    skim: float,
    binary: str,
    n_steps: int,
    fresh: float,
) -> Outcome:
    started = time.monotonic()
    work = root / f"{driver}-{variant}-{seed}"
    repo = work / "repo"
    shutil.copytree(template, repo, symlinks=True)
    start_task(repo, binary, n_steps)
    out = Outcome(seed, driver, variant, len(plan), [p["kind"] for p in plan])
    reason, session = "start", 0
    try:
        while session < MAX_SESSIONS:
            session += 1
            if reason != "start" and not VARIANTS[variant]["verify"]:
                plain_git_restore(repo)
            spec = {
                "repo": str(repo),
                "ctx": str(work / "ctx.json"),
                "trace": str(work / "trace.jsonl"),
                "fired": str(work / "fired.json"),
                "driver": driver,
                "variant": VARIANTS[variant],
                "reason": reason,
                "session": session,
                "plan": plan,
                "skim": skim,
                "seed": seed,
                "git_ckpt": binary,
                "steps": n_steps,
                "fresh": reason != "start"
                and random.Random(f"{seed}/fresh/{session}").random() < fresh,
            }
            (work / "spec.json").write_text(json.dumps(spec))
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "iagent.py"), str(work / "spec.json")],
                cwd=repo,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            assert proc.stdout is not None
            said = proc.stdout.readline().strip()
            if said == "KILL":
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                reason = "kill"
                continue
            code = proc.wait()
            if code == 75:
                reason = "quota"
                continue
            out.finished = code == 0
            break
        out.sessions = session
        score(out, work, repo, reference, binary, n_steps)
    finally:  # the work tree's daemon, started by the first call, goes with the run
        subprocess.run([binary, "daemon", "stop"], cwd=repo, capture_output=True)
    out.seconds = round(time.monotonic() - started, 2)
    return out


def score(
    out: Outcome, work: Path, repo: Path, reference: dict[str, str], binary: str, n_steps: int
) -> None:
    trace_file = work / "trace.jsonl"
    trace = (
        [json.loads(line) for line in trace_file.read_text().splitlines()]
        if (trace_file.exists())
        else []
    )
    final = itask.tree_digest(repo)
    out.differing = sorted(
        p for p in set(final) | set(reference) if final.get(p) != reference.get(p)
    )
    out.tree_equal = out.finished and not out.differing
    execs = [t for t in trace if t["kind"] == "exec"]
    out.executions = len(execs)
    out.ratio = round(len(execs) / n_steps, 4)
    out.redone_done = sum(1 for t in execs if t.get("refused"))
    first = next((i for i, t in enumerate(trace) if t["kind"] == "interrupt"), len(trace))
    after = [t for t in trace[first:] if t["kind"] == "check"]
    out.violations = len({c for t in after for c in t["failing"]})
    out.violating_checks = sum(1 for t in after if t["failing"])
    confirms = [t for t in trace if t["kind"] == "confirm"]
    out.resumes = len(confirms)
    out.confirmed_first_try = sum(
        1 for t in confirms if t["by"] == "agent" and t["passed"] and t["tries"] == 1
    )
    out.confirmed_later = sum(
        1 for t in confirms if t["by"] == "agent" and t["passed"] and t["tries"] > 1
    )
    out.confirmed_by_harness = sum(1 for t in confirms if t["by"] == "harness" and t["passed"])
    got = subprocess.run(
        [binary, "metrics", itask.TASK, "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CKPT_SERVER": "off"},
    )
    if got.returncode == 0:
        try:
            data = json.loads(got.stdout)
            task = data["tasks"][0]
            out.metrics = {
                "ratio": task["steps"]["ratio"],
                "violations_after": task["totals"]["violations_after"],
                "resumes": task["totals"]["resumes"],
                "confirmed_first_try": task["totals"]["confirmed_first_try"],
                "redone_done": task["totals"]["redone_done"],
            }
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            out.metrics = None


# -- the report -----------------------------------------------------------------------------


def mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 3) if values else 0.0


def summarise(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    rows = []
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.driver, o.variant), []).append(o)
    for (driver, variant), group in groups.items():
        resumes = sum(o.resumes for o in group)
        confirmed = sum(o.confirmed_first_try + o.confirmed_later for o in group)
        metrics = [o.metrics for o in group if o.metrics]
        rows.append(
            {
                "driver": driver,
                "variant": variant,
                "runs": len(group),
                "finished": sum(o.finished for o in group),
                "tree_equal": sum(o.tree_equal for o in group),
                "ratio": mean([o.ratio for o in group]),
                "redone_done": mean([float(o.redone_done) for o in group]),
                "violations": mean([float(o.violations) for o in group]),
                "runs_with_violation": sum(1 for o in group if o.violations),
                "resumes": resumes,
                "confirmed": confirmed,
                "confirmed_first_try": sum(o.confirmed_first_try for o in group),
                "confirmed_by_harness": sum(o.confirmed_by_harness for o in group),
                "seconds": mean([o.seconds for o in group]),
                "metrics_ratio": mean([float(m["ratio"] or 0) for m in metrics])
                if metrics
                else None,
                "metrics_violations_after": mean([float(m["violations_after"]) for m in metrics])
                if metrics
                else None,
            }
        )
    return rows


def print_report(rows: list[dict[str, Any]], seeds: int, n_steps: int) -> None:
    print(f"\n## Interruption benchmark: {seeds} seeds, {n_steps} steps each\n")
    head = (
        "| driver | variant | runs | finished | final tree = uninterrupted | redone-work ratio "
        "| done steps redone / run | violations after resume / run | runs with a violation "
        "| resumes confirmed | s / run | metrics: ratio, violations |"
    )
    print(head)
    print("|" + "---|" * 12)
    for r in rows:
        confirmed = (
            f"{r['confirmed']}/{r['resumes']} ({r['confirmed_first_try']} first try)"
            if r["resumes"] and not r["confirmed_by_harness"]
            else f"harness {r['confirmed_by_harness']}/{r['resumes']}"
            if r["resumes"]
            else "n/a"
        )
        metrics = (
            f"{r['metrics_ratio']:.3f}, {r['metrics_violations_after']:.2f}"
            if r["metrics_ratio"] is not None
            else "n/a"
        )
        print(
            f"| {r['driver']} | {r['variant']} | {r['runs']} | {r['finished']}/{r['runs']} "
            f"| {r['tree_equal']}/{r['runs']} | {r['ratio']:.3f} | {r['redone_done']:.2f} "
            f"| {r['violations']:.2f} | {r['runs_with_violation']}/{r['runs']} | {confirmed} "
            f"| {r['seconds']:.1f} | {metrics} |"
        )


def plot(outcomes: list[Outcome], path: Path, max_k: int) -> str:
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install -e '.[bench]')"
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.1), dpi=80)
    styles = {
        "full": ("tab:green", "o"),
        "no-confirm": ("tab:olive", "v"),
        "no-brief": ("tab:purple", "s"),
        "brief-only": ("tab:orange", "^"),
        "baseline": ("tab:red", "x"),
    }
    ks = list(range(1, max_k + 1))
    panels = (
        ("ratio", "redone work: step executions / steps"),
        ("violations", "constraints broken after an interruption"),
        ("wrong", "runs whose final tree differs (share)"),
    )
    for driver in sorted({o.driver for o in outcomes}):
        for variant, (color, marker) in styles.items():
            group = [o for o in outcomes if o.driver == driver and o.variant == variant]
            if not group:
                continue
            line = "-" if driver == "cli" else ":"
            label = variant if driver == "cli" else f"{variant} (Claude Code hooks)"
            xs = [k for k in ks if any(o.interruptions == k for o in group)]
            for ax, (key, _title) in zip(axes, panels, strict=True):
                ys = [
                    mean(
                        [
                            float(not o.tree_equal) if key == "wrong" else float(getattr(o, key))
                            for o in group
                            if o.interruptions == k
                        ]
                    )
                    for k in xs
                ]
                ax.plot(xs, ys, line, color=color, marker=marker, label=label, alpha=0.85)
    runs_per_k = {k: len({o.seed for o in outcomes if o.interruptions == k}) for k in ks}
    for ax, (_key, title) in zip(axes, panels, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("interruptions in the run (seeds)")
        ax.set_xticks(ks, [f"{k} ({runs_per_k[k]})" for k in ks])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean over seeds")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylim(-0.03, 1.03)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return f"plot written: {path}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--drivers", default="cli,claude-code")
    parser.add_argument("--max-interruptions", type=int, default=4)
    parser.add_argument(
        "--steps",
        type=int,
        default=len(itask.STEPS),
        help="run only the first N steps of the task (the smoke test: 3)",
    )
    parser.add_argument(
        "--skim",
        type=float,
        default=0.1,
        help="chance the agent skims over one constraint of a brief",
    )
    parser.add_argument(
        "--fresh",
        type=float,
        default=0.5,
        help="chance a restarted session cannot continue its transcript",
    )
    parser.add_argument("--out", default=str(HERE), help="where the PNG and JSON go")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument(
        "--replot",
        metavar="RESULTS_JSON",
        help="only print the table and draw the plot of an earlier run",
    )
    args = parser.parse_args(argv)
    if args.replot:
        saved = json.loads(Path(args.replot).read_text())
        loaded = [Outcome(**o) for o in saved["runs"]]
        print_report(summarise(loaded), len({o.seed for o in loaded}), args.steps)
        print(plot(loaded, Path(args.out) / "interruptions.png", args.max_interruptions))
        return 0
    variants = [v for v in args.variants.split(",") if v]
    drivers = [d for d in args.drivers.split(",") if d]
    unknown = [v for v in variants if v not in VARIANTS]
    if not 2 <= args.steps <= len(itask.STEPS):
        parser.error(f"--steps takes 2 to {len(itask.STEPS)}")
    if unknown or not set(drivers) <= {"cli", "claude-code"}:
        parser.error(f"unknown variant or driver: {unknown or drivers}")
    root = Path(tempfile.mkdtemp(prefix="ckpt-interruptions-"))
    seal(root)
    binary = git_ckpt_binary()
    outcomes: list[Outcome] = []
    began = time.monotonic()
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            plan = plan_for(seed, args.max_interruptions, args.steps)
            template = make_template(root / "templates", seed, binary)
            reference = reference_tree(root, seed, binary, args.steps)
            for driver in drivers:
                for variant in variants:
                    if driver == "claude-code" and variant not in HOOK_VARIANTS:
                        continue
                    o = run_one(
                        root,
                        template,
                        reference,
                        seed,
                        driver,
                        variant,
                        plan,
                        args.skim,
                        binary,
                        args.steps,
                        args.fresh,
                    )
                    outcomes.append(o)
                    print(
                        f"seed {seed} {driver:11} {variant:10} k={o.interruptions} "
                        f"{','.join(o.kinds):22} equal={'yes' if o.tree_equal else 'no '} "
                        f"ratio={o.ratio:.3f} violations={o.violations} "
                        f"confirmed={o.confirmed_first_try + o.confirmed_later}/{o.resumes} "
                        f"{o.seconds:.1f}s" + ("" if o.finished else " NOT FINISHED"),
                        flush=True,
                    )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    rows = summarise(outcomes)
    print_report(rows, args.seeds, args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        "load": os.getloadavg(),
        "seconds": round(time.monotonic() - began, 1),
        "argv": sys.argv[1:] if argv is None else argv,
        "skim": args.skim,
        "fresh": args.fresh,
    }
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "summary": rows, "runs": [asdict(o) for o in outcomes]}, indent=1)
        + "\n"
    )
    print(f"\n{meta['machine']}; {meta['date']}; {meta['seconds']} s; load {meta['load']}")
    if not args.no_plot:
        print(plot(outcomes, out / "interruptions.png", args.max_interruptions))
    else:
        print("plot skipped: --no-plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
