"""A checkpoint's objects written as one pack, not one loose file each.

A full checkpoint writes about fifty objects: the changed blobs, the trees on
their paths, the commit, its notes. libgit2 writes each as a loose file (a
temporary file, a fan-out directory, a rename): ~0.17 ms each here, half of a
checkpoint's time at 10k files. Inside `GitRepo.batched_objects()`:

- writes go to memory: a second handle on the repository (`Batch.writer`)
  whose object database has `MemoryObjects` in front of git's own backends, so
  libgit2 hashes, validates and deduplicates exactly as it does for a loose
  write (an object already stored is not written again);
- the repository's own handle reads them through a `MemoryObjects` at the
  lowest priority: it is asked only when git's pack and loose backends miss,
  so reads of stored objects cost what they did;
- they reach the disk as one pack and its index (`write_pack`: version 2, no
  deltas, as `git pack-objects --window=0` writes), before anything outside
  this process can name them: before a ref moves (`cas_ref`), before git runs
  (`run_git`), before the watcher's stamp names a tree, and when the batch ends
  (`flush_all`), however few they are.

Each pack a batch writes is kept (`pack-*.keep`, created before the pack is renamed
into place, held open, removed when the batch ends): `git repack -a -d` and
`git gc --prune=now` never delete a kept pack, so a concurrent one cannot take the
objects of a checkpoint between their write and the ref transaction that names
them (a pack that nothing named yet is unreachable, and `repack -a -d` drops
unreachable packed objects). The batch ends after the transaction, once the refs
name the objects. A `.keep` a killed writer left (nobody holds it open) is removed
by `git ckpt doctor`; until then its pack is only kept out of repacks.

A `kill -9` before the write loses objects nothing named yet. The pack is
renamed into place before its index, as git does (a pack is found by its
index), so no reader sees an index without its pack; a temporary file left by a
kill is named `tmp_pack_*` / `tmp_idx_*`, which `git gc` removes. The small packs
this leaves (one per checkpoint) are rolled up by `packing.py`. (The tool opens
SHA-1 repositories only: `discover.py`.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pygit2

from git_agentckpt.crashpoint import crash_point
from git_agentckpt.git.discover import second_handle
from git_agentckpt.git.syserr import last_error_message, translated

PACK_OBJECTS = "ckpt.packObjects"  # false: no batch, no packing (`packing.enabled`)
TMP_TRIES = 5  # writes of a pack whose temporary files a concurrent prune removed
KEEP_NOTE = "git ckpt: objects of a write in progress (pid {pid}); removed once its refs moved\n"
MAX_PENDING_BYTES = 32 << 20  # a batch holding more is written out at the next write
_WRITE_PRIORITY = 1000  # before git's own backends (pack: 2, loose: 1)
_READ_PRIORITY = 0  # after them

Stored = dict[pygit2.Oid, tuple[int, bytes]]


class MemoryObjects(pygit2.OdbBackend):
    """An object database backend over a dict of objects (pygit2's callback protocol:
    KeyError is "not here", ValueError "ambiguous"). `writable` False: libgit2 writes
    to it only when every backend before it failed, so it fails too, with their error."""

    def __init__(self, objects: Stored, writable: bool) -> None:
        super().__init__()
        self.objects = objects
        self.writable = writable
        self.pending_bytes = 0

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        return self.objects[oid]

    def read_prefix_cb(self, short: str) -> tuple[int, bytes, pygit2.Oid]:
        oid = self.exists_prefix_cb(short)
        kind, data = self.objects[oid]
        return kind, data, oid

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, data = self.objects[oid]
        return kind, len(data)

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        if not self.writable:
            raise pygit2.GitError(last_error_message() or "cannot write the object")
        self.objects[oid] = (kind, bytes(data))
        self.pending_bytes += len(data)

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid in self.objects

    def exists_prefix_cb(self, short: str) -> pygit2.Oid:
        hits = [o for o in self.objects if str(o).startswith(short)]
        if not hits:
            raise KeyError(short)
        if len(hits) > 1:
            raise ValueError(short)
        return hits[0]

    def refresh_cb(self) -> None:
        return None


@dataclass
class Batch:
    """The objects of one batch: written through `writer` (opened at the first write),
    read by `repo` too, through its lowest-priority `MemoryObjects` over the same dict."""

    repo: pygit2.Repository
    objects_dir: str
    memory: MemoryObjects
    durable: bool = False  # core.fsyncObjectFiles: the pack is synced to disk
    kept: list[KeptPack] = field(default_factory=list)  # its packs' .keep, until it ends
    _writer: pygit2.Repository | None = None

    @property
    def objects(self) -> Stored:
        return self.memory.objects

    @property
    def writer(self) -> pygit2.Repository:
        if self._writer is None:
            self._writer = second_handle(self.repo)
            self._writer.odb.add_backend(self.memory, _WRITE_PRIORITY)
        return self._writer


# the open batches, by the id of the handle they write for
_OPEN: dict[int, Batch] = {}


def reader_for(repo: pygit2.Repository) -> MemoryObjects:
    """The lowest-priority backend that lets `repo` read a batch's objects: add it once
    per handle (libgit2 cannot remove a backend) and keep it with the handle."""
    reader = MemoryObjects({}, writable=False)
    repo.odb.add_backend(reader, _READ_PRIORITY)
    return reader


def open_batch(
    repo: pygit2.Repository, objects_dir: str, reader: MemoryObjects, *, durable: bool = False
) -> Batch:
    """A batch writing for `repo`, whose `reader_for` backend is `reader`."""
    batch = Batch(repo, objects_dir, MemoryObjects(reader.objects, writable=True), durable)
    _OPEN[id(repo)] = batch
    return batch


def close_batch(batch: Batch) -> None:
    """Write out what the batch holds, and the writes waiting for it; forget it. Its
    packs are no longer kept: whatever was to name their objects has run."""
    try:
        flush_all()
    finally:
        _OPEN.pop(id(batch.repo), None)
        while batch.kept:
            batch.kept.pop().release()


def flush(batch: Batch) -> None:
    """Write the batch's objects as one kept pack (module doc)."""
    items = list(batch.objects.items())
    if not items:
        return
    # out of memory first: libgit2 skips writing an object some backend already has
    batch.objects.clear()
    batch.memory.pending_bytes = 0
    with translated("cannot write to the object store", batch.objects_dir):
        rows = [(o.raw, k, d) for o, (k, d) in items]
        pack_dir = os.path.join(batch.objects_dir, "pack")
        write_pack(pack_dir, rows, durable=batch.durable, kept=batch.kept)


# writes that name objects still in memory, done once those are on disk (`when_on_disk`)
_DEFERRED: list[Callable[[], None]] = []


def flush_all() -> None:
    """Write every open batch's objects: before a ref moves, git runs, or a file of ours
    names an object (module doc); then the writes that waited for them. If the objects
    cannot be written (a full disk), those writes never run: they would name objects
    that are not there (the watcher's stamp of a tree never written)."""
    try:
        for batch in list(_OPEN.values()):
            flush(batch)
    except BaseException:
        _DEFERRED.clear()
        raise
    while _DEFERRED:
        _DEFERRED.pop(0)()


def when_on_disk(action: Callable[[], None]) -> None:
    """Run `action`, a write that names objects (the watcher's stamp), once the objects
    are on disk: now when no batch holds any, else when they are written (it is then
    lost with them if the process dies first: nothing may depend on it)."""
    if any(batch.objects for batch in _OPEN.values()):
        _DEFERRED.append(action)
    else:
        action()


def holds(oid: str) -> bool:
    """Whether an open batch holds object `oid` in memory (it reaches the disk in a kept
    pack before anything names it)."""
    key = pygit2.Oid(hex=oid)
    return any(key in batch.objects for batch in _OPEN.values())


def over_budget(batch: Batch) -> bool:
    return batch.memory.pending_bytes > MAX_PENDING_BYTES


# -- the pack --------------------------------------------------------------------------


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 3 bits of type, then the size 4 + 7n bits at a time."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def pack_bytes(objects: list[tuple[bytes, int, bytes]]) -> tuple[bytes, bytes]:
    """A version 2 pack of `objects` [(raw id, type, body)] and its version 2 index: whole
    objects, compressed at the level of git's loose objects (`core.looseCompression`'s
    default, 1: what the checkpoint wrote before; a roll-up or `gc` repacks them)."""
    body = bytearray(b"PACK" + struct.pack(">II", 2, len(objects)))
    rows: list[tuple[bytes, int, int]] = []  # raw id, crc32, offset
    for raw, kind, data in objects:
        entry = _entry_header(kind, len(data)) + zlib.compress(data, 1)
        rows.append((raw, zlib.crc32(entry), len(body)))
        body += entry
    checksum = hashlib.sha1(body).digest()
    body += checksum
    rows.sort()
    fanout = [0] * 256
    for raw, _crc, _off in rows:
        fanout[raw[0]] += 1
    running = 0
    for i in range(256):
        running += fanout[i]
        fanout[i] = running
    index = bytearray(b"\xfftOc" + struct.pack(">I", 2))
    index += struct.pack(">256I", *fanout)
    index += b"".join(raw for raw, _c, _o in rows)
    index += struct.pack(f">{len(rows)}I", *(crc for _r, crc, _o in rows))
    index += struct.pack(f">{len(rows)}I", *(off for _r, _c, off in rows))
    index += checksum
    index += hashlib.sha1(index).digest()
    return bytes(body), bytes(index)


@dataclass
class KeptPack:
    """The `.keep` of a pack a batch wrote, held open until `release` (while a process
    has it open, `git ckpt doctor` leaves it: `git/leftovers.py`)."""

    path: str
    fd: int

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)


def _keep(pack_dir: str, name: str) -> KeptPack | None:
    """A `.keep` for pack `name`, made before the pack is in place (None: one exists: the
    same pack, written by another batch that keeps it)."""
    path = os.path.join(pack_dir, name + ".keep")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:
        return None
    kept = KeptPack(path, fd)
    try:
        os.write(fd, KEEP_NOTE.format(pid=os.getpid()).encode())
    except OSError:
        kept.release()
        raise
    return kept


def write_pack(
    pack_dir: str,
    objects: list[tuple[bytes, int, bytes]],
    *,
    durable: bool = False,
    kept: list[KeptPack] | None = None,
) -> str:
    """Write `objects` as `pack-<checksum>.pack` and `.idx` in `pack_dir`: each to a
    temporary file first, the pack renamed into place before its index. The name.
    With `kept`, a `.keep` is made first and added to it (module doc).

    `durable` (`core.fsyncObjectFiles`, which libgit2 and git honour for the loose
    objects these replace): both files and the directory are synced to disk, so a
    power cut cannot leave an index naming a pack that was never written. Without it,
    as loose objects by default, a `kill -9` loses nothing (the page cache survives)."""
    body, index = pack_bytes(objects)
    if len(body) >= 1 << 31:  # the index's 32-bit offsets; batches stay far below
        raise ValueError("a batch of objects too large for one pack")
    name = "pack-" + body[-20:].hex()
    os.makedirs(pack_dir, exist_ok=True)
    if kept is not None and (keep := _keep(pack_dir, name)) is not None:
        kept.append(keep)
    for tries in range(1, TMP_TRIES + 1):
        try:
            _place(pack_dir, name, (body, index), durable)
            break
        except FileNotFoundError as exc:
            # `git prune --expire=now` removes `tmp_*` files of objects/pack written
            # within its second: write them again
            if tries == TMP_TRIES or not os.path.basename(str(exc.filename)).startswith("tmp_"):
                raise
    if durable:
        fd = os.open(pack_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return name


def _place(pack_dir: str, name: str, files: tuple[bytes, bytes], durable: bool) -> None:
    """The pack and its index through temporary files, the pack renamed in first."""
    with (
        _temporary(pack_dir, "tmp_pack_", files[0], durable) as tmp_pack,
        _temporary(pack_dir, "tmp_idx_", files[1], durable) as tmp_idx,
    ):
        os.replace(tmp_pack, os.path.join(pack_dir, name + ".pack"))
        crash_point("objects.pack")
        os.replace(tmp_idx, os.path.join(pack_dir, name + ".idx"))


@contextlib.contextmanager
def _temporary(directory: str, prefix: str, data: bytes, durable: bool) -> Iterator[str]:
    """`data` in a new read-only file in `directory`; removed if still there at the end."""
    fd, path = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), 0o444)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
