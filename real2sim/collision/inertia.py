"""The 'inertial' stage: mass properties per object, stored in the manifest so every engine gets the same numbers."""
from __future__ import annotations

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.errors import BundleError
from real2sim.core.manifest import InertialSpec
from real2sim.core.meshes import load_mesh, mass_properties, primitive_mass_properties


def object_inertial(bundle: Bundle, oid: str) -> InertialSpec:
    """Mass properties of one object from its density (or mass) and geometry.

    Primitive collision shapes use closed forms (shifted by the primitive pose); otherwise
    the visual mesh when watertight, else its convex hull.
    """
    obj = bundle.object(oid)
    col = obj.collision
    if col.kind in ("box", "cylinder", "sphere"):
        m, _, I = primitive_mass_properties(col.kind, col.size, obj.density, obj.mass)
        T = col.pose.matrix()
        com, I = T[:3, 3], T[:3, :3] @ I @ T[:3, :3].T
    else:
        m, com, I = mass_properties(load_mesh(bundle.path(obj.visual.mesh)), obj.density, obj.mass)
    I = (I + I.T) / 2
    return InertialSpec(round(m, 12), [round(float(c), 12) for c in com], np.round(I, 15).tolist())


def compute_inertials(bundle: Bundle) -> dict:
    """Fill ``inertial`` for every dynamic object; returns {id: mass}."""
    out = {}
    for oid, obj in bundle.manifest.objects.items():
        if obj.fixed or obj.articulation is not None:  # links' mass properties: ArticulatedModel.link_inertials
            continue
        if obj.collision.kind == "pending":
            raise BundleError(f"object '{oid}' has no collision geometry yet; run the collision stage ('real2sim build') first")
        obj.inertial = object_inertial(bundle, oid)
        out[oid] = obj.inertial.mass
    return out
