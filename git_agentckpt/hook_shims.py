"""The texts of the git hook shims in `hooks/` (installed by `git ckpt hooks install`).

A shim is a few lines of sh that run a hook the user had (kept as `<name>.ckpt-user`)
first, with the same arguments and input, then `git ckpt hook <name>`, whose exit status
is the shim's (the last command of a pipeline; an `exec` there would run in a subshell,
and the lines after it too). The input is read
whole before anything runs (`input=$(cat)`): git never writes into a hook that has gone.
`@PYTHON@` is the interpreter `git ckpt` was installed with, used when `git-ckpt` is not
on the hook's PATH (a server's hooks run with a short PATH).
"""

from __future__ import annotations

REFERENCE_TRANSACTION = r"""#!/bin/sh
# git-ckpt reference-transaction shim (installed by `git ckpt hooks install`,
# removed by `git ckpt hooks uninstall`). It guards refs/agent/* and
# refs/notes/agent/*: a checkpoint ref may only move to a commit whose
# checkpoint.prepare event is logged, and audit refs only move forward.
# Other refs never start Python: the user's own git commands stay fast.
input=$(cat)
hookdir=$(dirname "$0")
if [ -x "$hookdir/reference-transaction.ckpt-user" ]; then
    printf '%s\n' "$input" | "$hookdir/reference-transaction.ckpt-user" "$@" || exit $?
fi
[ "$1" = prepared ] || exit 0
case "$input" in
    *" refs/agent/"* | *" refs/notes/agent/"*) ;;
    *) exit 0 ;;
esac
[ -n "$GIT_CKPT_HOOK_BYPASS" ] && exit 0
unset GIT_INDEX_FILE GIT_WORK_TREE
if command -v git-ckpt >/dev/null 2>&1; then
    printf '%s\n' "$input" | git-ckpt hook reference-transaction "$@"
else
    printf '%s\n' "$input" | "@PYTHON@" -m git_agentckpt hook reference-transaction "$@"
fi
"""

PRE_RECEIVE = r"""#!/bin/sh
# git-ckpt pre-receive shim (installed by `git ckpt hooks install --server`,
# removed by `git ckpt hooks uninstall --server`). It keeps the trail in this
# repository append-only: a push that deletes or rewrites refs/agent/* or
# refs/notes/agent/*, adds a checkpoint without its checkpoint.prepare event,
# or leaves a trail `git ckpt verify` rejects is refused, and so is a
# refs/replace/* ref that stands in for one of its records; the pushing client
# reads why. Pushes of other refs never start Python.
input=$(cat)
hookdir=$(dirname "$0")
if [ -x "$hookdir/pre-receive.ckpt-user" ]; then
    printf '%s\n' "$input" | "$hookdir/pre-receive.ckpt-user" "$@" || exit $?
fi
case "$input" in
    *" refs/agent/"* | *" refs/notes/agent/"* | *" refs/replace/"*) ;;
    *) exit 0 ;;
esac
[ -n "$GIT_CKPT_HOOK_BYPASS" ] && exit 0
unset GIT_INDEX_FILE GIT_WORK_TREE
if command -v git-ckpt >/dev/null 2>&1; then
    printf '%s\n' "$input" | git-ckpt hook pre-receive "$@"
else
    printf '%s\n' "$input" | "@PYTHON@" -m git_agentckpt hook pre-receive "$@"
fi
"""

PRE_PUSH = r"""#!/bin/sh
# git-ckpt pre-push shim (installed by `git ckpt hooks install`, removed by
# `git ckpt hooks uninstall`). Before a push it scans the objects about to leave
# (commits, trees, blobs the remote lacks) for secrets with the redaction rules,
# and checks the agent trail it pushes with `git ckpt verify`; it refuses the
# push naming the object and the rule. `git push --no-verify` skips it.
input=$(cat)
hookdir=$(dirname "$0")
if [ -x "$hookdir/pre-push.ckpt-user" ]; then
    printf '%s\n' "$input" | "$hookdir/pre-push.ckpt-user" "$@" || exit $?
fi
[ -n "$input" ] || exit 0
[ -n "$GIT_CKPT_HOOK_BYPASS" ] && exit 0
unset GIT_INDEX_FILE
if command -v git-ckpt >/dev/null 2>&1; then
    printf '%s\n' "$input" | git-ckpt hook pre-push "$@"
else
    printf '%s\n' "$input" | "@PYTHON@" -m git_agentckpt hook pre-push "$@"
fi
"""

SHIMS = {
    "reference-transaction": REFERENCE_TRANSACTION,
    "pre-push": PRE_PUSH,
    "pre-receive": PRE_RECEIVE,
}


def marker(name: str) -> str:
    """The line that tells our shim of hook `name` from a user's hook."""
    return f"git-ckpt {name} shim"
