"""Loading a SAPIEN export (``scene.sapien.json`` + URDFs) into a SAPIEN 3 scene, and that scene as a :class:`LoadedScene`."""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from real2sim.core.errors import (
    ExportError,
    UnknownNameError,
    UnsupportedCapability,
    require,
)
from real2sim.core.geometry import R_OPENCV_FROM_SAPIEN, make_pose
from real2sim.core.manifest import RobotSpec
from real2sim.core.tempfiles import scratch_dir
from real2sim.engines.base import LoadedScene
from real2sim.robots import robot_for_spec

log = logging.getLogger(__name__)
FORMAT = "real2sim.sapien"
FORMAT_VERSION = 1
AMBIENT_LIGHT = [0.3, 0.3, 0.3]
PIXEL_CENTRE_SHIFT = 0.5
UNLIMITED_FORCE = 1e10  # PhysX drive force limit that never binds


def _urdf_without_visuals(urdf: Path, tmp: Path) -> Path:
    """A copy of ``urdf`` in ``tmp`` with every <visual> removed and mesh paths made absolute."""
    tree = ElementTree.parse(urdf)
    for link in tree.getroot().iter("link"):
        for vis in list(link.findall("visual")):
            link.remove(vis)
    for mesh in tree.getroot().iter("mesh"):
        mesh.set("filename", str((urdf.parent / mesh.get("filename")).resolve()))
    out = tmp / urdf.name
    tree.write(out)
    return out


def _force_limits(rd: dict, n: int) -> list[float]:
    """Drive force limits from the export's robot entry (``None`` or absent = unlimited, 1e10 for PhysX)."""
    return [UNLIMITED_FORCE if f is None else float(f) for f in rd.get("force_limit") or [None] * n]


def _load_robot(sapien, scene, root: Path, rd: dict, has_render: bool):
    """Build the robot articulation (fixed root, gravity-compensated links, no self-collision, force-mode drives)."""
    urdf = root / rd["urdf"]
    if not urdf.is_file():
        raise ExportError(f"{urdf}: robot URDF is missing. Fix: export the scene again")
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    try:
        if has_render:
            arts, _, _ = loader.parse(str(urdf))
        else:  # parsing <visual> materials needs a render device: parse a copy without visuals
            with scratch_dir("sapien") as tmp:
                arts, _, _ = loader.parse(str(_urdf_without_visuals(urdf, tmp)))
        builder = arts[0]
        builder.initial_pose = sapien.Pose(rd["base_pose"]["position"], rd["base_pose"]["quaternion_wxyz"])
        art = builder.build()
    except Exception as exc:  # noqa: BLE001 - SAPIEN raises many types
        raise ExportError(f"{urdf}: SAPIEN refused the robot URDF ({type(exc).__name__}: {exc})") from exc
    art.name = "robot"
    for link in art.links:
        link.disable_gravity = True
        for shape in link.collision_shapes:
            g = list(shape.get_collision_groups())
            g[2] |= 1 << 30  # shapes sharing a bit in group 2 never collide: no robot self-collision
            shape.set_collision_groups(g)
    by_name = {j.name: j for j in art.active_joints}
    missing = [n for n in rd["joint_names"] if n not in by_name]
    if missing:
        raise ExportError(f"{urdf}: joints {missing} not found in the SAPIEN articulation")
    joints = [by_name[n] for n in rd["joint_names"]]
    idx = [art.active_joints.index(j) for j in joints]
    limits = _force_limits(rd, len(joints))
    for j, k, d, f in zip(joints, rd["stiffness"], rd["damping"], limits):
        j.set_drive_properties(float(k), float(d), f, "force")
        j.set_armature([float(rd["armature"])])
    return art, joints, np.asarray(idx)


# ---------------------------------------------------------------------------------------
# exporter
# ---------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------
# loader
# ---------------------------------------------------------------------------------------
_SAPIEN = None


def _sapien():
    """Import sapien once, quietly."""
    global _SAPIEN
    if _SAPIEN is None:
        sapien = require("sapien", "sapien", "sapien")
        try:
            sapien.set_log_level("warning")
        except Exception:  # pragma: no cover - older/newer API
            log.debug("sapien.set_log_level unavailable")
        _SAPIEN = sapien
    return _SAPIEN


def _check_referenced_files(urdf: Path) -> int:
    """Raise ExportError naming any file the URDF (or its OBJ/MTL) needs but lacks; returns the number of collisions."""
    try:
        root = ElementTree.parse(urdf).getroot()
    except ElementTree.ParseError as exc:
        raise ExportError(f"{urdf}: SAPIEN cannot read this URDF ({exc}). Fix: export the scene again") from exc
    links = root.findall("link")
    if root.tag != "robot" or len(links) != 1:
        raise ExportError(f"{urdf}: expected a <robot> with exactly one <link> (one rigid object), "
                          f"found {len(links)} links. Fix: export the scene again")
    for el in root.iter("mesh"):
        fn = el.get("filename", "")
        path = Path(os.path.normpath(urdf.parent / fn))
        if not fn or not path.is_file():
            raise ExportError(f"{path}: mesh file referenced by {urdf} is missing. Fix: export the scene again")
        if path.suffix.lower() == ".obj":
            for ln in path.read_text(errors="replace").splitlines():
                if ln.startswith("mtllib "):
                    mtl = Path(os.path.normpath(path.parent / ln.split(None, 1)[1].strip()))
                    if not mtl.is_file():
                        raise ExportError(f"{mtl}: material file referenced by {path} is missing. Fix: export the scene again")
                    for ml in mtl.read_text(errors="replace").splitlines():
                        if ml.startswith("map_"):
                            tex = Path(os.path.normpath(mtl.parent / ml.split(None, 1)[1].strip()))
                            if not tex.is_file():
                                raise ExportError(f"{tex}: texture referenced by {mtl} is missing. "
                                                  "Fix: export the scene again")
    return len(links[0].findall("collision"))


def _make_scene(sapien, gravity, render: bool):
    """A sapien.Scene with PhysX (and a render system when asked and possible); returns (scene, why_no_render)."""
    physx = sapien.physx
    old = physx.get_scene_config()
    physx.set_scene_config(gravity=np.asarray(gravity, np.float32))
    try:
        why = "not requested (render=False)"
        if render:
            try:
                return sapien.Scene([physx.PhysxCpuSystem(), sapien.render.RenderSystem()]), None
            except RuntimeError as exc:  # "failed to find a rendering device" with Mesa < 24.3
                why = str(exc)
                log.warning("SAPIEN cannot render here (%s); loading physics only. On Debian 12 install "
                            "mesa-vulkan-drivers from bookworm-backports (Mesa >= 24.3) for CPU rendering", why)
        return sapien.Scene([physx.PhysxCpuSystem()]), why
    finally:
        physx.set_scene_config(old)


def load_sapien_scene(scene_json_path, render: bool = True) -> "SapienScene":
    """Build a SAPIEN scene from ``scene.sapien.json``.

    ``render=True`` adds a render system, cameras and lights when a Vulkan device is
    available (else it logs why and loads physics only). Raises :class:`ExportError`
    naming the file when SAPIEN or this loader refuses a file.
    """
    sapien = _sapien()
    path = Path(scene_json_path)
    if not path.is_file():
        raise ExportError(f"{path}: SAPIEN scene file not found. Fix: run 'real2sim export' (sapien)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path}: not valid JSON ({exc}). Fix: export the scene again") from exc
    if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
        raise ExportError(f"{path}: not a {FORMAT} v{FORMAT_VERSION} file (format={data.get('format')!r}, "
                          f"version={data.get('format_version')!r}). Fix: export the scene again with this real2sim")
    t0 = time.perf_counter()
    root = path.parent
    physics = data["physics"]
    scene, why_no_render = _make_scene(sapien, physics["gravity"], render)
    scene.timestep = float(physics["timestep"])
    has_render = why_no_render is None

    entities = {}
    arts = {}
    for oid, od in data["objects"].items():
        urdf = root / od["urdf"]
        if not urdf.is_file():
            raise ExportError(f"{urdf}: URDF of object '{oid}' is missing. Fix: export the scene again")
        if "articulation" in od:
            arts[oid] = _load_articulated(sapien, scene, urdf, oid, od, has_render)
            entities[oid] = arts[oid][0].links[0].entity
            continue
        n_collisions = _check_referenced_files(urdf)
        loader = scene.create_urdf_loader()
        loader.set_material(float(od["static_friction"]), float(od["dynamic_friction"]), float(od["restitution"]))
        loader.set_density(float(od.get("density", 1000.0)))
        try:
            articulations, actors, _ = loader.parse(str(urdf))
            if articulations or len(actors) != 1:
                raise ExportError(f"{urdf}: expected one rigid body, SAPIEN's loader found "
                                  f"{len(articulations)} articulations and {len(actors)} actors. Fix: export again")
            builder = actors[0]
            if not has_render:
                builder.visual_records = []  # render materials/meshes need a render device
            builder.set_physx_body_type("static" if od["fixed"] else "dynamic")
            builder.set_name(oid)
            builder.set_initial_pose(sapien.Pose(od["pose"]["position"], od["pose"]["quaternion_wxyz"]))
            entity = builder.build()
        except ExportError:
            raise
        except Exception as exc:  # urchin/SAPIEN raise many types
            raise ExportError(f"{urdf}: SAPIEN refused this URDF ({type(exc).__name__}: {exc}). "
                              "Fix: export the scene again") from exc
        body = _physx_body(sapien, entity)
        shapes = body.get_collision_shapes()
        if len(shapes) != n_collisions:
            raise ExportError(f"{urdf}: SAPIEN built {len(shapes)} of {n_collisions} collision shapes (it skips meshes "
                              "it cannot cook). Fix: check the hull files under collision/ and export again")
        entities[oid] = entity

    cameras = {}
    for name, cd in data.get("cameras", {}).items():
        cam = sapien.render.RenderCameraComponent(int(cd["width"]), int(cd["height"]))
        cam.set_focal_lengths(float(cd["fx"]), float(cd["fy"]))
        cam.set_principal_point(float(cd["cx"]), float(cd["cy"]))
        cam.set_skew(float(cd.get("skew", 0.0)))
        cam.near, cam.far = float(cd["near"]), float(cd["far"])
        cam.name = name
        mount = sapien.Entity()
        mount.name = f"camera:{name}"
        mount.add_component(cam)
        mount.set_pose(sapien.Pose(cd["pose"]["position"], cd["pose"]["quaternion_wxyz"]))
        # a robot-mounted camera ("link"): the pose is in the link frame; SapienScene moves the mount with the link
        if has_render:
            scene.add_entity(mount)
        # without a render system the mount stays outside the scene: its matrices still work for projection
        cameras[name] = (cam, mount)

    if has_render:
        lights = data.get("lights", {})
        scene.set_ambient_light(lights.get("ambient", AMBIENT_LIGHT))
        for li in lights.get("directional", []):
            scene.add_directional_light(li["direction"], li["color"], shadow=False)

    robot = _load_robot(sapien, scene, root, data["robot"], has_render) if data.get("robot") else None
    log.info("sapien: loaded %s (%d objects, robot=%s, render=%s) in %.2f s", path, len(entities),
             data.get("robot", {}).get("name"), has_render, time.perf_counter() - t0)
    sc = SapienScene(scene, entities, cameras, data, path, why_no_render)
    if arts:
        sc._attach_articulated(arts)
    if robot is not None:
        sc._attach_robot(*robot)
    return sc


def _load_articulated(sapien, scene, urdf: Path, oid: str, od: dict, has_render: bool):
    """Build articulated object ``oid`` (root fixed unless ``fixed`` is false); returns (articulation, {joint name:
    index in qpos}). Joint damping becomes a drive with zero stiffness (force = -damping * velocity, integrated
    implicitly like MuJoCo's joint damping); PhysX's own joint friction is switched off (its coefficient scales with
    the constraint force, not a force): the scene applies the bundle's Coulomb friction itself (``_before_step``)."""
    try:
        root = ElementTree.parse(urdf).getroot()
    except ElementTree.ParseError as exc:
        raise ExportError(f"{urdf}: SAPIEN cannot read this URDF ({exc}). Fix: export the scene again") from exc
    n_collisions = len(root.findall("link/collision"))
    for el in root.iter("mesh"):
        mp = Path(os.path.normpath(urdf.parent / el.get("filename", "")))
        if not mp.is_file():
            raise ExportError(f"{mp}: mesh file referenced by {urdf} is missing. Fix: export the scene again")
    loader = scene.create_urdf_loader()
    loader.fix_root_link = bool(od["fixed"])
    loader.set_material(float(od["static_friction"]), float(od["dynamic_friction"]), float(od["restitution"]))
    loader.set_density(float(od.get("density", 1000.0)))
    try:
        if has_render:
            builders, _, _ = loader.parse(str(urdf))
        else:
            with scratch_dir("sapien") as tmp:
                builders, _, _ = loader.parse(str(_urdf_without_visuals(urdf, tmp)))
        if len(builders) != 1:
            raise ExportError(f"{urdf}: expected one articulation, SAPIEN's loader found {len(builders)}. Fix: export again")
        builder = builders[0]
        builder.initial_pose = sapien.Pose(od["pose"]["position"], od["pose"]["quaternion_wxyz"])
        art = builder.build()
    except ExportError:
        raise
    except Exception as exc:  # noqa: BLE001 - SAPIEN raises many types
        raise ExportError(f"{urdf}: SAPIEN refused the articulated object '{oid}' ({type(exc).__name__}: {exc})") from exc
    art.name = oid
    built = sum(len(link.collision_shapes) for link in art.links)
    if built != n_collisions:
        raise ExportError(f"{urdf}: SAPIEN built {built} of {n_collisions} collision shapes. Fix: export again")
    a = od["articulation"]
    if art.links[0].name != a["root_link"]:  # pragma: no cover - SAPIEN orders links from the root
        raise ExportError(f"{urdf}: SAPIEN's first link is '{art.links[0].name}', not the root '{a['root_link']}'")
    index = {j.name: i for i, j in enumerate(art.active_joints)}
    missing = sorted(set(a["joint_positions"]) - set(index))
    if missing:
        raise ExportError(f"{urdf}: joints {missing} not found in the SAPIEN articulation. Fix: export again")
    for name, i in index.items():
        j = art.active_joints[i]
        j.set_drive_properties(0.0, float(a["damping"].get(name, 0.0)), UNLIMITED_FORCE, "force")
        j.set_friction(0.0)
    return art, index


def _physx_body(sapien, entity):
    for c in entity.components:
        if isinstance(c, sapien.physx.PhysxRigidBaseComponent):
            return c
    raise ExportError(f"SAPIEN entity '{entity.name}' has no PhysX body")  # pragma: no cover


class SapienScene(LoadedScene):
    """An export loaded in SAPIEN 3.

    ``scene`` is the ``sapien.Scene``; ``entity(oid)`` the object's entity.
    ``render_unavailable`` says why there is no "render" capability (None when there is).
    """

    engine = "sapien"

    def __init__(self, scene, entities: dict, cameras: dict, data: dict, path: Path, why_no_render: str | None):
        self._sapien = _sapien()
        self.scene = scene
        self._entities = entities
        self._cameras = cameras
        self.data = data
        self.path = path
        self.render_unavailable = why_no_render
        caps = {"physics", "mass", "project"}
        if why_no_render is None:
            caps |= {"render", "depth", "appearance", "segmentation"}
        self.capabilities = frozenset(caps)
        self.timestep = float(data["physics"]["timestep"])
        self._tint0: dict[str, list] = {}
        self._scaled_cameras: dict = {}
        self._mounted: dict = {}  # robot-mounted camera -> (link, pose in the link)
        self._mask_tables: dict = {}
        self._color_buffers: dict = {}
        self._lights0 = self._light_state() if why_no_render is None else None

    # -- articulated objects --------------------------------------------------------------
    def _attach_articulated(self, arts: dict) -> None:
        self._arts = arts
        self._art_force: dict[str, dict[str, float]] = {oid: {} for oid in arts}
        self._art_links = {oid: {l.name: l for l in art.links} for oid, (art, _) in arts.items()}
        self._qf_dirty = True
        self.capabilities = self.capabilities | {"articulation"}
        for oid in arts:
            self._art_reset(oid)

    def _art(self, oid: str):
        self.entity(oid)
        arts = getattr(self, "_arts", {})
        if oid not in arts:
            raise UnsupportedCapability(f"object '{oid}' is rigid (no joints); joint queries need an articulated "
                                        "object (real2sim add-object SCENE ID --urdf FILE)")
        return arts[oid]

    def _art_index(self, oid: str, joint: str) -> int:
        _, index = self._art(oid)
        if joint not in index:
            raise UnknownNameError(f"joint of object '{oid}'", joint, index)
        return index[joint]

    def _art_reset(self, oid: str) -> None:
        art, _ = self._arts[oid]
        od = self.data["objects"][oid]
        if not od["fixed"]:
            art.set_root_pose(self._sapien.Pose(od["pose"]["position"], od["pose"]["quaternion_wxyz"]))
            art.set_root_linear_velocity(np.zeros(3, np.float32))
            art.set_root_angular_velocity(np.zeros(3, np.float32))
        self._art_force[oid] = {}
        self._qf_dirty = True
        self.set_object_joint_positions(oid, od["articulation"]["joint_positions"])

    def object_joint_names(self, oid: str) -> list[str]:
        self.entity(oid)
        return list(getattr(self, "_arts", {}).get(oid, (None, {}))[1])

    def object_joint_positions(self, oid: str) -> dict[str, float]:
        art, index = self._art(oid)
        q = np.asarray(art.get_qpos(), float)
        return {n: float(q[i]) for n, i in index.items()}

    def set_object_joint_positions(self, oid: str, positions: dict) -> None:
        art, _ = self._art(oid)
        q = np.asarray(art.get_qpos(), np.float32)
        qd = np.asarray(art.get_qvel(), np.float32)
        for name, v in positions.items():
            i = self._art_index(oid, name)
            q[i], qd[i] = float(v), 0.0
        art.set_qpos(q)
        art.set_qvel(qd)

    def set_object_joint_force(self, oid: str, joint: str, force: float) -> None:
        self._art_index(oid, joint)
        self._art_force[oid][joint] = float(force)
        self._qf_dirty = True

    def object_link_pose(self, oid: str, link: str) -> np.ndarray:
        self._art(oid)
        links = self._art_links[oid]
        if link not in links:
            raise UnknownNameError(f"link of object '{oid}'", link, links)
        return np.asarray(links[link].entity_pose.to_transformation_matrix(), float)

    def _before_step(self) -> None:
        """Joint forces of articulated objects for the next PhysX step: the applied ones plus the bundle's Coulomb
        friction, chosen (up to its bound) to stop the joint within the step when it can: f = -clip(m v' / dt,
        -F, F) with v' = v + f_applied dt / m and m the joint's effective mass from the export (a drawer held by
        friction stays, one pushed harder slides against F), as MuJoCo's frictionloss behaves."""
        arts = getattr(self, "_arts", None)
        if not arts:
            return
        dt = float(self.scene.timestep)
        for oid, (art, index) in arts.items():
            a = self.data["objects"][oid]["articulation"]
            fric = {n: float(a["friction"].get(n, 0.0)) for n in index}
            forces = self._art_force[oid]
            if not self._qf_dirty and not any(fric.values()):
                continue
            qf = np.zeros(len(index), np.float32)
            qv = np.asarray(art.get_qvel(), float) if any(fric.values()) else None
            for n, i in index.items():
                f = forces.get(n, 0.0)
                if fric[n] > 0:
                    m = max(float(a["effective_mass"].get(n, 1.0)), 1e-9)
                    v_next = qv[i] + f * dt / m
                    f -= float(np.clip(m * v_next / dt, -fric[n], fric[n]))
                qf[i] = f
            art.set_qf(qf)
        self._qf_dirty = False

    # -- robot ----------------------------------------------------------------------
    def _attach_robot(self, art, joints, idx) -> None:

        self.articulation = art
        self._joints = joints
        self._jidx = idx
        rd = self.data["robot"]
        # a robot from a definition file travels with the export: read that copy, not the user's original
        self._robot = robot_for_spec(RobotSpec(rd["name"], definition=rd.get("definition", "")), Path(self.path).parent)
        self._links = {l.name: l for l in art.links}
        for name, cd in self.data.get("cameras", {}).items():
            if "link" in cd:
                if cd["link"] not in self._links:
                    raise ExportError(f"{self.path}: camera '{name}' is mounted on link '{cd['link']}', which the "
                                      "robot does not have. Fix: export the scene again")
                local = self._sapien.Pose(cd["pose"]["position"], cd["pose"]["quaternion_wxyz"])
                self._mounted[name] = (self._links[cd["link"]], local)
        self.capabilities = self.capabilities | {"robot"}
        self.set_robot_qpos(self.data["robot"]["qpos"])

    def robot_qpos(self) -> np.ndarray:
        self.require("robot")
        return np.asarray(self.articulation.get_qpos(), float)[self._jidx]

    def robot_qvel(self) -> np.ndarray:
        self.require("robot")
        return np.asarray(self.articulation.get_qvel(), float)[self._jidx]

    def set_robot_qpos(self, q) -> None:
        self.require("robot")
        q = np.asarray(q, float)
        full = np.asarray(self.articulation.get_qpos(), np.float32)
        full[self._jidx] = q
        self.articulation.set_qpos(full)
        self.articulation.set_qvel(np.zeros_like(full))
        self.set_joint_targets(q)

    def set_joint_targets(self, q) -> None:
        self.require("robot")
        for j, x in zip(self._joints, np.asarray(q, float)):
            j.set_drive_target(float(x))

    def set_joint_gains(self, stiffness, damping) -> None:
        self.require("robot")
        for j, k, d in zip(self._joints, stiffness, damping):
            j.set_drive_properties(float(k), float(d), float(j.force_limit), "force")

    def link_pose(self, link: str) -> np.ndarray:
        self.require("robot")
        if link not in self._links:
            raise UnknownNameError("robot link", link, self._links)
        return np.asarray(self._links[link].entity_pose.to_transformation_matrix(), float)

    def robot_base_pose(self) -> np.ndarray:
        return self.link_pose(self._robot.base_link)

    def robot_mask(self, camera: str) -> np.ndarray:
        self.require("robot")
        seg, _ = self.segmentation(camera)
        return np.isin(seg, [int(l.entity.per_scene_id) for l in self._links.values()])

    @property
    def physics_timestep(self) -> float:
        return float(self.scene.timestep)

    def set_physics_timestep(self, dt: float) -> None:
        self.scene.timestep = float(dt)
        self.timestep = float(dt)

    def step_physics(self, n: int) -> None:
        for _ in range(int(n)):
            self._before_step()
            self.scene.step()

    # -- lookup ---------------------------------------------------------------------
    def object_ids(self) -> list[str]:
        return list(self._entities)

    # -- appearance -------------------------------------------------------------------
    def _light_state(self) -> dict:
        r = self._sapien.render
        kinds = tuple(k for k in (getattr(r, n, None) for n in ("RenderDirectionalLightComponent",
                                                                 "RenderPointLightComponent",
                                                                 "RenderSpotLightComponent")) if k is not None)
        lights = [(c, np.array(c.color, float)) for e in self.scene.entities for c in e.components
                  if isinstance(c, kinds)]
        return {"ambient": np.array(self.scene.ambient_light, float), "lights": lights}

    def set_lighting(self, scale: float, unlit: bool = False) -> None:
        self.require("appearance")
        s = float(scale)
        self.scene.set_ambient_light([s] * 3 if unlit else (self._lights0["ambient"] * s).tolist())
        for comp, color in self._lights0["lights"]:
            comp.set_color((color * (0.0 if unlit else s)).tolist())

    def _materials(self, target: str) -> list:
        if target == "robot":
            self.require("robot")
            entities = [link.entity for link in self._links.values()]
        else:
            entities = self._object_entities(target)
        mats = []
        for e in entities:
            for c in e.components:
                if isinstance(c, self._sapien.render.RenderBodyComponent):
                    for sh in c.render_shapes:
                        parts = list(getattr(sh, "parts", None) or [])
                        mats += [pt.material for pt in parts] if parts else [sh.material]
        return mats

    def _tint_state(self, target: str) -> list:
        """Per material of ``target``: (material, base colour, texels or None) as exported (read once)."""
        if target not in self._tint0:
            out = []
            for mat in self._materials(target):
                tex = mat.base_color_texture
                texels = None
                if tex is not None:  # SAPIEN ignores the base colour under a texture: tint a private copy
                    texels = np.asarray(tex.download())
                    mat.base_color_texture = self._sapien.render.RenderTexture2D(
                        texels, tex.format, mipmap_levels=int(tex.mipmap_levels), filter_mode=tex.filter_mode,
                        address_mode=tex.address_mode, srgb=bool(tex.is_srgb))
                out.append((mat, np.array(mat.base_color, float), texels))
            self._tint0[target] = out
        return self._tint0[target]

    def set_tint(self, target: str, rgb) -> None:
        self.require("appearance")
        rgb = np.asarray(rgb, float).reshape(3)
        for mat, base, texels in self._tint_state(target):
            if texels is None:
                mat.base_color = [*np.clip(base[:3] * rgb, 0.0, 1.0), float(base[3])]
                continue
            top = float(np.iinfo(texels.dtype).max) if np.issubdtype(texels.dtype, np.integer) else 1.0
            t = texels.astype(np.float32)
            t[..., :3] *= rgb
            if top > 1.0:
                t = np.rint(t)
            mat.base_color_texture.upload(np.clip(t, 0, top).astype(texels.dtype))

    def _object_entities(self, oid: str) -> list:
        """The entities of object ``oid``: its one body, or every link of an articulated object."""
        e = self.entity(oid)
        if oid in getattr(self, "_arts", {}):
            return [link.entity for link in self._arts[oid][0].links]
        return [e]

    def _seg_ids(self, oid: str) -> list[int]:
        return [int(e.per_scene_id) for e in self._object_entities(oid)]

    def entity(self, oid: str):
        try:
            return self._entities[oid]
        except KeyError:
            raise UnknownNameError("object", oid, self._entities) from None

    def body(self, oid: str):
        """The object's PhysX component (``PhysxRigidDynamicComponent`` or ``PhysxRigidStaticComponent``)."""
        return _physx_body(self._sapien, self.entity(oid))

    def camera(self, name: str, size: tuple[int, int] | None = None):
        """The ``RenderCameraComponent`` of a bundle camera; with ``size`` ``(w, h)`` a second one on the same
        mount with the intrinsics scaled per axis (made once, then reused)."""
        try:
            cam, mount = self._cameras[name]
        except KeyError:
            raise UnknownNameError("camera", name, self._cameras) from None
        if name in self._mounted:  # follow the link it is mounted on
            link, local = self._mounted[name]
            mount.set_pose(link.entity_pose * local)
        if size is None or (int(size[0]), int(size[1])) == (cam.width, cam.height):
            return cam
        key = (name, int(size[0]), int(size[1]))
        if key not in self._scaled_cameras:
            cd = self.data["cameras"][name]
            w, h = key[1:]
            sx, sy = w / float(cd["width"]), h / float(cd["height"])
            sc = self._sapien.render.RenderCameraComponent(w, h)
            sc.set_focal_lengths(float(cd["fx"]) * sx, float(cd["fy"]) * sy)
            sc.set_principal_point(float(cd["cx"]) * sx, float(cd["cy"]) * sy)  # pixel-corner coordinates scale
            sc.set_skew(float(cd.get("skew", 0.0)) * sx)
            sc.near, sc.far = float(cd["near"]), float(cd["far"])
            sc.name = f"{name}@{w}x{h}"
            mount.add_component(sc)
            self._scaled_cameras[key] = sc
        return self._scaled_cameras[key]

    # -- state ----------------------------------------------------------------------
    def object_pose(self, oid: str) -> np.ndarray:
        return np.asarray(self.entity(oid).pose.to_transformation_matrix(), float)

    def set_object_pose(self, oid: str, pose) -> None:
        self.require("physics")
        if oid in getattr(self, "_arts", {}):
            if self.data["objects"][oid]["fixed"]:
                raise UnsupportedCapability(f"object '{oid}' is fixed; it cannot be moved")
            art = self._arts[oid][0]
            art.set_root_pose(self._sapien.Pose(np.asarray(pose, np.float32)))
            art.set_root_linear_velocity(np.zeros(3, np.float32))
            art.set_root_angular_velocity(np.zeros(3, np.float32))
            return
        b = self.body(oid)
        if not isinstance(b, self._sapien.physx.PhysxRigidDynamicComponent):
            raise UnsupportedCapability(f"object '{oid}' is fixed; it cannot be moved")
        self.entity(oid).set_pose(self._sapien.Pose(np.asarray(pose, np.float32)))
        b.set_linear_velocity(np.zeros(3, np.float32))
        b.set_angular_velocity(np.zeros(3, np.float32))

    def reset_state(self) -> None:
        self.require("physics")
        for oid, od in self.data["objects"].items():
            if "articulation" in od:
                self._art_reset(oid)
            elif not od["fixed"]:
                self.set_object_pose(oid, make_pose(od["pose"]["position"], od["pose"]["quaternion_wxyz"]))
        if "robot" in self.capabilities:
            self.set_robot_qpos(self.data["robot"]["qpos"])

    def object_velocity(self, oid: str) -> tuple[np.ndarray, np.ndarray]:
        """(linear (3,), angular (3,)) world velocity; zeros for static objects."""
        b = self.body(oid)
        if not isinstance(b, self._sapien.physx.PhysxRigidDynamicComponent):
            return np.zeros(3), np.zeros(3)
        return np.asarray(b.linear_velocity, float), np.asarray(b.angular_velocity, float)

    def mass_properties(self, oid: str) -> tuple[float, np.ndarray, np.ndarray]:
        self.require("mass")
        b = self.body(oid)
        if not isinstance(b, self._sapien.physx.PhysxRigidBodyComponent):
            raise ExportError(f"object '{oid}' is fixed (a static body in SAPIEN) and has no mass")
        T = np.asarray(b.cmass_local_pose.to_transformation_matrix(), float)
        R = T[:3, :3]
        inertia = R @ np.diag(np.asarray(b.inertia, float)) @ R.T
        return float(b.mass), T[:3, 3].copy(), (inertia + inertia.T) / 2

    def step(self, seconds: float) -> None:
        self.require("physics")
        for _ in range(max(1, int(round(seconds / self.timestep)))):
            self._before_step()
            self.scene.step()

    # -- cameras --------------------------------------------------------------------
    def project(self, camera: str, points) -> np.ndarray:
        """World points -> OpenCV pixels through SAPIEN's own intrinsic and extrinsic matrices."""
        self.require("project")
        cam = self.camera(camera)
        K = np.asarray(cam.get_intrinsic_matrix(), float)  # SAPIEN pixel convention
        E = np.asarray(cam.get_extrinsic_matrix(), float)  # world -> OpenCV-axis camera frame, (3, 4)
        p = np.asarray(points, float).reshape(-1, 3)
        pc = p @ E[:, :3].T + E[:, 3]
        uvw = pc @ K.T
        return uvw[:, :2] / uvw[:, 2:3] - PIXEL_CENTRE_SHIFT

    def _picture(self, camera: str, name: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("render")
        cam = self.camera(camera, size)
        self.scene.update_render()
        cam.take_picture()
        return cam.get_picture(name)

    def render(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        return self._color_to_uint8(self._picture(camera, "Color", size))

    def segmentation(self, camera: str, size: tuple[int, int] | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """Per-pixel entity ids ``(h, w) int`` (0 = background) and {object id: entity id}."""
        seg = self._picture(camera, "Segmentation", size)
        ids = {oid: int(e.per_scene_id) for oid, e in self._entities.items()}
        return np.asarray(seg[..., 1], np.int64), ids

    def depth(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("depth")
        pos = np.asarray(self._picture(camera, "Position", size))  # OpenGL camera frame; w = 1 where nothing was hit
        d = (-pos[..., 2]).astype(np.float32)
        d[pos[..., 3] >= 1.0] = 0.0
        return d

    def render_layers(self, camera: str, oids, robot: bool = True, depth: bool = False,
                      size: tuple[int, int] | None = None):
        self.require("render")
        if depth:
            self.require("depth")
        cam = self.camera(camera, size)
        self.scene.update_render()
        cam.take_picture()  # one picture, every layer
        rgb = self._color_to_uint8(cam.get_picture("Color"))
        mask = np.take(self._entity_table(oids, robot), cam.get_picture("Segmentation")[..., 1], mode="clip")
        d = None
        if depth:
            pos = np.asarray(cam.get_picture("Position"))
            d = (-pos[..., 2]).astype(np.float32)
            d[pos[..., 3] >= 1.0] = 0.0
        return rgb, mask, d

    def _entity_table(self, oids, robot: bool) -> np.ndarray:
        """``(max id + 2,) bool``: True at the per-scene ids of ``oids`` (+ robot links); ids beyond the table clip to
        its last entry, False. Made once per entity set: a table lookup per pixel instead of a set test."""
        key = (tuple(oids), bool(robot))
        table = self._mask_tables.get(key)
        if table is None:
            want = [i for o in oids for i in self._seg_ids(o)]
            if robot and "robot" in self.capabilities:
                want += [int(l.entity.per_scene_id) for l in self._links.values()]
            table = np.zeros(max(want, default=0) + 2, bool)
            table[want] = True
            self._mask_tables[key] = table
        return table

    def _color_to_uint8(self, rgba) -> np.ndarray:
        """SAPIEN's float RGBA picture -> ``(h, w, 3) uint8`` (rounded, clipped), through one reused float buffer."""
        c = np.asarray(rgba)[..., :3]
        buf = self._color_buffers.get(c.shape)
        if buf is None:
            buf = self._color_buffers[c.shape] = np.empty(c.shape, np.float32)
        np.multiply(c, 255.0, out=buf)
        np.add(buf, 0.5, out=buf)
        np.clip(buf, 0.0, 255.0, out=buf)
        return buf.astype(np.uint8)

    def foreground_mask(self, camera: str, oids, robot: bool = True, size: tuple[int, int] | None = None) -> np.ndarray:
        seg = self._picture(camera, "Segmentation", size)[..., 1]
        return np.take(self._entity_table(oids, robot), seg, mode="clip")

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        """``(h, w) bool`` pixels where object ``oid`` is visible."""
        want = self._seg_ids(oid)
        seg, ids = self.segmentation(camera)
        return np.isin(seg, want)

    def close(self) -> None:
        self._entities = {}
        self._cameras = {}
        self.scene = None


def _sapien_camera_extrinsic(T_world_sapien) -> np.ndarray:
    """World -> OpenCV camera ``(3, 4)`` from a SAPIEN-convention camera pose (what SAPIEN's get_extrinsic_matrix returns)."""
    T = np.asarray(T_world_sapien, float)
    R_cv = T[:3, :3] @ R_OPENCV_FROM_SAPIEN.T
    return np.hstack([R_cv.T, -(R_cv.T @ T[:3, 3])[:, None]])


__all__ = ["SapienScene", "load_sapien_scene"]
