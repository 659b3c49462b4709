"""The USD stage of an export opened for checks: poses, mass properties, camera projection (a :class:`LoadedScene`)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from real2sim.core.errors import ExportError, UnknownNameError, require
from real2sim.core.geometry import quat_wxyz_to_matrix, transform_points
from real2sim.core.manifest import RobotSpec
from real2sim.engines.base import LoadedScene
from real2sim.robots import robot_for_spec

log = logging.getLogger(__name__)
ID_KEY = "real2sim:id"
RESERVED = ("PhysicsScene", "Looks", "PhysicsMaterials", "Cameras", "Lights", "Robot")
ROBOT_KEY = "real2sim:robot"
ARTICULATED_KEY = "real2sim:articulated"
"""customData flag of an articulated object's prim (links as child prims, joints under ``Joints``)."""
ROBOT_DEFINITION_KEY = "real2sim:robot_definition"
"""Export-relative path of the packaged definition of a robot read from a definition file."""


def _pxr():
    require("pxr", "usd", "usd-core")
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt

    return Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt


def _world_matrix(prim) -> np.ndarray:
    """Column-vector (4, 4) world transform of a prim (Gf matrices are row-vector)."""
    from pxr import Usd, UsdGeom

    M = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
    return np.array(M, dtype=float).T


class UsdScene(LoadedScene):
    """A USD export opened with ``pxr.Usd``: poses, mass properties and camera projection (no physics, no render)."""

    engine = "usd"
    capabilities = frozenset({"project", "mass"})

    def __init__(self, path: Path):
        _, Sdf, Usd, UsdGeom, _, _, _, _ = _pxr()
        self.path = Path(path)
        if not self.path.is_file():
            raise ExportError(f"{self.path}: USD export not found; run 'real2sim export --engine usd' first")
        try:
            layer = Sdf.Layer.Find(str(self.path))
            if layer is not None:
                layer.Reload(force=True)  # the layer registry may still hold an older version of this file
            self.stage = Usd.Stage.Open(str(self.path))
        except Exception as exc:  # pxr raises Tf.ErrorException
            raise ExportError(f"{self.path}: USD refused to open the stage ({exc})") from exc
        if self.stage is None:
            raise ExportError(f"{self.path}: USD refused to open the stage")
        world = self.stage.GetPrimAtPath("/World")
        if not world.IsValid():
            raise ExportError(f"{self.path}: prim /World is missing; re-export the scene")
        if not self.stage.GetPrimAtPath("/World/PhysicsScene").IsValid():
            raise ExportError(f"{self.path}: prim /World/PhysicsScene is missing; re-export the scene")
        self._objects: dict[str, object] = {}
        self._arts: dict[str, tuple[dict, dict]] = {}
        for child in world.GetChildren():
            oid = child.GetCustomDataByKey(ID_KEY)
            if oid is None or child.GetName() in RESERVED:
                continue
            if child.GetCustomDataByKey(ARTICULATED_KEY):
                joints = child.GetChild("Joints")
                self._arts[str(oid)] = (
                    {str(c.GetCustomDataByKey(ID_KEY)): c for c in child.GetChildren() if c.GetName() != "Joints"},
                    {str(c.GetCustomDataByKey(ID_KEY)): c for c in (joints.GetChildren() if joints.IsValid() else [])
                     if c.GetAttribute("real2sim:position").IsValid()})
                self._objects[str(oid)] = child
                continue
            if not child.GetChild("Visual").IsValid():
                raise ExportError(f"{self.path}: object prim {child.GetPath()} has no Visual mesh; re-export the scene")
            self._objects[str(oid)] = child
        if self._arts:
            self.capabilities = frozenset(self.capabilities | {"articulation"})
        self._robot_prim = None
        rp = self.stage.GetPrimAtPath("/World/Robot")
        if rp.IsValid() and rp.GetCustomDataByKey(ROBOT_KEY):
            self._robot_prim = rp
            self._links = {str(c.GetCustomDataByKey(ID_KEY)): c for c in rp.GetChildren() if c.GetCustomDataByKey(ID_KEY)}
            self._joints = {str(c.GetCustomDataByKey(ID_KEY)): c for c in rp.GetChild("Joints").GetChildren()}
            self.capabilities = frozenset(self.capabilities | {"robot"})
            definition = rp.GetCustomDataByKey(ROBOT_DEFINITION_KEY)
            if definition:  # a robot from a definition file: read the copy packaged with the export
                self._robot = robot_for_spec(RobotSpec(str(rp.GetCustomDataByKey(ROBOT_KEY)), definition=str(definition)),
                                             self.path.parent)
        self._cameras: dict[str, object] = {}
        cams = self.stage.GetPrimAtPath("/World/Cameras")
        for child in cams.GetChildren() if cams.IsValid() else []:
            if child.IsA(UsdGeom.Camera):
                self._cameras[str(child.GetCustomDataByKey(ID_KEY) or child.GetName())] = child
        for link in self._links.values() if self._robot_prim is not None else []:
            for child in link.GetChildren():  # robot-mounted cameras live under their link
                if child.IsA(UsdGeom.Camera):
                    self._cameras[str(child.GetCustomDataByKey(ID_KEY) or child.GetName())] = child

    def _object(self, oid: str):
        try:
            return self._objects[oid]
        except KeyError:
            raise UnknownNameError("object", oid, self._objects) from None

    def object_ids(self) -> list[str]:
        return list(self._objects)

    # -- articulated objects (static: the authored joint positions and link poses) ---------------------
    def _art(self, oid: str):
        self._object(oid)
        if oid not in self._arts:
            from real2sim.core.errors import UnsupportedCapability

            raise UnsupportedCapability(f"object '{oid}' is rigid (no joints); joint queries need an articulated object")
        return self._arts[oid]

    def object_joint_names(self, oid: str) -> list[str]:
        self._object(oid)
        return list(self._arts.get(oid, ({}, {}))[1])

    def object_joint_positions(self, oid: str) -> dict[str, float]:
        return {n: float(p.GetAttribute("real2sim:position").Get()) for n, p in self._art(oid)[1].items()}

    def object_joint_dynamics(self, oid: str) -> dict[str, tuple[float, float]]:
        """``{joint: (damping, friction)}`` as authored (SI units)."""
        return {n: (float(p.GetAttribute("real2sim:damping").Get()), float(p.GetAttribute("real2sim:friction").Get()))
                for n, p in self._art(oid)[1].items()}

    def object_link_pose(self, oid: str, link: str) -> np.ndarray:
        links = self._art(oid)[0]
        if link not in links:
            raise UnknownNameError(f"link of object '{oid}'", link, links)
        return _world_matrix(links[link])

    # -- robot (static: the authored configuration) ------------------------------------------
    def robot_name(self) -> str:
        self.require("robot")
        return str(self._robot_prim.GetCustomDataByKey(ROBOT_KEY))

    def robot_joint_names(self) -> list[str]:
        self.require("robot")
        return list(self._robot_prim.GetAttribute("real2sim:joint_names").Get())

    def robot_qpos(self) -> np.ndarray:
        return np.array([self._joints[n].GetAttribute("real2sim:position").Get() for n in self.robot_joint_names()])

    def link_pose(self, link: str) -> np.ndarray:
        self.require("robot")
        if link not in self._links:
            raise UnknownNameError("robot link", link, self._links)
        return _world_matrix(self._links[link])

    def robot_base_pose(self) -> np.ndarray:
        return _world_matrix(self._robot_prim)

    def object_pose(self, oid: str) -> np.ndarray:
        return _world_matrix(self._object(oid))

    def mass_properties(self, oid: str) -> tuple[float, np.ndarray, np.ndarray]:
        self.require("mass")
        from pxr import UsdPhysics

        prim = self._object(oid)
        if not prim.HasAPI(UsdPhysics.MassAPI):
            raise ExportError(f"{self.path}: {prim.GetPath()} has no UsdPhysics.MassAPI (is '{oid}' a fixed object?)")
        api = UsdPhysics.MassAPI(prim)
        mass = float(api.GetMassAttr().Get())
        com = np.array(api.GetCenterOfMassAttr().Get(), float)
        d = np.array(api.GetDiagonalInertiaAttr().Get(), float)
        q = api.GetPrincipalAxesAttr().Get()

        R = quat_wxyz_to_matrix([q.GetReal(), *q.GetImaginary()])
        return mass, com, R @ np.diag(d) @ R.T

    def camera_params(self, camera: str) -> dict:
        """The USD camera's own attributes, its (4, 4) world transform and resolution."""
        try:
            prim = self._cameras[camera]
        except KeyError:
            raise UnknownNameError("camera", camera, self._cameras) from None
        from pxr import UsdGeom

        c = UsdGeom.Camera(prim)
        res = prim.GetAttribute("real2sim:resolution").Get()
        if res is None:
            raise ExportError(f"{self.path}: camera {prim.GetPath()} lacks 'real2sim:resolution'; re-export the scene")
        out = {k: float(getattr(c, f"Get{k[0].upper()}{k[1:]}Attr")().Get()) for k in
               ("focalLength", "horizontalAperture", "verticalAperture", "horizontalApertureOffset", "verticalApertureOffset")}
        out.update(width=int(res[0]), height=int(res[1]), T_world_camera_gl=_world_matrix(prim))
        return out

    def project(self, camera: str, points) -> np.ndarray:
        """World points -> OpenCV pixels through the USD camera (film window / focal length, OpenGL axes)."""
        self.require("project")
        p = self.camera_params(camera)
        pc = transform_points(np.linalg.inv(p["T_world_camera_gl"]), np.asarray(points, float).reshape(-1, 3))
        x = pc[:, 0] / -pc[:, 2]  # on the plane at distance 1 in front (-Z)
        y = pc[:, 1] / -pc[:, 2]
        f, ha, va = p["focalLength"], p["horizontalAperture"], p["verticalAperture"]
        w, h = p["width"], p["height"]
        u = (x * f - (p["horizontalApertureOffset"] - ha / 2)) * w / ha - 0.5
        v = ((p["verticalApertureOffset"] + va / 2) - y * f) * h / va - 0.5
        return np.column_stack([u, v])

    # step() and render() are inherited: they raise UnsupportedCapability (no physics or renderer here).

    def close(self) -> None:
        self.stage = None
