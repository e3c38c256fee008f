"""git's own conversion between stored blobs and working-tree bytes (filters, line endings).

`git checkout` does not write a blob as stored: the smudge command of a
`filter` attribute (git-lfs, git-crypt, any clean/smudge pair), `text` / `eol`
and `core.autocrlf` (CRLF line endings), `ident` and `working-tree-encoding`
change the bytes on the way out, and `git add` / `git status` apply the
reverse on the way in. Whatever writes a checkpoint's files (restore, resume's
regenerable bring-back, a rollback candidate's scratch copies) or hashes a
working-tree file goes through the same conversion, or a filtered file comes
back cleaned, a CRLF file comes back with LF, and a file git calls unchanged
counts as drift.

Both directions run git itself, one process per call, never one per file:

- out, `checkout_bytes`: one `git cat-file --batch --filters -z` fed `<blob>
  <path>` records. Attributes are those of the tree being written, as
  checkout reads them from its new index: git runs in the working tree when
  that tree's `.gitattributes` files (on the way to the written paths) are
  the ones on disk, else in a scratch work tree holding the tree's own (the
  filters then run there), always with an empty index. git's batch header
  gives the *stored* size, not the converted one (git 2.39), so records are
  framed by a random nonce in the header instead. A filter that is
  configured with a smudge command runs as `required`: when it fails (a
  missing program, an LFS object not present), git stops at that path, and
  the error names the path and the filter before anything was written.
- in, `hash_worktree_files`: one `git hash-object --stdin-paths`, which
  applies the clean filter and line-ending normalization of `git add`.

Deciding costs no process in the common case: with no `.gitattributes` on the
way to any path, no `info/attributes`, no global or system attributes file and
`core.autocrlf` off, git converts nothing, and nothing is run. Otherwise one
`git check-attr` picks the paths an attribute may convert (all of them under
`core.autocrlf=true`), and only those go through git.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, TYPE_CHECKING

import pygit2

from git_agentckpt.errors import NotFound, OperationFailed, RepositoryError
from git_agentckpt.git.run import clean_env, run_git

if TYPE_CHECKING:
    from git_agentckpt.git.repo import GitRepo, TreeFile

REGULAR = (0o100644, 0o100755)
ATTRIBUTES = ".gitattributes"
# attributes under which git may change a file's bytes between the store and the disk
_CONVERTING = ("filter", "text", "eol", "crlf", "ident", "working-tree-encoding")
_NOT_SET = (b"unspecified", b"unset")
_FILTER_FAILED = re.compile(r"^fatal: (.+): (?:smudge|clean) filter (.+) failed$")


def autocrlf(repo: GitRepo) -> str:
    """`core.autocrlf` as git reads it: "true", "input" or "false"."""
    value = (repo.config_get("core.autocrlf") or "false").strip().lower()
    if value == "input":
        return "input"
    return "true" if value in ("true", "yes", "on", "1") else "false"


def parent_dirs(paths: Iterable[str]) -> set[str]:
    """Every directory on the way to `paths` ("" is the top), each once."""
    out: set[str] = set()
    for path in paths:
        d = path
        while d:
            d = d.rpartition("/")[0]
            if d in out:
                break
            out.add(d)
    return out


def _attributes_path(d: str) -> str:
    return f"{d}/{ATTRIBUTES}" if d else ATTRIBUTES


def _non_empty(path: str) -> bool:
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


def global_attributes(repo: GitRepo) -> bool:
    """Whether an attributes file outside the tree applies: `info/attributes`,
    `core.attributesFile` (or its XDG default), the system file."""
    files = [os.path.join(repo.common_dir, "info", "attributes")]
    configured = repo.config_get("core.attributesFile")
    if configured:
        files.append(os.path.expanduser(configured))
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        files.append(os.path.join(base, "git", "attributes"))
    if not os.environ.get("GIT_ATTR_NOSYSTEM"):
        files.append("/etc/gitattributes")
    return any(_non_empty(f) for f in files)


# -- out: the bytes git checkout writes -------------------------------------------------------


class CheckoutBytes:
    """The bytes `git checkout` writes for each file (stored bytes where git converts
    nothing). Use as a context manager: converted contents wait in a temporary file."""

    def __init__(self, repo: GitRepo) -> None:
        self._repo = repo
        self._spool: IO[bytes] | None = None
        self._map: mmap.mmap | None = None
        self._where: dict[str, tuple[str, int, int]] = {}  # path -> (blob, start, end)

    def __enter__(self) -> CheckoutBytes:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    @property
    def converted(self) -> int:
        """How many files went through git's conversion."""
        return len(self._where)

    def read(self, path: str, blob: str) -> bytes:
        hit = self._where.get(path)
        if hit is not None and hit[0] == blob and self._map is not None:
            return self._map[hit[1] : hit[2]]
        return self._repo.read_blob(blob)

    def _load(self, spool: IO[bytes], records: Sequence[tuple[str, str]], nonce: str) -> None:
        """Frame `cat-file` output: `<blob> <nonce>\\n<content>\\n` per record, in order."""
        self._spool = spool
        size = os.fstat(spool.fileno()).st_size
        if size == 0:
            raise OperationFailed("git cat-file --filters printed nothing")
        self._map = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
        headers = [f"{blob} {nonce}\n".encode() for _, blob in records]
        pos = 0
        for i, (path, blob) in enumerate(records):
            if self._map[pos : pos + len(headers[i])] != headers[i]:
                raise OperationFailed(f"cannot read blob {blob} of {path!r} through git's filters")
            start = pos + len(headers[i])
            if i + 1 < len(records):
                end = self._map.find(b"\n" + headers[i + 1], start)
            else:
                end = size - 1
            if end < start or self._map[end : end + 1] != b"\n":
                raise OperationFailed(f"cannot frame git's converted content of {path!r}")
            self._where[path] = (blob, start, end)
            pos = end + 1


def checkout_bytes(repo: GitRepo, files: Sequence[TreeFile], tree: str | None) -> CheckoutBytes:
    """What `git checkout` of `tree` writes for `files` (entries of `tree`; None: the
    attributes are those of the working tree as it is).

    Links and gitlinks are never converted. Raises `OperationFailed` naming the
    path and the filter when a smudge filter fails: call it before writing.
    """
    out = CheckoutBytes(repo)
    regular = [f for f in files if f.mode in REGULAR]
    if not regular:
        return out
    dirs = parent_dirs(f.path for f in regular)
    crlf = autocrlf(repo) == "true"
    attrs: dict[str, str] = {}
    if tree is not None:
        for d in dirs:
            entry = repo.tree_entry(tree, _attributes_path(d))
            if entry is not None and entry[1] in REGULAR:
                attrs[d] = entry[0]
    elif any(os.path.lexists(os.path.join(repo.workdir, _attributes_path(d))) for d in dirs):
        attrs[""] = ""  # some on disk: git reads them there
    looked_up = bool(attrs) or global_attributes(repo)
    if not looked_up and not crlf:
        return out  # git converts nothing: no process at all
    try:
        with tempfile.TemporaryDirectory(prefix="ckpt-convert-") as scratch:
            # an empty index: the attributes are the tree's, never a staged file's
            env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")} if tree else {}
            where: list[str] = []
            cwd = repo.workdir
            if tree is not None and not _attributes_on_disk(repo, attrs, dirs):
                cwd = os.path.join(scratch, "work")  # the tree's own attributes; filters run here
                _write_attributes(repo, attrs, cwd)
                where = ["--git-dir", repo.git_dir, "--work-tree", cwd]
            values = _check_attr(where, cwd, env, [f.path for f in regular]) if looked_up else {}
            chosen = [f for f in regular if crlf or f.path in values]
            if chosen:
                _cat_file(repo, out, chosen, values, where, cwd, env)
    except BaseException:
        out.close()
        raise
    return out


def _write_attributes(repo: GitRepo, attrs: Mapping[str, str], work: str) -> None:
    os.makedirs(work, exist_ok=True)
    for d, blob in attrs.items():
        target = os.path.join(work, _attributes_path(d))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(repo.read_blob(blob))


def _cat_file(
    repo: GitRepo,
    out: CheckoutBytes,
    chosen: Sequence[TreeFile],
    values: Mapping[str, Sequence[str]],
    where: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
) -> None:
    """One `git cat-file --batch --filters`; its output waits in a temporary file."""
    required: list[str] = []
    for name in sorted({n for v in values.values() for n in v}):
        if repo.config_get(f"filter.{name}.smudge") or repo.config_get(f"filter.{name}.process"):
            required += ["-c", f"filter.{name}.required=true"]
    for f in chosen:  # cat-file would print "<blob> missing" and go on
        if not repo.exists(f.id):
            raise NotFound(
                f"blob {f.id} of {f.path!r} is not in the repository",
                hint="run `git fsck`; the checkpoint may be damaged or incomplete",
            )
    nonce = secrets.token_hex(16)
    records = [(f.path, f.id) for f in chosen]
    feed = b"".join(f"{blob} ".encode() + os.fsencode(path) + b"\0" for path, blob in records)
    args = ["git", *where, *required, "cat-file", f"--batch=%(objectname) {nonce}", "--filters"]
    spool = tempfile.TemporaryFile(prefix="ckpt-convert-")  # noqa: SIM115 (`out` closes it)
    try:
        try:
            proc = subprocess.run(
                [*args, "-z"],
                cwd=cwd,
                env=clean_env(env),
                input=feed,
                stdout=spool,
                stderr=subprocess.PIPE,
                check=False,
            )
        except FileNotFoundError as exc:
            raise RepositoryError("git is not on PATH", hint="install git") from exc
        if proc.returncode != 0:
            failed = _failed_record(spool, [f"{b} {nonce}\n".encode() for _, b in records])
            path = None if failed is None else records[failed][0]
            raise conversion_failure(proc.stderr, path, values.get(path or "", []))
        out._load(spool, records, nonce)
    except BaseException:
        spool.close()
        raise


def _attributes_on_disk(repo: GitRepo, attrs: Mapping[str, str], dirs: Iterable[str]) -> bool:
    """Whether the working tree's `.gitattributes` on the way to the paths are the tree's
    (line endings aside): then git can run in the working tree itself."""
    for d in dirs:
        full = os.path.join(repo.workdir, _attributes_path(d))
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            if d in attrs:
                return False
            continue
        if d not in attrs or not stat.S_ISREG(st.st_mode):
            return False
        with open(full, "rb") as fh:
            here = fh.read()
        if here.replace(b"\r\n", b"\n") != repo.read_blob(attrs[d]).replace(b"\r\n", b"\n"):
            return False
    return True


def _check_attr(
    where: Sequence[str], cwd: str, env: Mapping[str, str], paths: Sequence[str]
) -> dict[str, list[str]]:
    """Paths an attribute may convert: {path: the filter drivers named (maybe none)}."""
    proc = run_git(
        [*where, "check-attr", "-z", "--stdin", *_CONVERTING],
        cwd=cwd,
        env=env,
        input=b"".join(os.fsencode(p) + b"\0" for p in paths),
    )
    fields = proc.stdout.split(b"\0")
    out: dict[str, list[str]] = {}
    for i in range(0, len(fields) - 2, 3):
        path, attr, value = fields[i], fields[i + 1], fields[i + 2]
        if value in _NOT_SET:
            continue
        names = out.setdefault(os.fsdecode(path), [])
        if attr == b"filter" and value != b"set":
            names.append(os.fsdecode(value))
    return out


def _failed_record(spool: IO[bytes], headers: Sequence[bytes]) -> int | None:
    """The record `cat-file` was converting when it stopped: the last header it wrote
    (each header is out before its content is converted)."""
    spool.flush()
    spool.seek(0)
    data = spool.read()
    pos, last = 0, None
    for i, header in enumerate(headers):
        at = data.find(header, pos)
        if at < 0:
            break
        last, pos = i, at + len(header)
    return last


def conversion_failure(stderr: bytes, path: str | None, names: Sequence[str]) -> OperationFailed:
    """git's conversion failure as one line naming the path and the filter."""
    lines = [x.strip() for x in stderr.decode("utf-8", "replace").splitlines() if x.strip()]
    for line in lines:
        if found := _FILTER_FAILED.match(line):
            path, names = found.group(1), [found.group(2)]
    cause = next((x for x in lines if not _FILTER_FAILED.match(x)), lines[-1] if lines else "")
    cause = cause.removeprefix("error: ").removeprefix("fatal: ")[:200]
    why = f" ({cause})" if cause else ""
    if path is None:
        return OperationFailed(
            f"git cat-file --filters failed{why}: nothing was written",
            hint="check the filters in .gitattributes and `git config --get-regexp filter`",
        )
    if names:
        return OperationFailed(
            f"filter {names[0]!r} failed on {path!r}{why}: nothing was written",
            hint=f"install or fix the filter (git config --get-regexp filter.{names[0]}), fetch "
            "what it needs (LFS: `git lfs fetch`), and run again",
        )
    return OperationFailed(
        f"git cannot convert {path!r} for the working tree{why}: nothing was written",
        hint="check its attributes (git check-attr -a -- PATH) and run again",
    )


# -- in: the blob git add stores ----------------------------------------------------------------


def checkin_converts(repo: GitRepo, paths: Sequence[str]) -> bool:
    """Whether `git add` may convert any of `paths` (working-tree files): no process."""
    if autocrlf(repo) != "false":
        return True
    for d in parent_dirs(paths):
        if os.path.lexists(os.path.join(repo.workdir, _attributes_path(d))):
            return True
    return global_attributes(repo)


def _quoted(path: bytes) -> bytes:
    """A path for `--stdin-paths`: C-quoted when a newline or a leading quote needs it."""
    if b"\n" not in path and not path.startswith(b'"'):
        return path
    out = bytearray(b'"')
    for byte in path:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def hash_worktree_files(
    repo: GitRepo, paths: Sequence[str], env: Mapping[str, str] | None = None
) -> dict[str, tuple[str, int] | None]:
    """The blob id and mode `git add` gives each working-tree path (None: absent), as
    `git status` compares them: clean filters and line endings applied, in one process."""
    out: dict[str, tuple[str, int] | None] = {}
    regular: dict[str, int] = {}
    for rel in paths:
        try:
            st = os.lstat(os.path.join(repo.workdir, rel))
        except FileNotFoundError:
            out[rel] = None
            continue
        if stat.S_ISREG(st.st_mode):
            regular[rel] = 0o100755 if st.st_mode & 0o111 else 0o100644
        else:  # a link or a nested repository: nothing to convert
            out[rel] = hash_worktree_file(repo, rel)
    if not regular:
        return out
    names = list(regular)
    if checkin_converts(repo, names):
        ids = hash_object_paths(repo, names, env)
    else:
        ids = [str(pygit2.hashfile(os.path.join(repo.workdir, p))) for p in names]
    for rel, oid in zip(names, ids, strict=True):
        out[rel] = (oid, regular[rel])
    return out


def hash_object_paths(
    repo: GitRepo,
    names: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    write: bool = False,
) -> list[str]:
    """`git hash-object [-w] --stdin-paths` of working-tree files: the blob id `git add`
    gives each (clean filters and line endings applied), in one process; with `write`,
    the blobs are stored too."""
    proc = run_git(
        ["hash-object", *(["-w"] if write else []), "--stdin-paths"],
        cwd=repo.workdir,
        env=env,
        input=b"".join(_quoted(os.fsencode(p)) + b"\n" for p in names),
    )
    ids = proc.stdout.decode().split()
    if len(ids) != len(names):
        raise OperationFailed("git hash-object --stdin-paths gave an id per path: it did not")
    return ids


def hash_worktree_file(repo: GitRepo, rel: str) -> tuple[str, int] | None:
    """The blob id and mode git would give the working-tree file `rel` (None: absent).

    As `git add` stores it: a clean filter and line-ending normalization apply
    (`git/convert.py`: through `git hash-object` when an attribute or
    `core.autocrlf` may convert the file, else hashed here as is).
    """
    full = os.path.join(repo.workdir, rel)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return str(pygit2.hash(os.fsencode(os.readlink(full)))), 0o120000
    if stat.S_ISDIR(st.st_mode):  # a nested repository is a gitlink to its HEAD
        if not os.path.exists(os.path.join(full, ".git")):
            return None
        try:
            nested = pygit2.Repository(full)
            return None if nested.head_is_unborn else (str(nested.head.target), 0o160000)
        except pygit2.GitError:
            return None
    mode = 0o100755 if st.st_mode & 0o111 else 0o100644
    if checkin_converts(repo, [rel]):
        return hash_worktree_files(repo, [rel])[rel]
    return str(pygit2.hashfile(full)), mode
