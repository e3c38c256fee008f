"""Latency of `git ckpt hook claude-code EVENT`, side by side with a hook that does nothing.

An agent waits for its hooks: Claude Code runs PostToolUse after every tool
call, Stop after every turn, SessionStart after every compaction. Each is timed
as the agent runs it: a process started with the hook's JSON on stdin, its
stdout read to the end. The reference is the cheapest possible hook,
`sh -c 'cat >/dev/null'` with the same stdin, in the same rounds, alternating
which runs first. Each event is timed cold (every call in its own Python
process, GIT_CKPT_DAEMON=off) and warm (served by the work tree's daemon).

The repository: `--files` small committed files (10,000 by default), a contract
of two constraints (one `block`), and a task started on it. A Claude Code
transcript of about 2 MiB whose last assistant line carries the usage feeds
PostToolUse's context size. Before each PostToolUse a file is written (the tool
call it reports); Stop takes its light checkpoint and runs `check`.

    .venv/bin/python benchmarks/bench_agent_hook.py --files 10000 --rounds 15

Not tests: pytest never collects these files (`bench_*.py`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_lib import (
    alternate,
    cli_env,
    cli_path,
    cpu_model,
    git,
    make_repo,
    median,
    p95,
    paired,
    seal_environment,
    start_server,
    stop_servers,
)

NOTHING = ["sh", "-c", "cat >/dev/null; echo {}"]  # the hook that does nothing
TASK = "bench-hook"
SESSION = "bench-session-0001"
CONTRACT = """\
constraints:
  - id: seed-42
    text: Experiments use seed 42
    severity: warn
    check: {kind: file_exists, file: .gitignore}
  - id: api-frozen
    text: Do not change the public API under api/
    severity: block
    check: {kind: protected_paths, paths: ["api/**"]}
"""


def transcript(path: Path, target_bytes: int = 2 << 20) -> Path:
    """A Claude Code transcript of about `target_bytes`, its last usage at the end."""
    usage = {"input_tokens": 12, "cache_read_input_tokens": 40_000, "output_tokens": 80}
    turn = [
        json.dumps({"type": "user", "message": {"role": "user", "content": "x" * 900}}),
        json.dumps({"type": "assistant", "message": {"role": "assistant", "usage": usage}}),
    ]
    block = "\n".join(turn) + "\n"
    path.write_text(block * max(1, target_bytes // len(block)))
    return path


def payloads(repo: Path, transcript_path: Path, i: int) -> dict[str, dict[str, object]]:
    base = {"session_id": SESSION, "transcript_path": str(transcript_path), "cwd": str(repo)}
    name = f"d00/s0/hook-{i:04d}.txt"
    return {
        "PostToolUse": {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(repo / name), "content": f"round {i}\n" * 20},
            "tool_response": {"type": "create", "filePath": str(repo / name)},
            "tool_use_id": f"toolu_{i}",
            "duration_ms": 5,
        },
        "Stop": {**base, "hook_event_name": "Stop", "stop_hook_active": False},
        "SessionStart compact": {**base, "hook_event_name": "SessionStart", "source": "compact"},
    }


def run_hook(argv: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> float:
    """Wall time (ms) of one hook process, as the agent runs it."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True, check=False)
    ms = (time.perf_counter() - t0) * 1000.0
    if proc.returncode != 0 or not proc.stdout.strip().startswith(b"{"):
        raise RuntimeError(f"{argv} -> {proc.returncode}: {proc.stdout!r} {proc.stderr!r}")
    if b"systemMessage" in proc.stdout:
        raise RuntimeError(f"{argv[-1]} answered an error: {proc.stdout!r}")
    return ms


def record(
    samples: dict[str, float], key: str, argv: list[str], stdin: bytes, cwd: Path,
    env: dict[str, str],
) -> None:  # fmt: skip
    samples[key] = run_hook(argv, stdin, cwd, env)


def setup(root: Path, n_files: int) -> tuple[Path, Path]:
    repo = make_repo(root, n_files)
    (repo / ".agent" / "contracts").mkdir(parents=True)
    (repo / ".agent" / "contracts" / "constraints.yaml").write_text(CONTRACT)
    (repo / "api").mkdir()
    (repo / "api" / "public.py").write_text("def f(): ...\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "contract")
    env = cli_env(root, server=False)
    subprocess.run(
        [cli_path(), "task", "start", TASK, "--goal", "bench the hooks", "--step", "s1:work"],
        cwd=repo, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return repo, transcript(root / "transcript.jsonl")


def measure(
    repo: Path, tr: Path, rounds: int, warm: bool, root: Path
) -> dict[str, tuple[list[float], list[float]]]:
    env = cli_env(root, server=warm)
    env["GIT_CKPT_TASK"] = TASK
    if warm:
        start_server(env, repo)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for event in ("PostToolUse", "Stop", "SessionStart compact"):
        ours: list[float] = []
        nothing: list[float] = []
        argv = [cli_path(), "hook", "claude-code", event.split()[0]]
        for i in range(rounds + 1):  # round 0 warms caches and is not kept
            data = json.dumps(payloads(repo, tr, i)[event]).encode()
            if event == "PostToolUse":  # the tool call the hook reports
                (repo / "d00" / "s0" / f"hook-{i:04d}.txt").write_text(f"round {i}\n" * 20)
            samples: dict[str, float] = {}
            alternate(
                i,
                functools.partial(record, samples, "ours", argv, data, repo, env),
                functools.partial(record, samples, "cat", NOTHING, data, repo, env),
            )
            if i:
                ours.append(samples["ours"])
                nothing.append(samples["cat"])
        out[event] = (ours, nothing)
    return out


def table(results: dict[str, dict[str, tuple[list[float], list[float]]]]) -> str:
    lines = [
        "| event | mode | git ckpt hook (ms, median) | p95 | `cat >/dev/null` hook (ms) "
        "| difference (ms) | per-round ratio |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for mode, by_event in results.items():
        for event, (ours, nothing) in by_event.items():
            lines.append(
                f"| {event} | {mode} | {median(ours):.0f} | {p95(ours):.0f} "
                f"| {median(nothing):.1f} | {median(ours) - median(nothing):.0f} "
                f"| {paired(ours, nothing)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-hook-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        t0 = time.perf_counter()
        repo, tr = setup(root, args.files)
        print(f"[bench] {args.files} files set up in {time.perf_counter() - t0:.0f} s")
        results: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        steps: list[tuple[str, Callable[[], dict[str, tuple[list[float], list[float]]]]]] = [
            ("cold", lambda: measure(repo, tr, args.rounds, False, root)),
            ("warm daemon", lambda: measure(repo, tr, args.rounds, True, root)),
        ]
        try:
            for mode, run in steps:
                results[mode] = run()
        finally:
            stop_servers(cli_env(root), root)
        load = os.getloadavg()
        print(
            f"\n{args.files} files, {args.rounds} rounds, {os.cpu_count()} cores "
            f"({cpu_model()}), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n"
        )
        print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
