"""The pre-push secret scan: what it costs per MB of objects about to leave.

    .venv/bin/python benchmarks/bench_pre_push.py                  # 20 MB of text, 3 rounds
    .venv/bin/python benchmarks/bench_pre_push.py --mb 50 --binary-mb 64 --rounds 5
    .venv/bin/python benchmarks/bench_pre_push.py --repo /path/to/clone   # its whole HEAD

Builds one commit of `--mb` MB of source-like text (Python files with assignments,
URLs, hex ids: what makes the rule prefilter say "maybe"), plus one binary blob of
`--binary-mb` MB (skipped above `ckpt.scanBinaryLimit`, 4 MiB by default), and times,
in alternation, for a first push of it (the remote has nothing):
- `check_push` in-process: rev-list, cat-file, every rule over every byte;
- for scale, git reading the same objects: `git rev-list --objects HEAD | git cat-file
  --batch > /dev/null` (what any scan has to pay to see the bytes);
- `git ckpt hook pre-push` as a process of its own (what `git push` waits for).
Prints medians and ms per MB scanned. Not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import cli_env, cli_path, git, median, seal_environment

ZERO = "0" * 40


def source_file(rng: random.Random, size: int) -> str:
    lines = []
    total = 0
    n = 0
    while total < size:
        n += 1
        kind = n % 6
        if kind == 0:
            line = f"def handler_{n}(request, key=None, timeout={n % 90}):"
        elif kind == 1:
            line = f"    url = 'https://example.com/api/v{n % 3}/items/{rng.getrandbits(32):x}'"
        elif kind == 2:
            line = f"    digest = '{rng.getrandbits(160):040x}'  # object id, not a secret"
        elif kind == 3:
            line = f"    cache_key = f'item-{{request.id}}-{n}'"
        elif kind == 4:
            line = f"    return render(request, 'page_{n}.html', {{'count': {n}}})"
        else:
            line = ""
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def build(root: Path, mb: int, binary_mb: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    rng = random.Random(42)
    per_file = 64 * 1024
    for i in range(max(1, mb * 1_000_000 // per_file)):
        path = repo / f"pkg{i // 100:02d}" / f"mod{i:04d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(source_file(rng, per_file))
    if binary_mb:
        (repo / "model.bin").write_bytes(b"\0" + rng.randbytes(binary_mb * 1_000_000))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a large first push")
    return repo


def timed_ms(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--binary-mb", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", help="scan a first push of this clone's HEAD instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-prepush-") as tmp:
        root = Path(tmp)
        seal_environment(root)
        if args.repo:
            repo = root / "repo"
            git(root, "clone", "-q", "--no-local", os.path.abspath(args.repo), str(repo))
        else:
            repo = build(root, args.mb, args.binary_mb)

        from git_agentckpt.audit.prepush import check_push
        from git_agentckpt.git.repo import GitRepo

        gitrepo = GitRepo.discover(str(repo))
        head = git(repo, "rev-parse", "HEAD")
        lines = [("refs/heads/main", head, "refs/heads/main", ZERO)]
        result = check_push(gitrepo, "nowhere", lines)
        assert args.repo or not result.refused, result.lines()
        if result.findings:
            print(f"findings: {len(result.findings)} (e.g. {result.findings[0].describe()})")
        read = "git rev-list --objects HEAD | git cat-file --batch > /dev/null"
        env = cli_env(root, server=False)
        stdin = f"refs/heads/main {head} refs/heads/main {ZERO}\n".encode()
        hook = [cli_path(), "hook", "pre-push", "nowhere", "/nowhere"]
        ours, raw, proc = [], [], []
        for _ in range(args.rounds):
            ours.append(timed_ms(lambda: check_push(gitrepo, "nowhere", lines)))
            raw.append(timed_ms(lambda: subprocess.run(read, shell=True, cwd=repo, check=True)))
            proc.append(
                timed_ms(
                    lambda: subprocess.run(
                        hook, cwd=repo, env=env, input=stdin, capture_output=True
                    )
                )
            )
        mb = result.scanned_bytes / 1e6
        print(
            f"objects {result.objects}, scanned {mb:.1f} MB, skipped "
            f"{[(o.path, o.size) for o in result.skipped]}"
        )
        print(
            f"check_push in-process        median {median(ours):8.1f} ms  "
            f"{median(ours) / mb:6.1f} ms/MB  ({args.rounds} rounds)"
        )
        print(f"git reading the same objects median {median(raw):8.1f} ms (all of them)")
        print(
            f"git ckpt hook pre-push       median {median(proc):8.1f} ms  "
            f"{median(proc) / mb:6.1f} ms/MB"
        )


if __name__ == "__main__":
    main()
