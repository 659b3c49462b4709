"""USD exporter (UsdGeom + UsdShade + UsdPhysics + UsdLux) and the USD view of a loaded export.

Layout of ``exports/usd/``::

    scene.usda               the stage (defaultPrim /World, Z up, metres, kilograms)
    textures/<sha16>.png     content-addressed copies of the bundle's textures

Stage layout::

    /World                                  Xform (defaultPrim)
    /World/PhysicsScene                     UsdPhysics.Scene (gravity from the bundle)
    /World/<id>                             Xform, object frame (translate + orient, quatd wxyz)
        Visual                              Mesh with primvars:st (faceVarying), bound to /World/Looks/<id>
        Collision                           Scope; one prim per hull (Mesh, convexHull) or one primitive,
                                            purpose 'guide', CollisionAPI, physics material (purpose 'physics')
    /World/Looks/<id>                       UsdPreviewSurface (+ UsdUVTexture + UsdPrimvarReader_float2)
    /World/PhysicsMaterials/<id>            UsdPhysics.MaterialAPI (friction, restitution)
    /World/Cameras/<name>                   UsdGeom.Camera reproducing the OpenCV intrinsics
    /World/Lights/light_<i>                 UsdLux.DistantLight

Dynamic objects carry RigidBodyAPI + MassAPI (mass, centerOfMass, diagonalInertia and
principalAxes from the bundle's inertia); fixed objects are colliders only.
Prim names are sanitised object ids; the bundle id is kept in ``customData``
(``real2sim:id``) so loading gives back the bundle's ids.

Camera model (Gf.Camera): the film window on the plane at distance 1 spans
``[offset - aperture/2, offset + aperture/2] / focalLength``; OpenCV pixel centres put the
image centre at ((w-1)/2, (h-1)/2), so with ``a = horizontalAperture``::

    focalLength = fx a / w                        verticalAperture = focalLength h / fy
    horizontalApertureOffset = -(cx - (w-1)/2) a / w
    verticalApertureOffset   = +(cy - (h-1)/2) verticalAperture / h      (USD +Y is up, pixel v grows down)

USD has no pixel resolution on a camera: it is kept as ``real2sim:resolution`` (int2).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, replace_dir_atomically
from real2sim.core.errors import ExportError
from real2sim.core.geometry import matrix_to_quat_wxyz, transform_points
from real2sim.core.meshes import load_mesh
from real2sim.core.objio import mesh_uv
from real2sim.engines.base import Exporter, ExportResult
from real2sim.engines.common import articulated_setup, content_addressed_copy, require_ready
from real2sim.engines.usd.scene import (
    ARTICULATED_KEY,
    ID_KEY,
    RESERVED,
    ROBOT_DEFINITION_KEY,
    ROBOT_KEY,
    UsdScene,
    _pxr,
)
from real2sim.robots.robotfile import EXPORT_ROBOT_DIR, write_robot_package
from real2sim.robots.scene import link_poses, parse_urdf, robot_cameras, robot_setup
from real2sim.robots.spec import is_file_robot

log = logging.getLogger(__name__)
MAIN_FILE = "scene.usda"
HORIZONTAL_APERTURE = 20.955  # mm, the USD/Maya 35 mm academy default; only ratios matter


def _prim_name(name: str, used: set[str]) -> str:
    """A valid, unique USD prim name for ``name`` (ids may contain '-' or start with a digit)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    if base[0].isdigit():
        base = "_" + base
    out, i = base, 1
    while out in used:
        out, i = f"{base}_{i}", i + 1
    used.add(out)
    return out


def _gf_quatd(Gf, q_wxyz):
    q = np.asarray(q_wxyz, float)
    q = q / np.linalg.norm(q)
    return Gf.Quatd(float(q[0]), Gf.Vec3d(*map(float, q[1:])))


def _set_pose(UsdGeom, Gf, xformable, position, quat_wxyz) -> None:
    """translate (double3) + orient (quatd): exact enough for 1e-9 m round trips."""
    xformable.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, position)))
    xformable.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(_gf_quatd(Gf, quat_wxyz))


def _principal_axes(I: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition I = R diag(d) R^T with R a proper rotation (det +1)."""
    I = (np.asarray(I, float) + np.asarray(I, float).T) / 2
    d, R = np.linalg.eigh(I)
    if np.linalg.det(R) < 0:
        R[:, 2] = -R[:, 2]
    return d, R


def usd_camera_params(cam) -> dict:
    """USD camera attributes reproducing a :class:`real2sim.core.camera.Camera` (OpenCV) exactly."""
    w, h = cam.width, cam.height
    ha = HORIZONTAL_APERTURE
    f = cam.fx * ha / w
    va = f * h / cam.fy
    return {
        "focalLength": f,
        "horizontalAperture": ha,
        "verticalAperture": va,
        "horizontalApertureOffset": -(cam.cx - (w - 1) / 2.0) * ha / w,
        "verticalApertureOffset": (cam.cy - (h - 1) / 2.0) * va / h,
    }


def check_compliance(path: Path) -> tuple[list[str], list[str]]:
    """Run USD's compliance checks on a layer file; returns (errors, warnings).

    Uses ``UsdUtils.ComplianceChecker`` where the installed USD has it (usd-core < 25.x);
    newer releases replaced it by the ``UsdValidation`` framework (what ``usdchecker`` runs),
    so every registered validator is run there instead.
    """
    from pxr import Usd, UsdUtils

    checker_cls = getattr(UsdUtils, "ComplianceChecker", None)
    if checker_cls is not None:  # pragma: no cover - depends on the usd-core version
        checker = checker_cls(arkit=False, skipARKitRootLayerCheck=True, rootPackageOnly=False, skipVariants=False)
        checker.CheckCompliance(str(path))
        return list(checker.GetErrors()) + list(checker.GetFailedChecks()), list(checker.GetWarnings())
    from pxr import UsdValidation

    stage = Usd.Stage.Open(str(path))
    registry = UsdValidation.ValidationRegistry()
    context = UsdValidation.ValidationContext(list(registry.GetOrLoadAllValidators()))
    errors, warnings = [], []
    for err in context.Validate(stage):
        if err.HasNoError():
            continue
        sites = ", ".join(str(s.GetPrim().GetPath()) if s.IsPrim() else (s.GetLayer().identifier if s.GetLayer() else "")
                          for s in err.GetSites())
        validator = err.GetValidator()
        text = f"{validator.GetMetadata().name if validator else err.GetName()}: {err.GetMessage()}"
        if sites:
            text += f" [{sites}]"
        (errors if err.GetType() == UsdValidation.ValidationErrorType.Error else warnings).append(text)
    return errors, warnings


class UsdExporter(Exporter):
    """Writes ``exports/usd/scene.usda`` (+ ``textures/``), checks it, and loads it back."""

    name = "usd"
    main_file_name = MAIN_FILE

    def export(self, bundle: Bundle, out_dir: Path | None = None) -> ExportResult:
        _pxr()
        require_ready(bundle)
        out_dir = Path(out_dir or self.out_dir(bundle))
        warnings: list[str] = []
        with replace_dir_atomically(out_dir) as tmp:
            self._write(bundle, tmp / MAIN_FILE, warnings)
            errors, check_warnings = check_compliance(tmp / MAIN_FILE)
            if errors:
                raise ExportError(f"{out_dir / MAIN_FILE}: USD compliance check failed:\n  " + "\n  ".join(errors))
            warnings += check_warnings
            self.load(tmp).close()  # must open and hold every expected prim before it replaces the old export
        for w in warnings:
            log.warning("usd export: %s", w)
        files = sorted(p for p in out_dir.rglob("*") if p.is_file())
        return ExportResult("usd", out_dir / MAIN_FILE, files, warnings)

    # -- writing --------------------------------------------------------------------------
    def _write(self, bundle: Bundle, path: Path, warnings: list[str]) -> None:
        Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
        m = bundle.manifest
        stage = Usd.Stage.CreateNew(str(path))
        UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
        UsdGeom.SetStageMetersPerUnit(stage, 1.0)
        UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
        world = UsdGeom.Xform.Define(stage, "/World")
        stage.SetDefaultPrim(world.GetPrim())
        stage.GetRootLayer().documentation = f"real2sim scene '{m.name}'"

        scene = UsdPhysics.Scene.Define(stage, "/World/PhysicsScene")
        g = np.asarray(m.physics.gravity, float)
        gn = float(np.linalg.norm(g))
        scene.CreateGravityDirectionAttr(Gf.Vec3f(*map(float, g / gn)) if gn > 0 else Gf.Vec3f(0, 0, -1))
        scene.CreateGravityMagnitudeAttr(gn)
        # UsdPhysics has no time step; PhysX keeps it in its own schema. Record it for readers.
        scene.GetPrim().CreateAttribute("real2sim:timestep", Sdf.ValueTypeNames.Double, custom=True).Set(
            float(m.physics.timestep))

        used = set(RESERVED)
        for oid, obj in m.objects.items():
            self._object(bundle, stage, path.parent, oid, obj, _prim_name(oid, used), warnings)

        if m.robot is not None:
            self._robot(stage, m.robot, bundle.root, path.parent, list(m.cameras), warnings)

        cam_used: set[str] = set()
        if m.cameras:
            UsdGeom.Scope.Define(stage, "/World/Cameras")
        for name, spec in m.cameras.items():
            self._camera(stage, f"/World/Cameras/{_prim_name(name, cam_used)}", name, spec.camera(), warnings)

        if m.lights:
            UsdGeom.Xform.Define(stage, "/World/Lights")
        for i, light in enumerate(m.lights):
            d = np.asarray(light.direction, float)
            if np.linalg.norm(d) < 1e-12:
                raise ExportError(f"{bundle.root / 'scene.json'}: field 'lights[{i}].direction' is zero; give it a direction")
            lt = UsdLux.DistantLight.Define(stage, f"/World/Lights/light_{i}")
            z = -d / np.linalg.norm(d)  # a DistantLight shines along its local -Z
            x = np.cross([0.0, 0.0, 1.0], z) if abs(z[2]) < 0.999 else np.cross([0.0, 1.0, 0.0], z)
            x /= np.linalg.norm(x)
            R = np.column_stack([x, np.cross(z, x), z])
            _set_pose(UsdGeom, Gf, lt, [0.0, 0.0, 0.0], matrix_to_quat_wxyz(R))
            lt.CreateColorAttr(Gf.Vec3f(*map(float, light.color)))
        stage.GetRootLayer().Save()

    def _object(self, bundle, stage, out: Path, oid, obj, pname, warnings) -> None:
        Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()

        root = f"/World/{pname}"
        xf = UsdGeom.Xform.Define(stage, root)
        prim = xf.GetPrim()
        prim.SetCustomDataByKey(ID_KEY, oid)
        _set_pose(UsdGeom, Gf, xf, obj.pose.position, obj.pose.quaternion_wxyz)
        if obj.articulation is not None:
            self._articulated(bundle, stage, root, oid, obj)
            return

        # -- visual ---------------------------------------------------------------------
        mesh_path = bundle.path(obj.visual.mesh)
        mesh = load_mesh(mesh_path)  # MeshError names the file
        vis = self._mesh(stage, f"{root}/Visual", mesh.vertices, mesh.faces)
        vis.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(mesh.vertex_normals, np.float32)))
        vis.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
        uv = mesh_uv(mesh)
        material, surface = _preview_material(stage, f"/World/Looks/{pname}")
        rgba = [float(c) for c in obj.visual.rgba]
        if rgba[3] < 1.0:
            surface.CreateInput("opacity", Sdf.ValueTypeNames.Float).Set(rgba[3])
        if obj.visual.texture and uv is None:
            warnings.append(f"object '{oid}': {obj.visual.mesh} has no UVs; texture ignored, flat colour used")
        if obj.visual.texture and uv is not None:
            name = content_addressed_copy(bundle.path(obj.visual.texture), out / "textures")
            _texture_surface(stage, vis, surface, f"/World/Looks/{pname}", uv, mesh.faces, name)
        else:
            surface.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).Set(Gf.Vec3f(*rgba[:3]))
        UsdShade.MaterialBindingAPI.Apply(vis.GetPrim()).Bind(material)

        # -- collision ------------------------------------------------------------------
        col = obj.collision
        colliders = []
        if col.kind == "none":
            if not obj.fixed:
                warnings.append(f"object '{oid}' is dynamic but has no collision geometry (collision.kind 'none')")
        else:
            UsdGeom.Scope.Define(stage, f"{root}/Collision")
        if col.kind == "hulls":
            for i, rel in enumerate(col.hulls):
                hull = load_mesh(bundle.path(rel))
                cm = self._mesh(stage, f"{root}/Collision/hull_{i:03d}", hull.vertices, hull.faces)
                UsdPhysics.MeshCollisionAPI.Apply(cm.GetPrim()).CreateApproximationAttr(UsdPhysics.Tokens.convexHull)
                colliders.append(cm)
        elif col.kind in ("box", "cylinder", "sphere"):
            cpath = f"{root}/Collision/{col.kind}"
            if col.kind == "box":
                g = UsdGeom.Cube.Define(stage, cpath)
                g.CreateSizeAttr(2.0)
            elif col.kind == "cylinder":
                g = UsdGeom.Cylinder.Define(stage, cpath)
                g.CreateAxisAttr(UsdGeom.Tokens.z)
                g.CreateRadiusAttr(float(col.size[0]))
                g.CreateHeightAttr(2.0 * float(col.size[1]))
            else:
                g = UsdGeom.Sphere.Define(stage, cpath)
                g.CreateRadiusAttr(float(col.size[0]))
            _set_pose(UsdGeom, Gf, g, col.pose.position, col.pose.quaternion_wxyz)
            if col.kind == "box":
                g.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, col.size)))
            g.CreateExtentAttr(UsdGeom.Boundable.ComputeExtentFromPlugins(g, Usd.TimeCode.Default()))
            colliders.append(g)
        if colliders:
            pm = UsdShade.Material.Define(stage, f"/World/PhysicsMaterials/{pname}")
            api = UsdPhysics.MaterialAPI.Apply(pm.GetPrim())
            api.CreateStaticFrictionAttr(float(obj.friction))
            api.CreateDynamicFrictionAttr(float(obj.friction))
            api.CreateRestitutionAttr(float(obj.restitution))
            for c in colliders:
                c.CreatePurposeAttr(UsdGeom.Tokens.guide)
                UsdPhysics.CollisionAPI.Apply(c.GetPrim())
                UsdShade.MaterialBindingAPI.Apply(c.GetPrim()).Bind(
                    pm, UsdShade.Tokens.weakerThanDescendants, "physics")  # UsdPhysics material purpose

        # -- dynamics -------------------------------------------------------------------
        if obj.fixed:
            return
        UsdPhysics.RigidBodyAPI.Apply(prim)
        mass = UsdPhysics.MassAPI.Apply(prim)
        inertial = obj.inertial  # require_ready guarantees it
        d, R = _principal_axes(np.array(inertial.inertia, float))
        q = matrix_to_quat_wxyz(R)
        mass.CreateMassAttr(float(inertial.mass))
        mass.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, inertial.com)))
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, d)))
        mass.CreatePrincipalAxesAttr(Gf.Quatf(float(q[0]), Gf.Vec3f(*map(float, q[1:]))))

    def _articulated(self, bundle, stage, root: str, oid: str, obj) -> None:
        """An articulated object under its object prim (ArticulationRootAPI): one rigid-body Xform per link posed at
        the bundle's joint positions (object frame), visual meshes with displayColor, collision meshes (convexHull;
        primitives meshed), and ``Joints/``: Prismatic / Revolute (continuous: no limits) / Fixed joints whose frame
        X axis is the URDF axis, a damping-only DriveAPI (stiffness 0; angular damping per degree as UsdPhysics
        specifies), and the SI values as ``real2sim:position``, ``real2sim:damping``, ``real2sim:friction``
        (UsdPhysics has no joint friction). A fixed object's root link is held by a FixedJoint to the world."""
        Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
        model, q, dyn, inertials = articulated_setup(bundle, oid)
        prim = stage.GetPrimAtPath(root)
        prim.SetCustomDataByKey(ARTICULATED_KEY, True)
        prim.CreateAttribute("real2sim:root_link", Sdf.ValueTypeNames.String, custom=True).Set(model.root)
        UsdPhysics.ArticulationRootAPI.Apply(prim)
        poses = model.link_poses(q)
        pm = UsdShade.Material.Define(stage, f"/World/PhysicsMaterials/{root.rsplit('/', 1)[1]}")
        api = UsdPhysics.MaterialAPI.Apply(pm.GetPrim())
        api.CreateStaticFrictionAttr(float(obj.friction))
        api.CreateDynamicFrictionAttr(float(obj.friction))
        api.CreateRestitutionAttr(float(obj.restitution))
        used = {"Joints"}
        names = {}
        for lname, link in model.links.items():
            names[lname] = f"{root}/{_prim_name(lname, used)}"
            xf = UsdGeom.Xform.Define(stage, names[lname])
            xf.GetPrim().SetCustomDataByKey(ID_KEY, lname)
            T = poses[lname]
            _set_pose(UsdGeom, Gf, xf, T[:3, 3], matrix_to_quat_wxyz(T[:3, :3]))
            UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
            m, com, I = inertials[lname]
            d, R = _principal_axes(I)
            qa = matrix_to_quat_wxyz(R)
            mass = UsdPhysics.MassAPI.Apply(xf.GetPrim())
            mass.CreateMassAttr(float(m))
            mass.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, com)))
            mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, d)))
            mass.CreatePrincipalAxesAttr(Gf.Quatf(float(qa[0]), Gf.Vec3f(*map(float, qa[1:]))))
            for i, sh in enumerate(link.visuals):
                mm = model.shape_mesh(sh)
                mesh = self._mesh(stage, f"{names[lname]}/Visual_{i}", mm.vertices, mm.faces)
                mesh.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, sh.rgba[:3]))]))
                mesh.CreateDisplayOpacityAttr(Vt.FloatArray([float(sh.rgba[3])]))
            for i, sh in enumerate(link.collisions):
                mm = model.shape_mesh(sh)
                mesh = self._mesh(stage, f"{names[lname]}/Collision_{i}", mm.vertices, mm.faces)
                mesh.CreatePurposeAttr(UsdGeom.Tokens.guide)
                UsdPhysics.CollisionAPI.Apply(mesh.GetPrim())
                approx = UsdPhysics.Tokens.convexHull if sh.geometry.kind != "mesh" else UsdPhysics.Tokens.convexDecomposition
                UsdPhysics.MeshCollisionAPI.Apply(mesh.GetPrim()).CreateApproximationAttr(approx)
                UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(pm, UsdShade.Tokens.weakerThanDescendants, "physics")
        UsdGeom.Scope.Define(stage, f"{root}/Joints")
        jused: set[str] = set()
        if obj.fixed:
            jt = UsdPhysics.FixedJoint.Define(stage, f"{root}/Joints/{_prim_name('root_to_world', jused)}")
            jt.CreateBody1Rel().SetTargets([names[model.root]])
        for j in model.joints:
            path = f"{root}/Joints/{_prim_name(j.name, jused)}"
            jt, kind, unit = _define_joint(stage, path, j, names)
            if kind:
                damping, friction = dyn[j.name]
                drive = UsdPhysics.DriveAPI.Apply(jt.GetPrim(), kind)
                drive.CreateTypeAttr("force")
                drive.CreateStiffnessAttr(0.0)
                drive.CreateDampingAttr(float(damping * unit))
                jp = jt.GetPrim()
                for attr, v in (("position", q[j.name]), ("damping", damping), ("friction", friction)):
                    jp.CreateAttribute(f"real2sim:{attr}", Sdf.ValueTypeNames.Double, custom=True).Set(float(v))

    def _robot(self, stage, spec, bundle_root: Path, out_dir: Path, bundle_cameras=(), warnings=None) -> None:
        """``/World/Robot``: ArticulationRootAPI; one rigid-body Xform per URDF link (posed at the bundle's joint
        values, relative to the robot base); Revolute/Prismatic/Fixed joints with limits; force drives.

        Units: revolute limits and drive targets in degrees, angular drive stiffness/damping per degree
        (``K_usd = K * pi / 180``), as UsdPhysics specifies. Each joint frame's X axis is the URDF axis.
        Link visual meshes carry a displayColor from the bundle's appearance; collision meshes use
        ``convexHull`` approximation (URDF primitives are meshed).
        """
        import trimesh

        Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()

        rs = robot_setup(spec, bundle_root)
        links, joints, root_link = parse_urdf(rs.urdf)
        q0 = dict(zip(rs.robot.joint_names, rs.qpos))
        poses = link_poses(joints, root_link, q0)
        robot = UsdGeom.Xform.Define(stage, "/World/Robot")
        rp = robot.GetPrim()
        rp.SetCustomDataByKey(ROBOT_KEY, rs.robot.name)
        if is_file_robot(rs.robot):  # the robot's definition travels with the export
            definition = write_robot_package(rs.robot, out_dir / EXPORT_ROBOT_DIR)
            rp.SetCustomDataByKey(ROBOT_DEFINITION_KEY, f"{EXPORT_ROBOT_DIR}/{definition.name}")
        rp.CreateAttribute("real2sim:joint_names", Sdf.ValueTypeNames.StringArray, custom=True).Set(rs.robot.joint_names)
        UsdPhysics.ArticulationRootAPI.Apply(rp)
        _set_pose(UsdGeom, Gf, robot, rs.base[:3, 3], matrix_to_quat_wxyz(rs.base[:3, :3]))
        used = set()
        names = {}
        cache: dict = {}

        def geom_mesh(g):
            if g.tag == "mesh":
                key = (g.get("filename"), g.get("scale"))
                if key not in cache:
                    m = trimesh.load(g.get("filename"), force="mesh", process=False)
                    if g.get("scale"):
                        m.apply_scale([float(v) for v in g.get("scale").split()])
                    cache[key] = m
                return cache[key]
            if g.tag == "box":
                return trimesh.creation.box([float(v) for v in g.get("size").split()])
            if g.tag == "cylinder":
                return trimesh.creation.cylinder(float(g.get("radius")), float(g.get("length")), sections=24)
            if g.tag == "sphere":
                return trimesh.creation.icosphere(2, float(g.get("radius")))
            raise ExportError(f"{rs.urdf}: URDF geometry '{g.tag}' is not supported by the USD exporter")

        for lname, link in links.items():
            pn = _prim_name(lname, used)
            names[lname] = f"/World/Robot/{pn}"
            xf = UsdGeom.Xform.Define(stage, names[lname])
            xf.GetPrim().SetCustomDataByKey(ID_KEY, lname)
            T = poses.get(lname, np.eye(4))
            _set_pose(UsdGeom, Gf, xf, T[:3, 3], matrix_to_quat_wxyz(T[:3, :3]))
            UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
            mass = UsdPhysics.MassAPI.Apply(xf.GetPrim())
            Rc = link.com[:3, :3]
            d, R = _principal_axes(Rc @ link.inertia @ Rc.T)
            q = matrix_to_quat_wxyz(R)
            mass.CreateMassAttr(float(link.mass))
            mass.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, link.com[:3, 3])))
            mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, d)))
            mass.CreatePrincipalAxesAttr(Gf.Quatf(float(q[0]), Gf.Vec3f(*map(float, q[1:]))))
            rgba = rs.robot.link_rgba(lname, rs.appearance)
            textured = rs.textures.get(lname)
            if textured:  # a texture back-projected from the frames: one UV mesh (link frame) replaces the visuals
                m = load_mesh(textured[0])
                uv = mesh_uv(m)
                if uv is None:
                    raise ExportError(f"{textured[0]}: the robot texture mesh of link '{lname}' has no UVs. Fix: re-run "
                                      "'real2sim robot-appearance DIR'")
                mesh = self._mesh(stage, f"{names[lname]}/Visual_0", m.vertices, m.faces)
                look = f"/World/Looks/Robot_{pn}"
                material, surface = _preview_material(stage, look)
                _texture_surface(stage, mesh, surface, look, uv, m.faces,
                                 content_addressed_copy(textured[1], out_dir / "textures"))
                UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(material)
            mats = link.visual_materials or [(None, None)] * len(link.visuals)
            for i, ((Tv, g), (own_rgba, own_tex)) in enumerate(zip([] if textured else link.visuals, mats)):
                m = geom_mesh(g)
                mesh = self._mesh(stage, f"{names[lname]}/Visual_{i}", transform_points(Tv, m.vertices), m.faces)
                c = own_rgba if own_rgba is not None else rgba  # the mesh's own colour, else the flat colour
                mesh.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, c[:3]))]))
                mesh.CreateDisplayOpacityAttr(Vt.FloatArray([float(c[3])]))
                uv = mesh_uv(m) if own_tex is not None else None
                if uv is not None:  # the mesh's own texture (one part of one material): st + UsdUVTexture
                    tname = content_addressed_copy(own_tex, out_dir / "textures")
                    look = f"/World/Looks/RobotMesh_{Path(tname).stem}"
                    if not stage.GetPrimAtPath(look):
                        material, surface = _preview_material(stage, look)
                        _texture_surface(stage, mesh, surface, look, uv, m.faces, tname)
                    else:
                        material = UsdShade.Material(stage.GetPrimAtPath(look))
                        _face_varying_st(mesh, uv, m.faces)
                    UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(material)
            for i, (Tc, g) in enumerate(link.collisions):
                m = geom_mesh(g)
                mesh = self._mesh(stage, f"{names[lname]}/Collision_{i}", transform_points(Tc, m.vertices), m.faces)
                mesh.CreatePurposeAttr(UsdGeom.Tokens.guide)
                UsdPhysics.CollisionAPI.Apply(mesh.GetPrim())
                UsdPhysics.MeshCollisionAPI.Apply(mesh.GetPrim()).CreateApproximationAttr(UsdPhysics.Tokens.convexHull)
        for cam_name, (lname, cam) in robot_cameras(rs, bundle_cameras).items():
            # a robot-mounted camera: a UsdGeom.Camera child of its link's prim (its pose is in the link frame)
            self._camera(stage, f"{names[lname]}/Camera_{_prim_name(cam_name, set())}", cam_name, cam,
                         warnings if warnings is not None else [])
        UsdGeom.Scope.Define(stage, "/World/Robot/Joints")
        k_by = dict(zip(rs.robot.joint_names, rs.stiffness))
        d_by = dict(zip(rs.robot.joint_names, rs.damping))
        f_by = dict(zip(rs.robot.joint_names, rs.force_limit))
        jused: set[str] = set()
        for j in joints:
            path = f"/World/Robot/Joints/{_prim_name(j.name, jused)}"
            jt, kind, unit = _define_joint(stage, path, j, names)
            if kind and j.name in k_by:
                drive = UsdPhysics.DriveAPI.Apply(jt.GetPrim(), kind)
                drive.CreateTypeAttr("force")
                drive.CreateStiffnessAttr(float(k_by[j.name] * unit))
                drive.CreateDampingAttr(float(d_by[j.name] * unit))
                if np.isfinite(f_by[j.name]):
                    drive.CreateMaxForceAttr(float(f_by[j.name]))
                target = q0[j.name] / unit if kind == "angular" else q0[j.name]
                drive.CreateTargetPositionAttr(float(target))
                jt.GetPrim().CreateAttribute("real2sim:position", Sdf.ValueTypeNames.Double, custom=True).Set(
                    float(q0[j.name]))

    @staticmethod
    def _mesh(stage, path: str, vertices, faces):
        from pxr import UsdGeom, Vt

        faces = np.asarray(faces, np.int32)
        pts = Vt.Vec3fArray.FromNumpy(np.asarray(vertices, np.float32))
        mesh = UsdGeom.Mesh.Define(stage, path)
        mesh.CreatePointsAttr(pts)
        mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(faces), faces.shape[1], np.int32)))
        mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(faces.ravel()))
        mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)  # polygonal, never subdivide
        mesh.CreateExtentAttr(UsdGeom.Mesh.ComputeExtent(pts))
        return mesh

    def _camera(self, stage, path: str, name: str, cam, warnings) -> None:
        Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
        c = UsdGeom.Camera.Define(stage, path)
        c.GetPrim().SetCustomDataByKey(ID_KEY, name)
        T = cam.pose_in("opengl")
        _set_pose(UsdGeom, Gf, c, T[:3, 3], matrix_to_quat_wxyz(T[:3, :3]))
        p = usd_camera_params(cam)
        c.CreateProjectionAttr(UsdGeom.Tokens.perspective)
        c.CreateFocalLengthAttr(float(p["focalLength"]))
        c.CreateHorizontalApertureAttr(float(p["horizontalAperture"]))
        c.CreateVerticalApertureAttr(float(p["verticalAperture"]))
        c.CreateHorizontalApertureOffsetAttr(float(p["horizontalApertureOffset"]))
        c.CreateVerticalApertureOffsetAttr(float(p["verticalApertureOffset"]))
        c.CreateClippingRangeAttr(Gf.Vec2f(float(cam.near), float(cam.far)))
        c.GetPrim().CreateAttribute("real2sim:resolution", Sdf.ValueTypeNames.Int2, custom=True).Set(
            Gf.Vec2i(int(cam.width), int(cam.height)))
        if abs(cam.fx - cam.fy) > 1e-9 * cam.fx:
            warnings.append(f"camera '{name}': fx != fy (non-square pixels); the USD camera's aperture aspect "
                            f"differs from {cam.width}x{cam.height}, render with pixelAspectRatio {cam.fy / cam.fx:.6f}")
        if np.any(np.asarray(cam.distortion) != 0):
            warnings.append(f"camera '{name}': lens distortion is not representable in UsdGeom.Camera; dropped")

    # -- loading --------------------------------------------------------------------------
    def load(self, out_dir: Path) -> "UsdScene":
        return UsdScene(Path(out_dir) / MAIN_FILE)


def _define_joint(stage, path: str, j, names: dict):
    """A UsdPhysics joint at ``path`` for a URDF joint ``j`` (robot or articulated object) between the bodies
    ``names[j.parent]`` and ``names[j.child]``; its frame's X axis is the URDF axis. Revolute limits in degrees
    (continuous joints: none), prismatic in metres. Returns ``(joint, drive kind or None, unit)`` where ``unit``
    converts the drive's per-degree (angular) or per-metre (linear) gains from SI."""
    Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
    norm = np.linalg.norm(j.axis)
    a = j.axis / norm if norm > 1e-12 else np.array([1.0, 0.0, 0.0])
    helper = np.array([0.0, 0.0, 1.0]) if abs(a[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    y = np.cross(helper, a)
    y /= np.linalg.norm(y)
    R_align = np.column_stack([a, y, np.cross(a, y)])
    J0 = j.origin.copy()
    J0[:3, :3] = J0[:3, :3] @ R_align
    kind, unit = None, 1.0
    if j.type in ("revolute", "continuous"):
        jt = UsdPhysics.RevoluteJoint.Define(stage, path)
        jt.CreateAxisAttr("X")
        if j.type == "revolute":
            jt.CreateLowerLimitAttr(float(np.degrees(j.lower)))
            jt.CreateUpperLimitAttr(float(np.degrees(j.upper)))
        kind, unit = "angular", np.pi / 180.0
    elif j.type == "prismatic":
        jt = UsdPhysics.PrismaticJoint.Define(stage, path)
        jt.CreateAxisAttr("X")
        jt.CreateLowerLimitAttr(float(j.lower))
        jt.CreateUpperLimitAttr(float(j.upper))
        kind = "linear"
    else:
        jt = UsdPhysics.FixedJoint.Define(stage, path)
    jt.GetPrim().SetCustomDataByKey(ID_KEY, j.name)
    jt.CreateBody0Rel().SetTargets([names[j.parent]])
    jt.CreateBody1Rel().SetTargets([names[j.child]])
    q0r = matrix_to_quat_wxyz(J0[:3, :3])
    q1r = matrix_to_quat_wxyz(R_align if kind else np.eye(3))
    jt.CreateLocalPos0Attr(Gf.Vec3f(*map(float, J0[:3, 3])))
    jt.CreateLocalRot0Attr(Gf.Quatf(float(q0r[0]), Gf.Vec3f(*map(float, q0r[1:]))))
    jt.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    jt.CreateLocalRot1Attr(Gf.Quatf(float(q1r[0]), Gf.Vec3f(*map(float, q1r[1:]))))
    return jt, kind, unit


def _preview_material(stage, look: str):
    """A ``UsdPreviewSurface`` material at ``look`` (roughness 0.6, not metallic) -> ``(material, surface shader)``."""
    Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
    material = UsdShade.Material.Define(stage, look)
    surface = UsdShade.Shader.Define(stage, f"{look}/PreviewSurface")
    surface.CreateIdAttr("UsdPreviewSurface")
    surface.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(0.6)
    surface.CreateInput("metallic", Sdf.ValueTypeNames.Float).Set(0.0)
    material.CreateSurfaceOutput().ConnectToSource(surface.ConnectableAPI(), "surface")
    return material, surface


def _face_varying_st(mesh_prim, uv, faces) -> None:
    """Face-varying ``st`` primvar of ``mesh_prim`` from per-vertex ``uv``."""
    Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
    st = UsdGeom.PrimvarsAPI(mesh_prim).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray,
                                                      UsdGeom.Tokens.faceVarying)
    st.Set(Vt.Vec2fArray.FromNumpy(np.asarray(uv, np.float32)[np.asarray(faces).ravel()]))


def _texture_surface(stage, mesh_prim, surface, look: str, uv, faces, texture_name: str) -> None:
    """Give ``mesh_prim`` face-varying ``st`` from per-vertex ``uv`` and drive ``surface``'s diffuse colour by the
    texture ``./textures/<texture_name>`` (sRGB) through a primvar reader under ``look``."""
    Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
    _face_varying_st(mesh_prim, uv, faces)
    reader = UsdShade.Shader.Define(stage, f"{look}/stReader")
    reader.CreateIdAttr("UsdPrimvarReader_float2")
    reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("st")
    reader_out = reader.CreateOutput("result", Sdf.ValueTypeNames.Float2)
    tex = UsdShade.Shader.Define(stage, f"{look}/DiffuseTexture")
    tex.CreateIdAttr("UsdUVTexture")
    tex.CreateInput("file", Sdf.ValueTypeNames.Asset).Set(Sdf.AssetPath(f"./textures/{texture_name}"))
    tex.CreateInput("sourceColorSpace", Sdf.ValueTypeNames.Token).Set("sRGB")
    tex.CreateInput("wrapS", Sdf.ValueTypeNames.Token).Set("repeat")
    tex.CreateInput("wrapT", Sdf.ValueTypeNames.Token).Set("repeat")
    tex.CreateInput("st", Sdf.ValueTypeNames.Float2).ConnectToSource(reader_out)
    rgb_out = tex.CreateOutput("rgb", Sdf.ValueTypeNames.Float3)
    surface.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).ConnectToSource(rgb_out)
