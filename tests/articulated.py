"""A tiny articulated object written by the tests: a box cabinet with one prismatic drawer (no shared data)."""
from __future__ import annotations

from pathlib import Path

DRAWER_TRAVEL = 0.15  # m, the drawer's range [0, DRAWER_TRAVEL] along +x


def _box(name, xyz, size, material=None, collision=True, visual=True) -> str:
    origin = f'<origin xyz="{xyz}" rpy="0 0 0"/>'
    geom = f'<geometry><box size="{size}"/></geometry>'
    out = ""
    if visual:
        mat = f'<material name="{material}"/>' if material else ""
        out += f'    <visual name="{name}">{origin}{geom}{mat}</visual>\n'
    if collision:
        out += f'    <collision name="{name}_c">{origin}{geom}</collision>\n'
    return out


def write_drawer_urdf(folder: Path, joint_type: str = "prismatic", extra: str = "", damping: float = 5.0,
                      friction: float = 0.0, mesh: str | None = None, axis: str = "1 0 0") -> Path:
    """``folder/drawer_box.urdf``: link ``body`` (a 0.3 x 0.3 x 0.2 m open-front box, bottom at z = 0) and link
    ``drawer`` (a tray 0.26 x 0.26 x 0.1 m with a front panel and handle) on joint ``drawer_joint`` along +x,
    limits [0, 0.15] m, ``<dynamics damping friction>``. ``mesh``: a mesh file name for the handle (visual);
    ``joint_type`` / ``axis``: e.g. a revolute joint about "0 0 1" (the tray turns in its box)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    body = (_box("bottom", "0 0 0.005", "0.3 0.3 0.01", "wood") + _box("top", "0 0 0.195", "0.3 0.3 0.01", "wood")
            + _box("back", "-0.145 0 0.1", "0.01 0.3 0.18", "wood") + _box("left", "0 -0.145 0.1", "0.3 0.01 0.18", "wood")
            + _box("right", "0 0.145 0.1", "0.3 0.01 0.18", "wood"))
    handle = (f'    <visual name="handle"><origin xyz="0.16 0 0" rpy="0 0 0"/><geometry><mesh filename="{mesh}"/>'
              '</geometry><material name="black"/></visual>\n') if mesh else _box("handle", "0.16 0 0", "0.02 0.08 0.02",
                                                                                  "black", collision=False)
    drawer = (_box("tray", "0 0 -0.04", "0.26 0.26 0.01", "white") + _box("front", "0.145 0 0", "0.01 0.28 0.1", "wood")
              + _box("tray_back", "-0.125 0 -0.01", "0.01 0.26 0.05", "white") + handle)
    limit = f'<limit lower="0" upper="{DRAWER_TRAVEL}" effort="100" velocity="1"/>' if joint_type != "continuous" else ""
    text = f"""<robot name="drawer_box">
  <material name="wood"><color rgba="0.55 0.4 0.25 1"/></material>
  <material name="white"><color rgba="0.95 0.95 0.95 1"/></material>
  <material name="black"><color rgba="0.1 0.1 0.1 1"/></material>
  <link name="body">
{body}  </link>
  <link name="drawer">
{drawer}  </link>
  <joint name="drawer_joint" type="{joint_type}">
    <parent link="body"/><child link="drawer"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="{axis}"/>
    {limit}<dynamics damping="{damping}" friction="{friction}"/>
  </joint>
{extra}</robot>
"""
    path = folder / "drawer_box.urdf"
    path.write_text(text)
    return path


def robot_and_drawer_bundle(root: Path, robot_q=(0.0, 1.2, 1.2, 0.03, 0.03)):
    """A bundle for the review page's joint sliders: the tests' two-link arm (a 'wrist' camera mounted on its hand,
    :mod:`robotfiles`) at ``robot_q``, the drawer box 0.5 m in front of it (drawer towards the arm, 0.02 m out) and a
    camera seeing both; MJCF exported. Returns the bundle."""
    import numpy as np
    from robotfiles import write_two_link_robot

    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import CameraSpec
    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.articulated import add_articulated_object

    root = Path(root)
    b = robot_only_bundle(write_two_link_robot(root / "arm", "json"), root, qpos=list(robot_q))
    add_articulated_object(b, "cabinet", write_drawer_urdf(root / "src"), {"drawer_joint": 0.02}, [0.5, 0.0, 0.0],
                           (0.0, 0.0, 0.0, 1.0))  # turned 180 deg about z: the drawer opens towards the arm
    K = np.array([[200.0, 0, 159.5], [0, 200.0, 119.5], [0, 0, 1]])
    b.manifest.cameras["main"] = CameraSpec.from_camera(Camera(320, 240, K, look_at_opencv([0.0, -0.7, 0.6],
                                                                                           [0.35, 0.0, 0.1])))
    b.save()
    export_bundle(b, engines=("mjcf",))
    return b


def run_policy_episode(env, policy, obs, info, seed: int = 0) -> dict:
    """Reset ``policy`` on the env's reset ``(obs, info)`` and step until the episode ends; closes the env and
    returns the last step's info."""
    policy.reset(info["instruction"], info, seed=seed)
    for _ in range(env.max_steps):
        obs, _, term, trunc, info = env.step(policy.act(obs)[0])
        if term or trunc:
            break
    env.close()
    return info
