"""Primitive fits (box, cylinder, sphere) scored by occupancy IoU against the mesh."""
from __future__ import annotations

import logging

import numpy as np

from real2sim.collision.quality import (
    columns_to_points,
    inside_primitive,
    mesh_contains_columns,
    primitive_mesh,
    sample_columns,
)

log = logging.getLogger(__name__)

_ORDER = {"box": 0, "cylinder": 1, "sphere": 2}


def _clean(a: np.ndarray, scale: float) -> np.ndarray:
    """Snap float noise to zero / +-1 so that axis-aligned fits come out exact."""
    a = np.where(np.abs(a) < 1e-12 * max(scale, 1.0), 0.0, a)
    return np.where(np.abs(np.abs(a) - 1.0) < 1e-12, np.sign(a), a)


def _pose(rot: np.ndarray, centre: np.ndarray, scale: float) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = _clean(rot, 1.0)
    T[:3, 3] = np.where(np.abs(centre) < 1e-12 * scale, 0.0, centre)
    return T


def candidate_primitives(mesh) -> list[dict]:
    """Boxes and cylinders in the mesh frame and in its oriented-bounding-box frame, plus the minimum sphere."""
    import trimesh

    v = np.asarray(mesh.vertices, float)
    scale = float(np.linalg.norm(np.ptp(v, axis=0)))
    frames = [("aabb", np.eye(3))]
    try:
        obb = np.asarray(mesh.bounding_box_oriented.primitive.transform, float)[:3, :3]
        if not np.allclose(np.abs(obb) @ np.ones(3), 1.0, atol=1e-9) or not np.allclose(np.abs(obb).max(0), 1.0, atol=1e-9):
            frames.append(("obb", obb))  # only when it is not just a permutation of the mesh axes
    except Exception as exc:  # qhull can fail on odd inputs; the mesh frame still works
        log.debug("oriented bounding box failed: %s", exc)
    out = []
    boxes = []
    for fname, R in frames:
        local = v @ R
        lo, hi = local.min(0), local.max(0)
        mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        boxes.append({"kind": "box", "size": half.tolist(), "pose": _pose(R, R @ mid, scale), "frame": fname})
        for k in range(3):
            i, j = [a for a in range(3) if a != k]
            c2 = mid[[i, j]]
            r = float(np.sqrt(((local[:, [i, j]] - c2) ** 2).sum(1)).max())
            rot = np.column_stack([R[:, i], R[:, j], R[:, k]])
            if np.linalg.det(rot) < 0:
                rot[:, 0] *= -1
            out.append({"kind": "cylinder", "size": [r, float(half[k])], "pose": _pose(rot, R @ mid, scale),
                        "frame": f"{fname}:{'xyz'[k]}"})
    boxes.sort(key=lambda b: float(np.prod(b["size"])) * (1 + 1e-9 * (b["frame"] != "aabb")))
    out.insert(0, boxes[0])  # the tighter of the two boxes (mesh frame on ties)
    centre, radius = trimesh.nsphere.minimum_nsphere(v)
    out.append({"kind": "sphere", "size": [float(radius)], "pose": _pose(np.eye(3), np.asarray(centre, float), scale),
                "frame": "min_sphere"})
    for c in out:
        c["size"] = [float(x) for x in _clean(np.asarray(c["size"], float), scale)]
    return out


def fit_primitives(mesh, seed: int = 0) -> list[dict]:
    """All candidates with their occupancy IoU vs the watertight ``mesh``, best first.

    Each entry: ``kind``, ``size``, ``pose`` (4x4), ``frame`` and ``iou``.
    """
    cands = candidate_primitives(mesh)
    bounds = np.asarray(mesh.bounds, float).copy()
    for c in cands:
        b = np.asarray(primitive_mesh(c["kind"], c["size"], c["pose"]).bounds)
        bounds = np.array([np.minimum(bounds[0], b[0]), np.maximum(bounds[1], b[1])])
    xy, z = sample_columns(bounds, seed)
    pts = columns_to_points(xy, z)
    in_mesh = mesh_contains_columns(mesh, xy, z)
    for c in cands:
        in_p = inside_primitive(c["kind"], c["size"], c["pose"], pts)
        union = np.count_nonzero(in_mesh | in_p)
        c["iou"] = round(float(np.count_nonzero(in_mesh & in_p) / union), 6) if union else 0.0
    return sorted(cands, key=lambda c: (-c["iou"], _ORDER[c["kind"]]))
