"""`git ckpt demo`: a scripted research task, interrupted mid-step, drifted, resumed.

No network and no model: the "agent" is this script. Everything happens in a
throwaway repository (or DIR), never in the repository you run it from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable

from git_agentckpt.errors import Exit

Echo = Callable[[str], None]

PROSE = """# Rules of this project

Report every ablation in the results table, failed runs included.
Tables keep four decimals.
"""

CONSTRAINTS = """\
constraints:
  - id: seed42
    text: Experiments must use seed 42
    severity: block
    check: {kind: json_value, file: config.json, path: train.seed, equals: 42}
  - id: api-frozen
    text: Do not modify the public API under src/api
    severity: block
    check: {kind: protected_paths, paths: ["src/api/**"]}
"""


def _write(root: str, rel: str, text: str) -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _git(root: str, *args: str) -> None:
    env = dict(os.environ)
    env.update(
        {
            "GIT_AUTHOR_NAME": "demo",
            "GIT_AUTHOR_EMAIL": "demo@example.invalid",
            "GIT_COMMITTER_NAME": "demo",
            "GIT_COMMITTER_EMAIL": "demo@example.invalid",
        }
    )
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(var, None)
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def run_demo(directory: str | None, *, keep: bool, echo: Echo) -> int:
    import git_agentckpt
    from git_agentckpt.config_edit import set_key
    from git_agentckpt.recovery.confirming import confirm
    from git_agentckpt.recovery.flow import ResumeOptions, resume
    from git_agentckpt.recovery.restatement import CONSTRAINT, DONE, GOAL, NEXT

    root = os.path.abspath(directory) if directory else tempfile.mkdtemp(prefix="ckpt-demo-")
    if directory and os.path.exists(os.path.join(root, ".git")):
        raise SystemExit(f"git ckpt demo: {root} already holds a repository; name a new directory")
    os.makedirs(root, exist_ok=True)
    os.environ.setdefault("GIT_COMMITTER_NAME", "demo")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "demo@example.invalid")
    try:
        echo(f"== a throwaway research repository: {root}")
        _git(root, "init", "-q")
        _write(root, "README.md", "# tiny research project\n")
        _write(
            root, "config.json", json.dumps({"train": {"seed": 42, "lr": 0.01}}, indent=2) + "\n"
        )
        _write(root, "src/api/__init__.py", "def predict(x):\n    return x\n")
        _write(root, "src/model.py", "LAYERS = 2\n")
        _write(root, ".gitignore", "*.log\n")
        _write(root, ".agent/contracts/constraints.yaml", CONSTRAINTS)
        _write(root, ".agent/contracts/constraints.md", PROSE)
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "project")
        ck = git_agentckpt.open(root)
        ck.init()
        settings = os.path.join(root, ".agent", "ckpt.toml")
        with open(settings, encoding="utf-8") as fh:
            text = set_key(fh.read(), "env.key_inputs", ["config.json"]).text
        with open(settings, "w", encoding="utf-8") as fh:
            fh.write(text)  # every checkpoint now pins config.json by sha256
        ck = git_agentckpt.open(root)
        task = "ablation"
        echo("\n== the agent starts a task with four steps and two constraints")
        ck.task_start(
            task,
            "Reproduce table 2 with a 3-layer model",
            [
                ("s1", "read the papers"),
                ("s2", "change the model"),
                ("s3", "run the ablations"),
                ("s4", "write the report"),
            ],
            ["seed42", "api-frozen"],
        )
        ck.step_start(task, "s1")
        ck.append_events(
            task,
            [
                {
                    "type": "model.call",
                    "input": "summarise paper A",
                    "output": "…",
                    "actor": "demo-agent",
                },
                {"type": "tool.call", "input": "read paper B", "actor": "demo-agent"},
            ],
        )
        made = ck.step_done(task, "s1", {"papers": 2})
        echo(f"   s1 done -> checkpoint {made.id}")
        ck.step_start(task, "s2")
        _write(root, "src/model.py", "LAYERS = 3\n")
        ck.append_events(
            task, [{"type": "file.write", "input": "src/model.py", "actor": "demo-agent"}]
        )
        made = ck.step_done(task, "s2", {"layers": 3})
        echo(f"   s2 done -> checkpoint {made.id}")
        ck.step_start(task, "s3")
        _write(root, "results/run1.csv", "run,acc\n1,0.81\n")
        light = ck.create(task, message="after run 1", light=True, trigger="tick")
        echo(f"   s3 started, run 1 written, light checkpoint {light.id}")
        ticked = ck.tick(task, tokens_used=97_000, token_budget=100_000)
        echo(f"   tick at 97% of the token budget: {ticked.decision.tier} checkpoint")
        ck.append_events(task, [{"type": "quota.exceeded", "error": "429: token quota reached"}])
        echo("\n== INTERRUPTED in the middle of s3 (quota cut); meanwhile files drift:")
        _write(root, "src/model.py", "LAYERS = 5  # edited by hand\n")
        _write(root, "cache/features.pyc", "stale bytecode\n")
        echo("   src/model.py edited (source), cache/features.pyc left behind (regenerable)")

        echo("\n== git ckpt resume ablation")
        first = resume(ck, task, ResumeOptions())
        echo(f"   exit {int(first.exit)}: {first.message}")
        echo("\n== git ckpt resume ablation --restore")
        out = resume(ck, task, ResumeOptions(restore=True))
        report = out.report
        locate = report["locate"]
        assert isinstance(locate, dict)
        echo(f"   1 locate:     {locate['reason']}")
        verify = report.get("verify")
        if isinstance(verify, dict):
            files = ", ".join(f"{f['path']} {f['action']}" for f in verify.get("files") or [])
            echo(f"   2 verify:     {verify.get('decision') or 'clean'}: {files or 'no file'}")
        checked = report.get("assertions") or {}
        assert isinstance(checked, dict)
        results = checked.get("results") or []
        assert isinstance(results, list)
        ids = ", ".join(str(r.get("id")) for r in results if isinstance(r, dict))
        echo(f"   3 assertions: {len(results)} checked ({ids}), passed={checked.get('passed')}")
        echo("   4 brief:")
        assert out.brief is not None
        for line in out.brief.markdown.splitlines():
            echo("     | " + line)
        echo(f"   5 confirm:    {out.message}")
        # the agent fills in the form the brief ends with
        restatement = (
            str(out.brief.data["restatement_form"])
            .replace(GOAL, "reproduce table 2 with a 3-layer model")
            .replace(f"— {CONSTRAINT}\n", "— every experiment runs with seed 42\n", 1)
            .replace(f"— {CONSTRAINT}\n", "— nothing under src/api changes\n", 1)
            .replace(DONE, "s1, s2")
            .replace(NEXT, str(out.brief.data["next_step"]))
        )
        echo("\n== git ckpt confirm ablation --restatement - (the agent's filled-in form)")
        for line in restatement.splitlines():
            echo("     > " + line)
        status, verdict, _ = confirm(ck, task, restatement, by_human=False)
        echo(f"   exit {int(status)}: {'confirmed' if verdict.passed else verdict.problems}")
        echo(
            f"\n== recovery report: git -C {root} show refs/agent/reports/{task}:"
            f"{report['id']}/report.md"
        )
        echo(f"   or: git ckpt -C {root} report {task}")
        return 0 if status == Exit.OK else int(status)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
            echo(f"\n(removed {root}; run `git ckpt demo DIR` to keep it)")
