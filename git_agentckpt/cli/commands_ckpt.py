"""Commands on checkpoints and the event log.

init, create, list, show, log, diff, restore, event.
"""

from __future__ import annotations

import time
from typing import Any

import click

from git_agentckpt.cli.common import open_ckpt, open_reader, parse_params, read_json_arg
from git_agentckpt.cli.main import cli
from git_agentckpt.cli.output import emit_json, json_option, short
from git_agentckpt.errors import BadStateError
from git_agentckpt.paths import json_fields, to_json


@cli.command()
@json_option
@click.pass_context
def init(ctx: click.Context, as_json: bool) -> None:
    """Write .agent/ckpt.toml and the contract templates (never overwrites)."""
    created, kept = open_ckpt(ctx).init()
    if as_json:
        emit_json({"created": created, "kept": kept})
        return
    for path in created:
        click.echo(f"created {path}")
    for path in kept:
        click.echo(f"kept    {path} (exists)")


def run_options(f: Any) -> Any:
    """Options that describe the run: recorded in the state's env and usage."""
    f = click.option("--model", help="Model name, recorded in env.model.")(f)
    f = click.option("--model-version", help="Model version, recorded in env.model.")(f)
    f = click.option(
        "--param",
        "params",
        multiple=True,
        metavar="KEY=VALUE",
        help="A run parameter, recorded in env.params (repeatable).",
    )(f)
    f = click.option("--tokens-used", type=click.IntRange(min=0), help="Tokens used so far.")(f)
    f = click.option(
        "--token-budget", type=click.IntRange(min=0), help="Token budget of the task."
    )(f)
    f = click.option("--calls-used", type=click.IntRange(min=0), help="Model calls so far.")(f)
    return f


def build_run(kw: dict[str, Any]) -> Any:
    from git_agentckpt.api import RunInfo

    usage = {
        key: kw.pop(key)
        for key in ("tokens_used", "token_budget", "calls_used")
        if kw.get(key) is not None
    }
    for key in ("tokens_used", "token_budget", "calls_used"):
        kw.pop(key, None)
    return RunInfo(
        model=kw.pop("model", None),
        model_version=kw.pop("model_version", None),
        params=parse_params(kw.pop("params", ())),
        usage=usage,
    )


@cli.command()
@click.option(
    "-t", "--task", help="Task name (default: $GIT_CKPT_TASK, then the single active task)."
)
@click.option("-m", "--message", default="", help="A short description for the subject line.")
@click.option(
    "--light", is_flag=True, help="Record state and events only; reuse the parent's tree."
)
@click.option(
    "--trigger", default="manual", show_default=True, help="Why this checkpoint is taken."
)
@click.option("--step", "step", help="The step this checkpoint belongs to.")
@click.option(
    "--state", "state_arg", metavar="FILE|-|JSON", help="A task-state patch to merge (JSON)."
)
@click.option("--force", is_flag=True, help="Checkpoint even while the task is recovering.")
@click.option("--actor", help="Who asks (agent name), recorded in the events.")
@click.option(
    "--assert",
    "asserts",
    multiple=True,
    metavar="[ID@]KIND:ARGS",
    help="An assertion checked on resume, e.g. file_exists:data.csv (repeatable).",
)
@click.option(
    "--assertions",
    "assertions_file",
    metavar="FILE",
    help="Assertions from a YAML or JSON file (a list of {id, check}).",
)
@run_options
@json_option
@click.pass_context
def create(ctx: click.Context, /, **kw: Any) -> None:
    """Take a checkpoint of the working tree and the task state; print its id."""
    as_json = kw.pop("as_json")
    run = build_run(kw)
    patch = read_json_arg(kw.pop("state_arg"), "--state", ctx)
    if patch is not None and not isinstance(patch, dict):
        raise BadStateError("--state must be a JSON object")
    asserts: list[Any] = list(kw.pop("asserts"))
    assertions_file = kw.pop("assertions_file")
    if assertions_file:
        asserts += _load_assertions_file(ctx, assertions_file)
    ck = open_ckpt(ctx)
    start = time.perf_counter()
    made = ck.create(state=patch, run=run, assertions=asserts, **kw)
    if as_json:
        emit_json({**made.to_json(), "seconds": round(time.perf_counter() - start, 4)})
    else:
        click.echo(made.id)


def _load_assertions_file(ctx: click.Context, name: str) -> list[Any]:
    from git_agentckpt.api import load_assertions_text
    from git_agentckpt.cli.common import read_input_text

    text, _ = read_input_text(name, "assertions", ctx)
    return load_assertions_text(text, name)


@cli.command(name="list")
@click.argument("task", required=False)
@json_option
@click.pass_context
def list_(ctx: click.Context, task: str | None, as_json: bool) -> None:
    """List checkpoints, newest first (of TASK, or of every task)."""
    items = open_reader(ctx).checkpoints(task)
    if as_json:
        emit_json([c.to_json() for c in items])
        return
    seen: dict[str, int] = {}
    for c in items:
        n = seen.get(c.task, 0)
        seen[c.task] = n + 1
        name = f"{c.task}~{n}"
        click.echo(
            f"{name:16}  {c.id}  {short(c.commit)}  {c.kind:5}  {c.trigger:14}  "
            f"step={c.step or '-':8}  {c.subject}"
        )


@cli.command()
@click.argument("checkpoint")
@json_option
@click.pass_context
def show(ctx: click.Context, checkpoint: str, as_json: bool) -> None:
    """Show one checkpoint: commit, trailers, task state and assertions."""
    info = open_reader(ctx).show(checkpoint)
    if as_json:
        emit_json(info)
        return
    c = info["checkpoint"]
    state = info["state"] or {}
    click.echo(f"checkpoint {c['id']} ({c['kind']}, trigger {c['trigger']})")
    click.echo(f"commit     {c['commit']}")
    click.echo(f"task       {c['task']} #{c['number']}   step {c['step'] or '-'}")
    click.echo(f"baseline   {c['baseline'] or '-'}")
    click.echo(f"subject    {c['subject']}")
    if state:
        click.echo(f"goal       {state.get('goal', '')}")
        click.echo(
            f"status     {state.get('status')}   current step {state.get('current_step') or '-'}"
        )
        for s in state.get("steps", []):
            click.echo(f"  [{s['status']:11}] {s['id']}: {s['title']}")
        if state.get("constraints"):
            click.echo("constraints " + ", ".join(state["constraints"]))
    if info["assertions"]:
        click.echo(f"assertions {len(info['assertions'])}")


@cli.command()
@click.argument("task")
@click.option("-n", "--limit", type=click.IntRange(min=1), help="Only the last N events.")
@click.option("--full", is_flag=True, help="Load payloads stored apart (above 64 KiB).")
@click.option(
    "--type",
    "types",
    multiple=True,
    metavar="TYPE",
    help="Only events of TYPE (repeatable; `tool.` or `tool`: every tool.* type).",
)
@click.option("--step", metavar="ID", help="Only events linked to step ID.")
@click.option(
    "--since",
    metavar="WHEN",
    help="Only events since an age (2h, 3d), a date/time, or a checkpoint id.",
)
@click.option("--actor", metavar="WHO", help="Only events whose actor has WHO (or KEY=VALUE).")
@json_option
@click.pass_context
def log(
    ctx: click.Context,
    task: str,
    limit: int | None,
    full: bool,
    types: tuple[str, ...],
    step: str | None,
    since: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Show the event log of TASK (text, or JSON Lines with --json), oldest first.

    The text output shows each event's inputs, outputs and tokens on a second line,
    long values cut."""
    from git_agentckpt.store.log_stream import LogEntry

    ck = open_reader(ctx)
    filt = ck.log_filter(task, types, step, since, actor)
    merged_seen = False

    def saw_merged() -> None:
        nonlocal merged_seen
        merged_seen = True

    render = LogEntry.json_line if as_json else LogEntry.text_line
    if limit is None:  # the whole log: rendered as git streams it, given back in order
        for chunk in ck.log_rendered(task, render, full, filt, saw_merged):
            click.echo(chunk)
    else:
        out: list[str] = []
        for e in ck.log_entries(task, limit, full, filt):
            out.append(render(e))
            merged_seen = merged_seen or e.merged
            if len(out) >= 512:
                click.echo("\n".join(out))
                out.clear()
        if out:
            click.echo("\n".join(out))
    if merged_seen and not as_json:
        click.echo("(* merged from another clone by fetch: its own number and time, in the order")
        click.echo("   the merge brought it in; numbers may repeat and times go back there)")


@cli.command()
@click.argument("a")
@click.argument("b")
@json_option
@click.pass_context
def diff(ctx: click.Context, a: str, b: str, as_json: bool) -> None:
    """File changes and task-state changes between checkpoints A and B."""
    ck = open_reader(ctx)
    result = ck.diff(a, b)
    if as_json:
        files = result["files"]
        assert isinstance(files, list)
        result["files"] = [{**f, **json_fields(f["path"])} for f in files if isinstance(f, dict)]
        emit_json(result)
        return
    for f in result["files"]:
        click.echo(f"{f['status']}\t{ck.quote_path(f['path'])}")
    for s in result["state"]:
        click.echo(f"state {s['field']}: {s['from']!r} -> {s['to']!r}")


@cli.command()
@click.argument("checkpoint")
@click.option("--dry-run", "-n", is_flag=True, help="Only list what would change.")
@json_option
@click.pass_context
def restore(ctx: click.Context, checkpoint: str, dry_run: bool, as_json: bool) -> None:
    """Bring the working tree to CHECKPOINT's content (a safety checkpoint first)."""
    ck = open_ckpt(ctx)
    result = ck.restore(checkpoint, dry_run=dry_run)
    if as_json:
        out = result.to_json()
        for key in ("written", "deleted", "skipped", "secret_paths_left", "agent_files_kept"):
            listed = out[key]
            assert isinstance(listed, list)
            out[key] = [to_json(p) for p in listed if isinstance(p, str)]
        emit_json(out)
        return
    verb = "would write" if dry_run else "wrote"
    shown = ck.quote_path
    for path in result.written:
        click.echo(f"{verb}  {shown(path)}")
    for path in result.deleted:
        click.echo(f"{'would delete' if dry_run else 'deleted'}  {shown(path)}")
    for sub in result.submodules:
        if sub.left:
            click.echo(f"left     {shown(sub.path)} ({sub.why})")
        else:
            verb_sub = "would check out" if dry_run else "checked out"
            click.echo(f"{verb_sub}  {shown(sub.path)} at {(sub.commit or '')[:12]}")
    for path in result.secret:
        click.echo(f"kept     {shown(path)} (secret_paths: never restored)")
    if result.safety:
        click.echo(
            f"safety checkpoint {result.safety.id}: undo with `git ckpt restore {result.safety.id}`"
        )
    if not (result.written or result.deleted or result.submodules):
        click.echo(f"working tree already matches {result.target.id}")


@cli.command()
@click.argument("task")
@click.option("--type", "type_", required=True, help="Event type, e.g. tool.call or model.call.")
@click.option(
    "--json", "payload", metavar="PAYLOAD|-", help="Event fields as JSON (or - for stdin)."
)
@click.option("--actor", help="Who did it (agent name).")
@click.pass_context
def event(
    ctx: click.Context, task: str, type_: str, payload: str | None, actor: str | None
) -> None:
    """Append one event to TASK's log; print its id and sequence number."""
    data = read_json_arg(payload, "--json payload", ctx) if payload is not None else {}
    if not isinstance(data, dict):
        raise BadStateError("the event payload must be a JSON object")
    ck = open_ckpt(ctx)
    ck.require_task(task)  # a name nobody started: "did you mean", never a new task
    ev = ck.event(task, type_, data, actor)
    click.echo(f"{ev.id} {ev.seq}")
