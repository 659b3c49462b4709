"""Articulated objects: a URDF (links joined by prismatic / revolute / fixed joints) read engine-neutrally.

An articulated object of a bundle (``objects.<id>.articulation``, docs/bundle.md) is a URDF packaged into the
bundle (``objects/<id>/urdf/``, its meshes converted to OBJ beside it) plus the joint positions and joint dynamics
the manifest stores. Every exporter reads it through :class:`ArticulatedModel`, so the three engines get the same
links, joint frames, limits and, above all, the same mass properties (:meth:`ArticulatedModel.link_inertials`:
the URDF's ``<inertial>`` where a link has one, else the link's collision geometry at the object's density).

Conventions: the object frame is the root link's frame; joint values are metres (prismatic) or radians
(revolute, continuous); a joint's axis is a unit vector in the joint frame; ``damping`` is viscous (N s/m or
N m s/rad) and ``friction`` a Coulomb force or torque (N or N m), as URDF's ``<dynamics>`` defines them.
"""
from __future__ import annotations

import hashlib
import logging
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.errors import BundleError, MeshError, UnknownNameError

log = logging.getLogger(__name__)

SUPPORTED_JOINT_TYPES = ("fixed", "prismatic", "revolute", "continuous")
MOVABLE_JOINT_TYPES = ("prismatic", "revolute", "continuous")
MIN_LINK_MASS = 1e-3
"""kg given to a movable link with neither an ``<inertial>`` nor any geometry (engines need a positive mass)."""


class ArticulationError(BundleError):
    """An object URDF cannot be used: names the file, link or joint and the fix."""


@dataclass
class Geometry:
    """One URDF geometry: ``kind`` box (``size`` = full extents, as URDF), cylinder (radius, length; local Z),
    sphere (radius) or mesh (``mesh`` file, ``scale``)."""

    kind: str
    size: list[float] = field(default_factory=list)
    mesh: Path | None = None
    scale: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0])


@dataclass
class Shape:
    origin: np.ndarray  # (4, 4) in the link frame
    geometry: Geometry
    rgba: list[float] = field(default_factory=lambda: [0.7, 0.7, 0.7, 1.0])
    name: str = ""


@dataclass
class Link:
    name: str
    visuals: list[Shape]
    collisions: list[Shape]
    inertial: tuple[float, np.ndarray, np.ndarray] | None  # (mass, com (3,), inertia about com (3, 3)) link frame


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    lower: float = 0.0
    upper: float = 0.0
    damping: float = 0.0
    friction: float = 0.0

    @property
    def movable(self) -> bool:
        return self.type in MOVABLE_JOINT_TYPES

    @property
    def limited(self) -> bool:
        return self.type in ("prismatic", "revolute")

    def motion(self, q: float) -> np.ndarray:
        """Child frame w.r.t. the joint frame at joint value ``q``."""
        T = np.eye(4)
        if self.type == "prismatic":
            T[:3, 3] = self.axis * q
        elif self.type in ("revolute", "continuous"):
            T[:3, :3] = _axis_angle(self.axis, q)
        return T


def _axis_angle(axis, angle: float) -> np.ndarray:
    k = np.asarray(axis, float)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _floats(text: str | None, n: int, where: str, path: Path, default: str) -> list[float]:
    try:
        vals = [float(v) for v in (text if text is not None else default).split()]
    except ValueError:
        vals = []
    if len(vals) != n or not np.isfinite(vals).all():
        raise ArticulationError(f"{path}: {where} must be {n} numbers, got {text!r}. Fix: correct the URDF")
    return vals


def _origin(el, where: str, path: Path) -> np.ndarray:
    T = np.eye(4)
    if el is None:
        return T
    x, y, z = _floats(el.get("xyz"), 3, f"{where} <origin xyz>", path, "0 0 0")
    r, p, yw = _floats(el.get("rpy"), 3, f"{where} <origin rpy>", path, "0 0 0")
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(yw), np.sin(yw)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    T[:3, :3] = Rz @ Ry @ Rx
    T[:3, 3] = [x, y, z]
    return T


def resolve_mesh_path(filename: str, urdf: Path) -> Path:
    """A URDF mesh ``filename`` as a file path: relative to the URDF's folder, ``file://``, or ``package://PKG/..``
    (PKG looked for among the URDF's parent folders)."""
    if filename.startswith("file://"):
        return Path(filename[len("file://"):])
    if filename.startswith("package://"):
        pkg, _, rest = filename[len("package://"):].partition("/")
        for parent in [urdf.parent, *urdf.parent.parents]:
            if parent.name == pkg:
                return parent / rest
            if (parent / pkg).is_dir():
                return parent / pkg / rest
        return urdf.parent / rest
    p = Path(filename)
    return p if p.is_absolute() else urdf.parent / p


class ArticulatedModel:
    """A parsed, validated object URDF: ``links`` by name, ``joints`` in file order, ``root`` link."""

    def __init__(self, path: Path, name: str, links: dict[str, Link], joints: list[Joint], root: str):
        self.path, self.name, self.links, self.joints, self.root = path, name, links, joints, root

    # -- reading ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path, check_meshes: bool = True) -> "ArticulatedModel":
        """Parse and validate ``path``; every problem is an :class:`ArticulationError` naming the file, the link
        or joint, and the fix."""
        path = Path(path)
        if not path.is_file():
            raise ArticulationError(f"{path}: URDF file not found. Fix: give the path of the object's .urdf file")
        try:
            root_el = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise ArticulationError(f"{path}: not valid XML ({exc}). Fix: correct the URDF") from exc
        if root_el.tag != "robot":
            raise ArticulationError(f"{path}: the root element is <{root_el.tag}>, not <robot>. Fix: give a URDF file")
        materials = {}
        for mat in root_el.findall("material"):
            c = mat.find("color")
            if mat.get("name") and c is not None:
                materials[mat.get("name")] = _floats(c.get("rgba"), 4, f"material '{mat.get('name')}' rgba", path,
                                                     "0.7 0.7 0.7 1")
        links: dict[str, Link] = {}
        for l_el in root_el.findall("link"):
            lname = l_el.get("name")
            if not lname:
                raise ArticulationError(f"{path}: a <link> has no name. Fix: name every link")
            if lname in links:
                raise ArticulationError(f"{path}: link '{lname}' is defined twice. Fix: rename one")
            vis = [cls._shape(v, f"link '{lname}' visual", path, materials, check_meshes) for v in l_el.findall("visual")]
            col = [cls._shape(c, f"link '{lname}' collision", path, materials, check_meshes)
                   for c in l_el.findall("collision")]
            links[lname] = Link(lname, [s for s in vis if s], [s for s in col if s], cls._inertial(l_el, lname, path))
        if not links:
            raise ArticulationError(f"{path}: no <link> elements. Fix: give a URDF with at least one link")
        joints: list[Joint] = []
        children: dict[str, str] = {}
        for j_el in root_el.findall("joint"):
            joints.append(cls._joint(j_el, path, links, children))
        roots = [n for n in links if n not in children]
        if len(roots) != 1:
            raise ArticulationError(f"{path}: the links form {len(roots)} trees (roots: {', '.join(roots) or 'none'}); "
                                    "an object must be one tree with one root link. Fix: join the parts with "
                                    "fixed joints, or add them as separate objects")
        model = cls(path, root_el.get("name") or path.stem, links, joints, roots[0])
        poses = model.link_poses({})
        unreached = sorted(set(links) - set(poses))
        if unreached:  # pragma: no cover - a second parent is caught above; this is a cycle through the root
            raise ArticulationError(f"{path}: links {unreached} are not reached from root '{roots[0]}' (a loop). "
                                    "Fix: make the joints a tree")
        return model

    @staticmethod
    def _shape(el, where: str, path: Path, materials: dict, check_meshes: bool) -> Shape | None:
        g_el = el.find("geometry")
        if g_el is None or len(g_el) == 0:
            raise ArticulationError(f"{path}: {where} has no <geometry>. Fix: add one (box, cylinder, sphere or mesh)")
        g = g_el[0]
        if g.tag == "box":
            geom = Geometry("box", _floats(g.get("size"), 3, f"{where} box size", path, ""))
        elif g.tag == "cylinder":
            geom = Geometry("cylinder", [_floats(g.get("radius"), 1, f"{where} cylinder radius", path, "")[0],
                                         _floats(g.get("length"), 1, f"{where} cylinder length", path, "")[0]])
        elif g.tag == "sphere":
            geom = Geometry("sphere", _floats(g.get("radius"), 1, f"{where} sphere radius", path, ""))
        elif g.tag == "mesh":
            fn = g.get("filename") or ""
            mesh = resolve_mesh_path(fn, path)
            if check_meshes and not mesh.is_file():
                raise ArticulationError(f"{path}: {where} references the mesh '{fn}', which is not at {mesh}. Fix: put "
                                        "the mesh there or correct the filename (relative to the URDF's folder)")
            geom = Geometry("mesh", mesh=mesh, scale=_floats(g.get("scale"), 3, f"{where} mesh scale", path, "1 1 1"))
        else:
            raise ArticulationError(f"{path}: {where} has geometry <{g.tag}>, which no engine exporter supports. "
                                    "Fix: use box, cylinder, sphere or mesh")
        if geom.kind != "mesh" and min(geom.size) <= 0:
            raise ArticulationError(f"{path}: {where} {geom.kind} has a non-positive size {geom.size}. Fix: correct it")
        rgba = [0.7, 0.7, 0.7, 1.0]
        m = el.find("material")
        if m is not None:
            c = m.find("color")
            if c is not None:
                rgba = _floats(c.get("rgba"), 4, f"{where} material rgba", path, "0.7 0.7 0.7 1")
            elif m.get("name") in materials:
                rgba = materials[m.get("name")]
        return Shape(_origin(el.find("origin"), where, path), geom, [float(np.clip(c, 0, 1)) for c in rgba],
                     el.get("name") or "")

    @staticmethod
    def _inertial(l_el, lname: str, path: Path):
        inn = l_el.find("inertial")
        if inn is None:
            return None
        m_el, i_el = inn.find("mass"), inn.find("inertia")
        mass = _floats(m_el.get("value") if m_el is not None else None, 1, f"link '{lname}' inertial mass", path, "")[0]
        if mass <= 0:
            return None  # massless: computed from the geometry like a link without <inertial>
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        v = {k: _floats(i_el.get(k, "0") if i_el is not None else "0", 1, f"link '{lname}' inertia {k}", path, "0")[0]
             for k in keys}
        I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]])
        T = _origin(inn.find("origin"), f"link '{lname}' inertial", path)
        I = T[:3, :3] @ I @ T[:3, :3].T
        if np.linalg.eigvalsh(I).min() <= 0:
            raise ArticulationError(f"{path}: link '{lname}' has an inertia that is not positive definite. Fix: correct "
                                    "its <inertia>, or remove the <inertial> to have it computed from the geometry")
        return mass, T[:3, 3].copy(), I

    @staticmethod
    def _joint(j_el, path: Path, links: dict, children: dict) -> Joint:
        name = j_el.get("name") or ""
        if not name:
            raise ArticulationError(f"{path}: a <joint> has no name. Fix: name every joint")
        jtype = j_el.get("type") or ""
        if jtype not in SUPPORTED_JOINT_TYPES:
            raise ArticulationError(f"{path}: joint '{name}' has type '{jtype}', which no engine supports for objects "
                                    f"(supported: {', '.join(SUPPORTED_JOINT_TYPES)}). Fix: change it to one of those, "
                                    "or split it into several of them")
        if j_el.find("mimic") is not None:
            raise ArticulationError(f"{path}: joint '{name}' mimics another joint (<mimic>), which object export does "
                                    "not support. Fix: remove the <mimic> element (the joint then moves freely)")
        p_el, c_el = j_el.find("parent"), j_el.find("child")
        parent, child = (p_el.get("link") if p_el is not None else None), (c_el.get("link") if c_el is not None else None)
        for what, link in (("parent", parent), ("child", child)):
            if link not in links:
                raise UnknownNameError(f"{what} link of joint '{name}' in {path}", str(link), links)
        if child in children:
            raise ArticulationError(f"{path}: link '{child}' is the child of joints '{children[child]}' and '{name}' (a "
                                    "kinematic loop). Fix: URDF objects are trees; remove one of the joints")
        children[child] = name
        ax = j_el.find("axis")
        axis = np.array(_floats(ax.get("xyz") if ax is not None else None, 3, f"joint '{name}' axis", path, "1 0 0"))
        if jtype != "fixed" and np.linalg.norm(axis) < 1e-9:
            raise ArticulationError(f"{path}: joint '{name}' has a zero axis. Fix: give <axis xyz=...> a direction")
        axis = axis / max(np.linalg.norm(axis), 1e-12)
        lower = upper = 0.0
        if jtype in ("prismatic", "revolute"):
            lim = j_el.find("limit")
            if lim is None or lim.get("lower") is None or lim.get("upper") is None:
                raise ArticulationError(f"{path}: {jtype} joint '{name}' has no <limit lower=.. upper=..>. Fix: add its "
                                        "range (m for prismatic, rad for revolute), or make it 'continuous'")
            lower = _floats(lim.get("lower"), 1, f"joint '{name}' lower limit", path, "")[0]
            upper = _floats(lim.get("upper"), 1, f"joint '{name}' upper limit", path, "")[0]
            if upper < lower:
                raise ArticulationError(f"{path}: joint '{name}' has lower limit {lower} above upper {upper}. Fix: swap them")
        dyn = j_el.find("dynamics")
        damping = friction = 0.0
        if dyn is not None:
            damping = _floats(dyn.get("damping", "0"), 1, f"joint '{name}' damping", path, "0")[0]
            friction = _floats(dyn.get("friction", "0"), 1, f"joint '{name}' friction", path, "0")[0]
            if damping < 0 or friction < 0:
                raise ArticulationError(f"{path}: joint '{name}' has negative damping or friction. Fix: use >= 0")
        return Joint(name, jtype, parent, child, _origin(j_el.find("origin"), f"joint '{name}'", path), axis, lower,
                     upper, damping, friction)

    # -- queries ------------------------------------------------------------------------------------
    @property
    def movable_joints(self) -> list[Joint]:
        return [j for j in self.joints if j.movable]

    def joint(self, name: str) -> Joint:
        for j in self.joints:
            if j.name == name:
                return j
        raise UnknownNameError(f"joint of {self.path.name}", name, [j.name for j in self.movable_joints])

    def check_joint_values(self, values: dict, where: str) -> None:
        """Unknown joint names and values outside a joint's limits are errors naming them."""
        movable = {j.name: j for j in self.movable_joints}
        for name, v in values.items():
            if name not in movable:
                raise UnknownNameError(f"movable joint in {where} (object URDF {self.path.name})", name, movable)
            j = movable[name]
            if j.limited and not (j.lower - 1e-9 <= float(v) <= j.upper + 1e-9):
                raise ArticulationError(f"{where}: joint '{name}' = {v} is outside its limits [{j.lower}, {j.upper}] "
                                        f"({self.path.name}). Fix: give a value within them")

    def link_poses(self, q: dict) -> dict[str, np.ndarray]:
        """``{link: (4, 4)}`` in the object (root link) frame at joint values ``q`` (missing joints at 0)."""
        poses = {self.root: np.eye(4)}
        pending = list(self.joints)
        while pending:
            rest = [j for j in pending if j.parent not in poses]
            for j in pending:
                if j.parent in poses:
                    poses[j.child] = poses[j.parent] @ j.origin @ j.motion(float(q.get(j.name, 0.0)))
            if len(rest) == len(pending):
                break
            pending = rest
        return poses

    def link_of_joint(self, name: str) -> str:
        return self.joint(name).child

    def subtree(self, link: str) -> list[str]:
        """``link`` and every link below it."""
        out, frontier = [link], [link]
        while frontier:
            nxt = [j.child for j in self.joints if j.parent in frontier]
            out += nxt
            frontier = nxt
        return out

    # -- geometry ------------------------------------------------------------------------------------
    def shape_mesh(self, shape: Shape):
        """The shape as a trimesh in its link frame (origin applied; primitives meshed)."""
        import trimesh

        g = shape.geometry
        if g.kind == "box":
            m = trimesh.creation.box(g.size)
        elif g.kind == "cylinder":
            m = trimesh.creation.cylinder(g.size[0], g.size[1], sections=32)
        elif g.kind == "sphere":
            m = trimesh.creation.icosphere(2, g.size[0])
        else:
            from real2sim.core.meshes import load_mesh

            m = load_mesh(g.mesh).copy()
            m.apply_scale(g.scale)
        m = trimesh.Trimesh(np.asarray(m.vertices, float), np.asarray(m.faces, int), process=False)
        m.apply_transform(shape.origin)
        return m

    def merged_visual(self, q: dict):
        """Every link's visual shapes (its collision shapes where it has no visual) posed at ``q``, as one trimesh
        in the object frame, and the colour of the largest visual area ``(rgba)``."""
        import trimesh

        poses = self.link_poses(q)
        parts, best = [], (0.0, [0.7, 0.7, 0.7, 1.0])
        for lname, link in self.links.items():
            for s in link.visuals or link.collisions:
                m = self.shape_mesh(s)
                m.apply_transform(poses[lname])
                parts.append(m)
                if m.area > best[0]:
                    best = (float(m.area), s.rgba)
        if not parts:
            raise ArticulationError(f"{self.path}: no link has visual or collision geometry. Fix: add geometry")
        return trimesh.util.concatenate(parts), list(best[1])

    def link_bounds(self, link: str) -> np.ndarray:
        """``(2, 3)`` box (min, max) of ``link``'s collision shapes (its visuals when it has none) in the link frame."""
        if link not in self.links:
            raise UnknownNameError(f"link of {self.path.name}", link, self.links)
        shapes = self.links[link].collisions or self.links[link].visuals
        if not shapes:
            raise ArticulationError(f"{self.path}: link '{link}' has no geometry, so nothing can be inside it. Fix: "
                                    "name a link with collision shapes")
        pts = np.concatenate([self.shape_mesh(s).vertices for s in shapes])
        return np.stack([pts.min(0), pts.max(0)])

    def link_handle(self, link: str, axis) -> tuple[np.ndarray, np.ndarray] | None:
        """The handle of ``link`` for a pull along ``axis`` (link frame): the box (min, max) of the collision shapes
        that stand wholly out in front of the link's front, where the front is the outermost extent along ``axis``
        of the shapes broad across it (a cross-section of at least a quarter of the link's); None when nothing stands
        out (a flat front: push it, or add collision shapes for the handle, ``collide_visuals``)."""
        a = np.asarray(axis, float)
        shapes = self.links[link].collisions if link in self.links else []
        if not shapes:
            return None
        boxes = [self.shape_mesh(s).bounds for s in shapes]
        k = int(np.argmax(np.abs(a)))
        if abs(a[k]) < 0.999:  # an axis not along a link axis: no axis-aligned front to measure
            return None
        sgn = np.sign(a[k])
        other = [i for i in range(3) if i != k]
        lo, hi = np.min([b[0] for b in boxes], 0), np.max([b[1] for b in boxes], 0)
        full = np.prod((hi - lo)[other])
        broad = [b for b in boxes if np.prod((b[1] - b[0])[other]) >= 0.25 * full]
        front = max(sgn * (b[1][k] if sgn > 0 else b[0][k]) for b in broad)
        out = [b for b in boxes if sgn * (b[0][k] if sgn > 0 else b[1][k]) >= front - 1e-9]
        if not out:
            return None
        return np.min([b[0] for b in out], 0), np.max([b[1] for b in out], 0)

    def link_inertials(self, density: float) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
        """``{link: (mass kg, com (3,), inertia about the com (3, 3))}`` in the link frame: the URDF's ``<inertial>``
        where given, else the link's collision shapes (its visuals when it has none) filled at ``density``."""
        from real2sim.core.meshes import mass_properties, primitive_mass_properties

        out = {}
        for lname, link in self.links.items():
            if link.inertial is not None:
                out[lname] = link.inertial
                continue
            shapes = link.collisions or link.visuals
            parts = []
            for s in shapes:
                g = s.geometry
                try:
                    if g.kind == "box":
                        m, c, I = primitive_mass_properties("box", np.asarray(g.size) / 2, density)
                    elif g.kind == "cylinder":
                        m, c, I = primitive_mass_properties("cylinder", [g.size[0], g.size[1] / 2], density)
                    elif g.kind == "sphere":
                        m, c, I = primitive_mass_properties("sphere", g.size, density)
                    else:
                        mesh = self.shape_mesh(Shape(np.eye(4), g))
                        m, c, I = mass_properties(mesh, density)
                        parts.append((m, s.origin[:3, :3] @ c + s.origin[:3, 3], s.origin[:3, :3] @ I @ s.origin[:3, :3].T))
                        continue
                except MeshError as exc:
                    raise ArticulationError(f"{self.path}: link '{lname}': {exc}") from exc
                R = s.origin[:3, :3]
                parts.append((m, R @ c + s.origin[:3, 3], R @ I @ R.T))
            if not parts:
                log.warning("%s: link '%s' has no <inertial> and no geometry; given %g kg", self.path, lname, MIN_LINK_MASS)
                out[lname] = (MIN_LINK_MASS, np.zeros(3), np.eye(3) * 1e-7)
                continue
            M = sum(p[0] for p in parts)
            com = sum(p[0] * p[1] for p in parts) / M
            I = np.zeros((3, 3))
            for m, c, Ic in parts:  # parallel axis theorem to the common COM
                d = c - com
                I += Ic + m * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
            out[lname] = (float(M), com, (I + I.T) / 2)
        return out


def add_visual_collisions(root_el, patterns, path: Path) -> list[str]:
    """Give every ``<visual>`` whose name matches one of the glob ``patterns`` (e.g. ``handle*``) a ``<collision>``
    of its own: the same origin, a primitive copied as it is, a mesh replaced by its bounding box (a box collides
    alike in every engine). For URDFs whose graspable parts are visual only (the mk_station cabinet's drawer
    handles). Returns ``link/visual`` for each shape given one; a pattern that matches no visual is an error naming
    the visuals there are."""
    from fnmatch import fnmatchcase

    done, names = [], []
    for l_el in root_el.findall("link"):
        for v in l_el.findall("visual"):
            name = v.get("name") or ""
            names.append(f"{l_el.get('name')}/{name}")
            if not name or not any(fnmatchcase(name, p) for p in patterns):
                continue
            c = ET.SubElement(l_el, "collision", {"name": f"{name}_collision"})
            o_el = v.find("origin")
            g = v.find("geometry")
            prim = g[0] if g is not None and len(g) else None
            if prim is not None and prim.tag in ("box", "cylinder", "sphere"):
                if o_el is not None:
                    c.append(o_el)
                ET.SubElement(c, "geometry").append(prim)
            else:  # a mesh: its bounding box (in the visual's frame), placed by the visual's origin
                shape = ArticulatedModel._shape(v, f"link '{l_el.get('name')}' visual '{name}'", path, {}, True)
                lo, hi = ArticulatedModel(path, "", {}, [], "").shape_mesh(Shape(np.eye(4), shape.geometry)).bounds
                T = shape.origin
                xyz = T[:3, :3] @ ((lo + hi) / 2) + T[:3, 3]
                rpy = o_el.get("rpy", "0 0 0") if o_el is not None else "0 0 0"
                ET.SubElement(c, "origin", {"xyz": " ".join(f"{x:.6g}" for x in xyz), "rpy": rpy})
                ET.SubElement(ET.SubElement(c, "geometry"), "box",
                              {"size": " ".join(f"{x:.6g}" for x in np.maximum(hi - lo, 1e-4))})
            done.append(f"{l_el.get('name')}/{name}")
    missing = [p for p in patterns if not any(fnmatchcase(n.split("/", 1)[1], p) for n in names)]
    if missing:
        raise ArticulationError(f"{path}: no <visual> is named like {missing} (collide_visuals); its visuals: "
                                f"{', '.join(names[:20]) or 'none named'}. Fix: give patterns of visual names")
    return done


def package_urdf(src: Path, dst_dir: Path, collide_visuals=()) -> Path:
    """Copy an object URDF into ``dst_dir`` with its meshes converted to OBJ under ``dst_dir/meshes/`` (content-
    addressed names) and the filenames rewritten relative to the copy; returns the copied URDF's path.
    ``collide_visuals``: glob patterns of visual names that get collision shapes of their own in the copy
    (:func:`add_visual_collisions`).

    Validates first (:meth:`ArticulatedModel.load`): nothing is written for a URDF that cannot be used."""
    from real2sim.core.meshes import load_mesh
    from real2sim.core.objio import write_obj

    src = Path(src).resolve()
    ArticulatedModel.load(src)
    tree = ET.parse(src)
    if collide_visuals:
        added = add_visual_collisions(tree.getroot(), list(collide_visuals), src)
        log.info("%s: collision shapes added from the visuals %s", src.name, added)
    dst_dir = Path(dst_dir)
    (dst_dir / "meshes").mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    for g in tree.getroot().iter("mesh"):
        fn = g.get("filename") or ""
        if fn not in done:
            path = resolve_mesh_path(fn, src)
            try:
                mesh = load_mesh(path)
            except MeshError as exc:
                raise ArticulationError(f"{src}: mesh '{fn}': {exc}") from exc
            tmp = dst_dir / "meshes" / f".{os.getpid()}.tmp.obj"
            write_obj(tmp, mesh.vertices, mesh.faces)
            name = hashlib.sha256(tmp.read_bytes()).hexdigest()[:16] + ".obj"
            tmp.replace(dst_dir / "meshes" / name)
            done[fn] = f"meshes/{name}"
        g.set("filename", done[fn])
    out = dst_dir / src.name
    ET.indent(tree, space="  ")
    out.write_text(ET.tostring(tree.getroot(), encoding="unicode") + "\n")
    return out
