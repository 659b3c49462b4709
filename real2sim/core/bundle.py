"""The scene bundle: a directory with ``scene.json`` and the files it references.

Layout (see docs/bundle.md)::

    scene.json                      manifest (real2sim.core.manifest.Manifest)
    capture/frames/000000.png       real frames (capture stage)
    background/plate.png            background plate
    masks/<frame>/<entity>.png
    objects/<id>/visual.obj         + texture.png
    objects/<id>/collision/hull_000.obj ...
    exports/mjcf/ exports/usd/ exports/sapien/
    reports/<stage>.json, reports/<stage>_*.png
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from real2sim.core.errors import BundleError, ManifestError, UnknownNameError
from real2sim.core.manifest import MAX_DEPTH, Manifest, ObjectSpec, StageRecord
from real2sim.core.tempfiles import sweep_matching, sweep_temp_files, temp_file_prefix
from real2sim.core.version import __version__

log = logging.getLogger(__name__)
MANIFEST = "scene.json"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so that readers see either the old or the new content, never a mix. The temp file names this
    process; temp files of the same target whose writers were killed are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(prefix=temp_file_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=False) + "\n").encode())


def hash_bytes(*chunks: bytes) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(hashlib.sha256(c).digest())
    return h.hexdigest()[:16]


def hash_file(path: Path) -> str:
    return hash_bytes(Path(path).read_bytes())


def hash_jsonable(obj: Any) -> str:
    return hash_bytes(json.dumps(obj, sort_keys=True, default=str).encode())


def sweep_temp_dirs(final: Path) -> list[str]:
    """Remove what a killed :func:`replace_dir_atomically` of ``final`` left beside it (``.<name>.XXXXXXXX`` temp
    folders and ``.<name>.old``). Links are unlinked, never followed. Returns the names removed."""
    final = Path(final)
    return sweep_matching(final.parent, rf"\.{re.escape(final.name)}\.(?:[a-z0-9_]{{8}}|old)")


@contextlib.contextmanager
def replace_dir_atomically(final: Path) -> Iterator[Path]:
    """Yield a fresh temp directory; on success it replaces ``final``, on error ``final`` is untouched.

    Temp folders an interrupted earlier call left beside ``final`` are swept first."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep_temp_dirs(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _too_deep_at(text: str, limit: int) -> tuple[int, int]:
    """(line, column) where JSON ``text`` first nests deeper than ``limit`` (scanned without recursion)."""
    depth, in_str, esc, line, col = 0, False, False, 1, 0
    for ch in text:
        col += 1
        if ch == "\n":
            line, col = line + 1, 0
        elif in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line, col
        elif ch in "]}":
            depth -= 1
    return line, col


def read_manifest_json(path: Path) -> Any:
    """Parse ``scene.json``; every way the bytes can be wrong (unreadable, not UTF-8, not JSON, nested past the
    parser's stack, numbers past its digit limit) is a :class:`ManifestError` naming the file and the place."""
    fix = "fix it, or restore the file from version control (or the bundle's .history/ snapshots)"
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise BundleError(f"{path}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ManifestError(str(path), f"<byte {exc.start}, line {line}>", f"is not valid UTF-8 ({exc.reason})",
                            fix) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(str(path), f"<line {exc.lineno} col {exc.colno}>", f"is not valid JSON ({exc.msg})",
                            fix) from None
    except RecursionError:
        line, col = _too_deep_at(text, MAX_DEPTH)
        raise ManifestError(str(path), f"<line {line} col {col}>", f"is nested deeper than {MAX_DEPTH} levels "
                            "(no field of a manifest nests that deep)", fix) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ManifestError(str(path), "<root>", f"holds a value JSON cannot give here ({exc})", fix) from None


class Bundle:
    """A scene bundle on disk. ``Bundle.load(dir)`` validates; ``save()`` is atomic."""

    def __init__(self, root: Path, manifest: Manifest):
        self.root = Path(root).resolve()
        self.manifest = manifest

    # -- creation / loading -------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, name: str | None = None, overwrite: bool = False) -> "Bundle":
        root = Path(root)
        if (root / MANIFEST).exists() and not overwrite:
            raise BundleError(f"{root / MANIFEST} already exists; load it with Bundle.load, or pass overwrite=True")
        root.mkdir(parents=True, exist_ok=True)

        b = cls(root, Manifest(name=name or root.resolve().name, provenance={"created_by": f"real2sim {__version__}"}))
        b.save()
        return b

    @classmethod
    def load(cls, root: Path) -> "Bundle":
        root = Path(root)
        path = root / MANIFEST
        if not root.is_dir():
            raise BundleError(f"{root}: not a directory. Create a bundle with 'real2sim demo --out {root}' or 'real2sim init'")
        if not path.is_file():
            raise BundleError(f"{path}: missing. This directory is not a scene bundle; create one with 'real2sim init' or 'real2sim demo'")
        data = read_manifest_json(path)
        return cls(root, Manifest.from_dict(data, str(path)))

    def save(self) -> None:
        atomic_write_json(self.root / MANIFEST, self.manifest.to_dict())

    # -- paths ----------------------------------------------------------------------------
    def path(self, rel: str | Path) -> Path:
        """Absolute path of a bundle path (relative, or absolute inside the bundle), symlinks resolved.

        Every read and write of bundle files goes through here (or :meth:`object_dir`, :meth:`reports_dir`,
        :meth:`exports_dir`, which do): a path that leaves the bundle, directly or through a symlinked folder,
        is refused with a :class:`BundleError` naming it, before anything is read, written or deleted."""
        shown = str(rel)[:200]
        if not isinstance(rel, (str, os.PathLike)) or "\x00" in str(rel):
            raise BundleError(f"path {shown!r} is not a valid file path (a NUL byte or not a string); "
                              "bundle paths are relative text paths inside the bundle")
        if any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in Path(rel).parts):
            raise BundleError(f"path {shown!r}... has a component longer than 255 bytes, which no file system "
                              "stores; shorten the file name")
        try:
            p = (self.root / rel).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, names too long
            raise BundleError(f"path {shown!r} in bundle {self.root} cannot be resolved ({exc}); "
                              "fix the path or the symlink it goes through") from None
        if self.root != p and self.root not in p.parents:
            raise BundleError(f"path '{shown}' leads outside the bundle {self.root} (to {p}); bundle paths must stay "
                              "inside it: replace the symlinked folder by a real one or fix the path")
        return p

    def rel(self, path: Path) -> str:
        """The bundle-relative form of ``path``; refuses a path outside the bundle (after symlinks)."""
        return self.path(path).relative_to(self.root).as_posix()

    def object_dir(self, oid: str) -> Path:
        return self.path(f"objects/{oid}")

    def reports_dir(self) -> Path:
        d = self.path("reports")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def exports_dir(self, engine: str | None = None) -> Path:
        """``exports/`` or ``exports/<engine>/`` (checked to stay inside the bundle; not created)."""
        return self.path(f"exports/{engine}" if engine else "exports")

    # -- objects --------------------------------------------------------------------------
    def object(self, oid: str) -> ObjectSpec:
        try:
            return self.manifest.objects[oid]
        except KeyError:
            raise UnknownNameError("object", oid, self.manifest.objects) from None

    def dynamic_objects(self) -> dict[str, ObjectSpec]:
        return {k: v for k, v in self.manifest.objects.items() if not v.fixed}

    # -- stages ---------------------------------------------------------------------------
    def stage(self, name: str) -> StageRecord:
        return self.manifest.stages.setdefault(name, StageRecord())

    def stage_is_current(self, name: str, input_hash: str) -> bool:
        rec = self.manifest.stages.get(name)
        return bool(rec and rec.status in ("done", "poor") and rec.input_hash == input_hash
                    and all(self.path(o).exists() for o in rec.outputs))

    def mark_stale(self, *names: str) -> None:
        for n in names:
            rec = self.manifest.stages.get(n)
            if rec and rec.status in ("done", "poor"):
                rec.status = "stale"

    def write_report(self, stage: str, data: dict) -> str:
        path = self.path(f"reports/{stage}.json")
        atomic_write_json(path, data)
        return self.rel(path)

    def read_report(self, stage: str) -> dict | None:
        """The report :meth:`write_report` wrote for ``stage`` (``reports/<stage>.json``), or None when there is none."""
        path = self.path(f"reports/{stage}.json")
        return json.loads(path.read_text()) if path.is_file() else None


# Diagnostic fields that legitimately differ between runs (wall time, cache state);
# they are left out of :func:`bundle_digest`. Every key named ``seconds``, ``*_seconds`` or ``seconds_*`` is a timing and volatile
# (:func:`is_volatile_key`), so a new timing cannot make two identical builds differ: name timings that way.
VOLATILE_KEYS = frozenset({"seconds", "cache_hit"})


def is_volatile_key(key) -> bool:
    """Whether a JSON key holds a timing or cache state (left out of digests and stage fingerprints)."""
    return key in VOLATILE_KEYS or (isinstance(key, str) and (key.endswith("_seconds") or key.startswith("seconds_")))


def _strip_volatile(obj):
    if isinstance(obj, dict):
        return {k: _strip_volatile(v) for k, v in obj.items() if not is_volatile_key(k)}
    if isinstance(obj, list):
        return [_strip_volatile(v) for v in obj]
    return obj


def content_hash(path: Path) -> str:
    """Hash of a file's content; JSON files without volatile keys (:func:`is_volatile_key`: timings change,
    results do not)."""
    path = Path(path)
    if path.suffix == ".json":
        return hash_jsonable(_strip_volatile(json.loads(path.read_text())))
    return hash_file(path)


def bundle_digest(root: Path, exclude_dirs=("exports",)) -> dict[str, str]:
    """Content hash of every file in a bundle: ``{relative path: hash}``.

    JSON files are hashed without :data:`VOLATILE_KEYS`. Same inputs and seeds must
    give the same digest (tested). ``exports/`` is left out by default since it is
    derived and re-creatable.
    """
    root = Path(root)
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel.split("/")[0] in exclude_dirs:
            continue
        out[rel] = content_hash(p)
    return out
