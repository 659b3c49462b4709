"""Clips with a known truth for mask propagation (``benchmarks/bench_capture_propagate.py``, tests): an object of the
mask benchmark (:mod:`real2sim.demos.mask_cases`, compact or thin) in a real plate, the WidowX rendered moving over it
(its cast shadow, sensor noise, exposure drift; :func:`real2sim.demos.robot_clips.make_robot_clip`).

- :func:`still_clips`: the object pasted into the plate, still (the arm passes over it);
- :func:`carried_clips`: the object still for three frames, then moving 3 px right and 1 px down a frame, drawn
  under the arm with its own sensor noise (as a grasped object is carried).

Each clip: ``(name, family, frames (n, h, w, 3) uint8, object masks (n, h, w) bool, robot masks (n, h, w) bool)``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

FAMILIES = ("base", "thin", "support", "lowcontrast")
"""The mask benchmark's families the clips draw their objects from."""


def _plates(data: Path, quick: bool) -> list[tuple[int, str, np.ndarray]]:
    from real2sim.demos import mask_cases as mc

    plates = list(mc.plates(data).items())
    return [(k, name, plate) for k, (name, plate) in enumerate(plates[:2] if quick else plates)]


def still_clip(data: Path, k: int, name: str, plate: np.ndarray, family: str, s: int):
    """The ``s``-th still clip of ``family`` over the ``k``-th real plate ``name`` (see the module docstring)."""
    from real2sim.demos import mask_cases as mc
    from real2sim.demos.robot_clips import make_robot_clip

    seed = 5000 + 97 * k + 13 * s + 1000 * FAMILIES.index(family)
    case = mc.synthetic_case(data, name, plate, family, list(mc.OBJECTS)[(k + s) % len(mc.OBJECTS)], seed)
    clip = make_robot_clip(case.image, n_frames=12, seed=300 + seed % 1000)
    return f"{case.name}#{s}", family, clip.frames, np.repeat(case.mask[None], len(clip.frames), 0), clip.masks


def still_clips(data: Path, quick: bool = False):
    """Every real plate in ``data``, family and two seeds (``quick``: two plates, one seed)."""
    for k, name, plate in _plates(data, quick):
        for family in FAMILIES:
            for s in range(1 if quick else 2):
                yield still_clip(data, k, name, plate, family, s)


def _shifted(a: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """``a`` (``(h, w, ...)``) moved ``dx`` px right and ``dy`` px down, zeros where nothing moved in."""
    out = np.zeros_like(a)
    h, w = a.shape[:2]
    out[dy:, dx:] = a[:h - dy, :w - dx]
    return out


def carried_clip(data: Path, k: int, name: str, plate: np.ndarray, family: str):
    """The carried clip of ``family`` over the ``k``-th real plate ``name`` (see the module docstring)."""
    from real2sim.demos import mask_cases as mc
    from real2sim.demos.robot_clips import make_robot_clip

    objects = list(mc.OBJECTS)
    seed = 7000 + 97 * k + 1000 * FAMILIES.index(family)
    case = mc.synthetic_case(data, name, plate, family, objects[k % len(objects)], seed)
    clip = make_robot_clip(case.plate, n_frames=12, seed=300 + seed % 1000)
    rng = np.random.default_rng(seed)
    frames, objs = clip.frames.copy(), []
    for i in range(len(frames)):
        d = max(0, i - 2)
        obj, img = _shifted(case.mask, 3 * d, d), _shifted(case.image, 3 * d, d)
        seen = obj & ~clip.masks[i]
        noisy = img[seen].astype(np.float32) + rng.normal(0, 3.0, (int(seen.sum()), 3))
        frames[i][seen] = np.clip(noisy, 0, 255).astype(np.uint8)
        objs.append(obj)
    return f"carried/{case.name}", family, frames, np.stack(objs), clip.masks


def carried_clips(data: Path, quick: bool = False):
    """Every real plate in ``data`` and family, one seed, the object carried (see the module docstring)."""
    for k, name, plate in _plates(data, quick):
        for family in FAMILIES:
            yield carried_clip(data, k, name, plate, family)
