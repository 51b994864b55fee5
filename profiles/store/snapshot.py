"""Read-only snapshots of an embedded on-disk store, so a running app can be inspected.

An embedded ``surrealkv://`` store serves one process (``lock.py``), so while an app
holds it no other process can open it, not even to read. Instead, the app's store
writes a snapshot beside itself every ``store.snapshot_interval_s`` (on a daemon
thread, off the request path, and only when the store changed), and the CLI's read
commands open a private copy of the newest one and say "as of" when it was taken.

Layout, beside the store folder ``PATH``: ``PATH.snapshot/<as-of stamp>/`` holds one
snapshot (the store's files and ``snapshot.json``), and ``PATH.snapshot/current`` is a
symbolic link naming the newest; it is replaced by a rename, so a reader sees either
the previous snapshot or the new one, never a half-written one. The three newest are
kept (a reader copying an older one when new ones appear can finish).

Why a copy is consistent without stopping the app: surrealkv writes an append-only
commit log (``clog/``) and a small manifest. While no statement runs (the connection is
paused only for a ``stat`` of those few files), their sizes mark a commit boundary; the
snapshot copies each file up to that size while the app goes on appending behind it.
The copy therefore holds exactly the commits made before that moment. A file that was
replaced or shrank meanwhile (not something this engine version does) makes that
snapshot be dropped and taken again at the next interval.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trustroute.profiles.records import iso_z

log = logging.getLogger(__name__)

META = "snapshot.json"
CURRENT = "current"
KEEP = 3  # snapshots kept: the newest, and older ones a reader may still be copying
CHUNK = 1 << 20

#: (relative path, size, mtime_ns, inode) of every file of a store folder
Signature = tuple[tuple[str, int, int, int], ...]


def snapshot_root(path: Path) -> Path:
    """The folder that holds the snapshots of the store at ``path``."""
    return path.with_name(path.name + ".snapshot")


def _signature(folder: Path) -> Signature:
    found = []
    for dirpath, _, names in os.walk(folder):
        for name in names:
            full = Path(dirpath, name)
            info = full.stat()
            found.append((str(full.relative_to(folder)), info.st_size, info.st_mtime_ns,
                          info.st_ino))
    return tuple(sorted(found))


@dataclass(frozen=True)
class Snapshot:
    """One written snapshot: its folder and the moment it holds the store as of."""

    folder: Path
    as_of: datetime
    pid: int

    @property
    def as_of_text(self) -> str:
        """The moment as ISO 8601 UTC with ``Z``."""
        return iso_z(self.as_of.replace(microsecond=0))


def latest(path: Path) -> Snapshot | None:
    """The newest snapshot of the store at ``path``, or None when none was written."""
    link = snapshot_root(path) / CURRENT
    try:
        folder = link.parent / os.readlink(link)
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Snapshot(folder, datetime.fromisoformat(meta["as_of"]), int(meta["pid"]))


def copy_latest(path: Path, into: Path, attempts: int = 5) -> Snapshot | None:
    """Copy the newest snapshot of the store at ``path`` to the folder ``into`` (which
    must not exist), so that it can be opened like any embedded store; None when there
    is no snapshot. A snapshot removed while it is copied (the app wrote newer ones
    meanwhile) is copied again from the newest; OSError when that keeps happening."""
    for _ in range(attempts):
        found = latest(path)
        if found is None:
            return None
        try:
            shutil.copytree(found.folder, into, ignore=shutil.ignore_patterns(META))
            return found
        except (FileNotFoundError, shutil.Error):  # shutil.Error: files gone mid-copy
            shutil.rmtree(into, ignore_errors=True)
    raise OSError(f"the snapshots of {path} were replaced {attempts} times while being "
                  "copied; raise store.snapshot_interval_s")


class SnapshotWriter:
    """Writes snapshots of one open embedded store, every ``interval_s`` on a daemon
    thread (the first one interval after the store opened), when the store changed."""

    def __init__(self, path: Path, paused: Callable[[], AbstractContextManager[object]],
                 interval_s: float) -> None:
        self.path = path
        self.root = snapshot_root(path)
        self.interval_s = interval_s
        self._paused = paused  # holds every statement of the store back while entered
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written: Signature | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="trustroute-snapshot",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread; a copy under way is abandoned (its files are removed)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write()
            except Exception as exc:  # a full disk must not take the app down
                log.warning("could not write a snapshot of %s: %s", self.path, exc)

    def write(self) -> Snapshot | None:
        """Write a snapshot now unless the store is unchanged since the last one;
        returns it (None: unchanged, or abandoned because the app is closing)."""
        with self._paused():  # no commit is half-written while the sizes are read
            as_of = datetime.now(UTC)
            sizes = _signature(self.path)
        if sizes == self._written or (self._written is None and self._same_as_latest(sizes)):
            return None
        self.root.mkdir(exist_ok=True)
        name = as_of.strftime("%Y%m%dT%H%M%S.%fZ")
        tmp = self.root / f".{name}.tmp"
        try:
            if not self._copy(sizes, tmp):
                return None
            (tmp / META).write_text(json.dumps({
                "as_of": as_of.isoformat(), "pid": os.getpid(), "store": str(self.path),
                "files": [list(entry) for entry in sizes]}), encoding="utf-8")
            tmp.rename(self.root / name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        link = self.root / f".{CURRENT}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(name)
        link.replace(self.root / CURRENT)  # atomic: readers see the old or the new one
        self._written = sizes
        self._prune()
        return Snapshot(self.root / name, as_of, os.getpid())

    def _copy(self, sizes: Signature, into: Path) -> bool:
        """Copy each file up to its recorded size; False when abandoned or when a file
        was replaced or shrank meanwhile (then the next interval tries again)."""
        for rel, size, _, inode in sizes:
            source, target = self.path / rel, into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with source.open("rb") as src, target.open("wb") as dst:
                info = os.fstat(src.fileno())
                if info.st_ino != inode or info.st_size < size:
                    log.info("%s changed under the snapshot; trying again later", source)
                    return False
                left = size
                while left > 0:
                    if self._stop.is_set():
                        return False
                    chunk = src.read(min(CHUNK, left))
                    if not chunk:
                        return False
                    dst.write(chunk)
                    left -= len(chunk)
        return True

    def _same_as_latest(self, sizes: Signature) -> bool:
        """True when the newest snapshot on disk already holds these files (a restart
        of an app that wrote nothing since)."""
        found = latest(self.path)
        if found is None:
            return False
        with contextlib.suppress(OSError, ValueError, KeyError):
            meta = json.loads((found.folder / META).read_text(encoding="utf-8"))
            return tuple(tuple(entry) for entry in meta["files"]) == sizes
        return False

    def _prune(self) -> None:
        """Remove all but the ``KEEP`` newest snapshots."""
        names = sorted(p.name for p in self.root.iterdir()
                       if p.is_dir() and not p.name.startswith("."))
        for old in names[:-KEEP]:
            shutil.rmtree(self.root / old, ignore_errors=True)
