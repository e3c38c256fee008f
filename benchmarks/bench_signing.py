"""Signed trails: the cost per checkpoint and per event append, signed (ssh) vs unsigned.

Two repositories of N files, alike but for git's signing config: one signs with a fresh
ed25519 key (`gpg.format ssh`, key file, no agent), the other does not (pygit2 writes the
commits). Each round edits both trees the same way, then takes a full checkpoint, a light
checkpoint and appends one event in each, in-process, alternating which repository goes
first. Medians side by side; last, the signature check of each trail (`verify`'s part).

    .venv/bin/python benchmarks/bench_signing.py --files 1000
    .venv/bin/python benchmarks/bench_signing.py --files 10000 --rounds 31
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lib import Mutator, Series, alternate, cpu_model, git, make_repo, seal_environment


def configure_ssh_signing(repo: Path, keys: Path) -> None:
    key = keys / "agent"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent", "-f", str(key)],
        check=True,
    )
    pub = key.with_suffix(".pub")
    allowed = keys / "allowed_signers"
    allowed.write_text(f"agent@example.com {pub.read_text().strip()}\n")
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingKey", str(pub))
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(allowed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-sign-"))
    try:
        seal_environment(root)
        plain = make_repo(root / "plain", args.files)
        signed = make_repo(root / "signed", args.files)
        keys = root / "keys"
        keys.mkdir()
        configure_ssh_signing(signed, keys)
        run(plain, signed, args.files, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(plain: Path, signed: Path, files: int, rounds: int) -> None:
    import git_agentckpt
    from git_agentckpt.audit.signatures import check_trail_signatures
    from git_agentckpt.store.refs import TaskName

    cks = {"unsigned": git_agentckpt.open(str(plain)), "signed": git_agentckpt.open(str(signed))}
    mutators = {"unsigned": Mutator(plain, files), "signed": Mutator(signed, files)}
    for ck in cks.values():
        ck.task_start("bench", goal="measure signing")
    series: dict[str, dict[str, Series]] = {
        op: {"unsigned": Series(), "signed": Series()} for op in ("full", "light", "event")
    }

    def op(kind: str, which: str) -> None:
        ck = cks[which]
        if kind == "event":
            event = {"type": "tool.call", "input": "pytest -q", "output": "ok"}
            series[kind][which].add(lambda: ck.append_events("bench", [event]))
        else:
            light = kind == "light"
            series[kind][which].add(lambda: ck.create("bench", message=kind, light=light))

    for i in range(rounds):
        for m in mutators.values():
            m.step()
        for kind in ("full", "light", "event"):
            alternate(i, partial(op, kind, "unsigned"), partial(op, kind, "signed"))
    verify = {which: Series() for which in cks}
    counts: dict[str, int] = {}
    for which, ck in cks.items():
        result = check_trail_signatures(ck.repo, TaskName("bench"))
        assert result.ok, result.problems
        if which == "signed":
            assert result.good == result.commits, "a signed trail with unsigned commits"
        else:
            assert result.signed == 0
        counts[which] = result.commits
        verify[which].add(partial(check_trail_signatures, ck.repo, TaskName("bench")))
    report(files, rounds, series, verify, counts)


def report(
    files: int,
    rounds: int,
    series: dict[str, dict[str, Series]],
    verify: dict[str, Series],
    counts: dict[str, int],
) -> None:
    names = {"full": "full checkpoint", "light": "light checkpoint", "event": "event append"}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# Signed trails: {files} files, {rounds} rounds, {cpu_model()}, load {load}")
    print()
    print(
        "| operation | unsigned (ms, median) | signed ssh (ms, median) | extra (ms) | ratio "
        "| CPU unsigned / signed (ms) | CPU extra (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, pair in series.items():
        u, s = pair["unsigned"], pair["signed"]
        print(
            f"| {names[kind]} | {u.med:.2f} | {s.med:.2f} | {s.med - u.med:+.2f} "
            f"| {s.med / u.med:.1f}× | {u.cpu_med:.2f} / {s.cpu_med:.2f} "
            f"| {s.cpu_med - u.cpu_med:+.2f} |"
        )
    u, s = verify["unsigned"], verify["signed"]
    n = max(counts["signed"], 1)
    print(
        f"| check a trail's signatures ({n} commits) | {u.med:.1f} | {s.med:.1f} "
        f"| {(s.med - u.med) / n:+.2f} per commit | {s.med / u.med:.0f}× "
        f"| {u.cpu_med:.1f} / {s.cpu_med:.1f} | {(s.cpu_med - u.cpu_med) / n:+.2f} per commit |"
    )
    print()
    print(
        "Medians, in-process (`git_agentckpt.open`); rounds alternate which repository "
        "goes first. A signed commit is `git commit-tree -S` (git runs ssh-keygen -Y sign); "
        "unsigned ones are written by pygit2. A checkpoint signs 3 commits (the checkpoint, "
        "its prepare and commit events); an event append signs 1. CPU: this process and "
        "its children (git, ssh-keygen), user + system; it moves less than wall time under load."
    )


if __name__ == "__main__":
    main()
