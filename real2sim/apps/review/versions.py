"""Versions, the lock and the undo history of a bundle's ``scene.json`` (the machinery under :mod:`.edits`).

Versions
    :func:`manifest_version` is a content hash of ``scene.json`` and of the count of review writes. An edit
    names the version its caller last saw; if the file on disk is no longer that version (another browser
    tab or process saved in between) the edit is refused with :class:`ConcurrentEditError` instead of
    silently overwriting. The check and the write happen under an exclusive lock file (``.history/lock``),
    so two writers cannot interleave. An edit may name its ``writer`` (the app passes one token per browser
    tab): a writer whose own edit made the newer version is not refused (its slider events overtake their
    answers).

Undo history
    Before each edit the previous ``scene.json`` is copied to ``.history/NNNNNN.json`` together
    with a one-line description (``{"edit": ..., "time": ..., "manifest": {...}}``).
    :func:`undo` restores the newest snapshot and removes it. Successive changes to the same
    field within :data:`COALESCE_S` seconds (a slider being dragged) share one snapshot, so
    one undo reverts the whole drag. At most :data:`MAX_HISTORY` snapshots are kept.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from real2sim.core.bundle import MANIFEST, Bundle, atomic_write_bytes, atomic_write_json
from real2sim.core.errors import BundleError, Real2SimError
from real2sim.core.manifest import Manifest
from real2sim.core.stages import mark_changed

log = logging.getLogger(__name__)

HISTORY_DIR = ".history"
GENERATION = "generation"
LAST_WRITER = "last_writer.json"
COALESCE_S = 2.0
MAX_HISTORY = 200


class EditError(Real2SimError):
    """An edit was refused (bad value, unknown name); the bundle is unchanged."""


class ConcurrentEditError(EditError):
    """``scene.json`` changed on disk since the caller loaded it; the edit was refused."""


@dataclass
class EditResult:
    version: str
    """The new :func:`manifest_version` of ``scene.json``."""
    message: str
    stale: list[str]
    """Stages now marked stale."""


# -- versions and the lock ----------------------------------------------------------------------
def _generation(root: Path) -> int:
    try:
        return int((Path(root) / HISTORY_DIR / GENERATION).read_text())
    except (OSError, ValueError):
        return 0


def manifest_version(root: Path) -> str:
    """Hash of ``scene.json``'s content and of the count of review writes (changes with every save).

    The count makes an undo that restores earlier content a new version: an event a page sent before
    the undo, carrying the earlier version, is then refused instead of re-applying the undone edit."""
    path = Path(root) / MANIFEST
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; this directory is not a scene bundle") from None
    return hashlib.sha256(content + f"\0{_generation(root)}".encode()).hexdigest()[:16]


@contextlib.contextmanager
def locked(root: Path, expected_version: str | None, writer: str | None = None) -> Iterator[None]:
    """Hold the bundle's edit lock; refuse (:class:`ConcurrentEditError`) when ``scene.json`` is not ``expected_version``."""
    d = Path(root) / HISTORY_DIR
    d.mkdir(exist_ok=True)
    with open(d / "lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            _check_version(root, expected_version, writer)
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _check_version(root: Path, expected: str | None, writer: str | None = None) -> None:
    """Refuse when ``scene.json`` is not ``expected`` any more, unless ``writer`` itself made the newer version.

    (A page sends slider events faster than their answers come back: an event may still carry the
    version from before the page's own previous edit; that is not a conflict.)
    """
    if expected is None:
        return
    now = manifest_version(root)
    if now != expected and writer:
        try:
            last = json.loads((Path(root) / HISTORY_DIR / LAST_WRITER).read_text())
        except (OSError, json.JSONDecodeError):
            last = {}
        if last.get("writer") == writer and last.get("version") == now and last.get("kind") != "undo":
            return  # (events a page sent before its own undo are stale: they would redo what it undid)
    if now != expected:
        raise ConcurrentEditError(
            f"{Path(root) / MANIFEST} changed since this page loaded it (version {expected} -> {now}): another tab or "
            "process saved the scene. Nothing was written. Press 'Reload from disk' to see the latest scene, then redo the edit")


def record_writer(root: Path, writer: str | None, kind: str = "edit") -> str:
    """Count one more review write, remember who made it; returns the new version."""
    gen = Path(root) / HISTORY_DIR / GENERATION
    gen.parent.mkdir(exist_ok=True)
    atomic_write_bytes(gen, str(_generation(root) + 1).encode())
    version = manifest_version(root)
    atomic_write_json(Path(root) / HISTORY_DIR / LAST_WRITER, {"writer": writer or "", "version": version, "kind": kind})
    return version


# -- undo history -------------------------------------------------------------------------------
def _entries(root: Path) -> list[Path]:
    d = Path(root) / HISTORY_DIR
    return sorted(d.glob("[0-9]" * 6 + ".json")) if d.is_dir() else []


def history(root: Path) -> list[dict]:
    """Undo snapshots, oldest first: ``[{"file", "edit", "time", "key"}]``."""
    out = []
    for p in _entries(root):
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        out.append({"file": p.name, "edit": d.get("edit", ""), "time": d.get("time", 0.0), "key": d.get("key", "")})
    return out


def snapshot(root: Path, description: str, key: str) -> None:
    """Save the current ``scene.json`` as the newest undo entry (unless a drag of ``key`` is in progress)."""
    entries = _entries(root)
    if entries and key:
        try:
            last = json.loads(entries[-1].read_text())
            if last.get("key") == key and time.time() - float(last.get("last_time", last.get("time", 0))) < COALESCE_S:
                last["last_time"] = time.time()
                atomic_write_json(entries[-1], last)
                return
        except (OSError, json.JSONDecodeError, ValueError):
            pass
    n = int(entries[-1].stem) + 1 if entries else 0
    data = json.loads((Path(root) / MANIFEST).read_text())
    now = time.time()
    atomic_write_json(Path(root) / HISTORY_DIR / f"{n:06d}.json",
                      {"edit": description, "key": key, "time": now, "last_time": now, "manifest": data})
    for old in _entries(root)[:-MAX_HISTORY]:
        old.unlink(missing_ok=True)


# -- one edit -----------------------------------------------------------------------------------
def apply_edit(root: Path, expected_version: str | None, description: str, key: str, changes: Sequence[str],
               change: Callable[[Bundle], None], writer: str | None = None) -> EditResult:
    """Load, apply ``change(bundle)``, snapshot, mark the stages reading ``changes`` stale and save, all under the lock."""
    root = Path(root)
    with locked(root, expected_version, writer):
        bundle = Bundle.load(root)
        before_change = bundle.manifest.to_dict()
        change(bundle)  # raises before anything is written
        if bundle.manifest.to_dict() == before_change:
            # a repeated event with the same values (e.g. a number box's change + submit): no new undo step
            return EditResult(manifest_version(root), f"{description} (unchanged)", [])
        # the edited manifest must still be valid
        Manifest.from_dict(json.loads(json.dumps(bundle.manifest.to_dict())), str(root / MANIFEST))
        stale = mark_changed(bundle, *changes)
        snapshot(root, description, key)
        bundle.save()
        log.info("review edit: %s (stale: %s)", description, ", ".join(stale) or "none")
        return EditResult(record_writer(root, writer), description, stale)


def undo(root: Path, expected_version: str | None = None, writer: str | None = None,
         after: Callable[[Bundle, dict], None] | None = None) -> EditResult:
    """Restore the newest snapshot of ``scene.json`` and drop it from the history. ``after(bundle, before)``: called
    under the lock with the restored bundle and the manifest (dict) it replaced, to bring files that follow the
    manifest (an articulated object's posed mesh) back in line."""
    root = Path(root)
    with locked(root, expected_version, writer):
        entries = _entries(root)
        if not entries:
            raise EditError("nothing to undo: no earlier version of scene.json is stored in .history/")
        entry = json.loads(entries[-1].read_text())
        Manifest.from_dict(entry["manifest"], str(entries[-1]))  # refuse a corrupt snapshot
        before = json.loads((root / MANIFEST).read_text())
        atomic_write_json(root / MANIFEST, entry["manifest"])
        entries[-1].unlink()
        if after is not None:
            after(Bundle.load(root), before)
        log.info("review undo: %s", entry.get("edit"))
        return EditResult(record_writer(root, writer, "undo"), f"undid: {entry.get('edit', '')}", [])
