"""Small helpers shared by the exporters (asset naming, inertia formatting)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes, hash_bytes, hash_file
from real2sim.core.errors import ExportError
from real2sim.core.objio import strip_obj_materials


def content_addressed_copy(src: Path, dst_dir: Path, suffix: str | None = None) -> str:
    """Copy ``src`` into ``dst_dir`` named by its content hash; returns the file name."""
    src = Path(src)
    if not src.is_file():
        raise ExportError(f"{src}: file referenced by the bundle is missing; re-run the stage that makes it ('real2sim build')")
    ext = suffix or src.suffix.lower()
    if ext == ".obj":  # material libraries are never shipped (an absolute mtllib would point out of the export)
        data = strip_obj_materials(src.read_bytes())
        name = f"{hash_bytes(data)}{ext}"
        dst_dir.mkdir(parents=True, exist_ok=True)
        if not (dst_dir / name).exists():
            atomic_write_bytes(dst_dir / name, data)
        return name
    name = f"{hash_file(src)}{ext}"
    dst_dir.mkdir(parents=True, exist_ok=True)
    if not (dst_dir / name).exists():
        shutil.copyfile(src, dst_dir / name)
    return name


def require_ready(bundle: Bundle) -> None:
    """Refuse to export objects without collision geometry or mass properties."""
    for oid, obj in bundle.manifest.objects.items():
        if obj.collision.kind == "pending":
            raise ExportError(f"object '{oid}' has no collision geometry yet (collision.kind is 'pending'); run 'real2sim build {bundle.root}' first")
        if not obj.fixed and obj.inertial is None and obj.articulation is None:  # links: from the URDF
            raise ExportError(f"object '{oid}' has no mass properties (field objects.{oid}.inertial); run 'real2sim build {bundle.root}' first")


def fmt(values, precision: int = 9) -> str:
    """Space-separated numbers with fixed precision (byte-stable output)."""
    out = []
    for v in np.asarray(values, dtype=float).ravel():
        s = f"{v:.{precision}f}".rstrip("0").rstrip(".")
        out.append("0" if s in ("-0", "") else s)
    return " ".join(out)


def srgb_to_linear(values) -> list[float]:
    """sRGB-encoded colour components in [0, 1] -> linear ones (IEC 61966-2-1).

    The bundle's colours (``rgba``, robot link colours) are display values, as measured from photos and as
    MuJoCo shows them; SAPIEN's renderer treats material colours as linear and encodes its output as sRGB, so
    its exporter converts them (else a 0.09 grey shows as 0.33)."""
    out = []
    for c in values:
        c = min(max(float(c), 0.0), 1.0)
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return out



def articulated_setup(bundle: Bundle, oid: str):
    """What every exporter needs of articulated object ``oid``: ``(model, joint positions {name: q}, dynamics
    {name: (damping, friction)}, link inertials {link: (mass, com, inertia)})``. Joint names the manifest gives and
    the URDF lacks are errors naming the field; dynamics the manifest lacks come from the URDF."""
    from real2sim.core.articulation import ArticulatedModel, ArticulationError
    from real2sim.core.errors import UnknownNameError

    obj = bundle.object(oid)
    art = obj.articulation
    try:
        model = ArticulatedModel.load(bundle.path(art.urdf))
        model.check_joint_values(art.joint_positions, f"scene.json objects.{oid}.articulation.joint_positions")
        model.check_joint_values({k: 0.0 for k in art.joint_dynamics if k not in art.joint_positions},
                                 f"scene.json objects.{oid}.articulation.joint_dynamics")
    except (ArticulationError, UnknownNameError) as exc:
        raise ExportError(f"object '{oid}': {exc}") from exc
    q = {j.name: float(art.joint_positions.get(j.name, 0.0)) for j in model.movable_joints}
    dyn = {}
    for j in model.movable_joints:
        d = art.joint_dynamics.get(j.name)
        dyn[j.name] = (d.damping, d.friction) if d is not None else (j.damping, j.friction)
    return model, q, dyn, model.link_inertials(obj.density)
