"""A small robot this project has never seen (two revolute links + a two-finger gripper), written as a URDF with
OBJ/STL meshes and a definition file, for the robot-file tests."""
from __future__ import annotations

import json
from pathlib import Path

BOX_OBJ = """o box
v -0.5 -0.5 -0.5
v 0.5 -0.5 -0.5
v 0.5 0.5 -0.5
v -0.5 0.5 -0.5
v -0.5 -0.5 0.5
v 0.5 -0.5 0.5
v 0.5 0.5 0.5
v -0.5 0.5 0.5
f 1 3 2
f 1 4 3
f 5 6 7
f 5 7 8
f 1 2 6
f 1 6 5
f 2 3 7
f 2 7 6
f 3 4 8
f 3 8 7
f 4 1 5
f 4 5 8
"""


def _inertial(mass: float, i: float = None, xyz="0 0 0") -> str:
    i = i if i is not None else mass * 0.01
    return (f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/>'
            f'<inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial>')


def _box_visual(scale: str, xyz="0 0 0") -> str:
    return (f'<visual><origin xyz="{xyz}"/><geometry><mesh filename="package://twolink/meshes/box.obj" '
            f'scale="{scale}"/></geometry></visual>'
            f'<collision><origin xyz="{xyz}"/><geometry><box size="{scale}"/></geometry></collision>')


def two_link_urdf(inertials: bool = True, mimic: bool = False, loop: bool = False, mesh: str = "box.obj") -> str:
    """URDF text: base (box) -> shoulder (revolute z) -> upper (revolute y, 0.3 m) -> forearm (revolute y, 0.25 m)
    -> hand (fixed) -> two prismatic fingers."""
    def inn(m, xyz="0 0 0"):
        return _inertial(m, xyz=xyz) if inertials else ""

    finger_r_mimic = '<mimic joint="finger_left" multiplier="1"/>' if mimic else ""
    parts = [
        '<?xml version="1.0"?>', '<robot name="twolink">',
        f'<link name="base">{_inertial(2.0)}{_box_visual("0.12 0.12 0.1", "0 0 0.05")}</link>',
        f'<link name="upper">{inn(0.8, "0 0 0.15")}{_box_visual("0.05 0.05 0.3", "0 0 0.15")}</link>',
        f'<link name="forearm">{inn(0.5, "0 0 0.125")}{_box_visual("0.04 0.04 0.25", "0 0 0.125")}</link>',
        f'<link name="hand">{inn(0.2)}<visual><geometry><mesh filename="package://twolink/meshes/hand.stl"/>'
        '</geometry></visual><collision><geometry><box size="0.08 0.03 0.03"/></geometry></collision></link>',
        f'<link name="finger_l">{inn(0.02, "0 0 0.02")}'
        '<visual><origin xyz="0 0 0.025"/><geometry><box size="0.01 0.01 0.05"/></geometry></visual>'
        '<collision><origin xyz="0 0 0.025"/><geometry><box size="0.01 0.01 0.05"/></geometry></collision></link>',
        f'<link name="finger_r">{inn(0.02, "0 0 0.02")}'
        '<visual><origin xyz="0 0 0.025"/><geometry><box size="0.01 0.01 0.05"/></geometry></visual>'
        '<collision><origin xyz="0 0 0.025"/><geometry><box size="0.01 0.01 0.05"/></geometry></collision></link>',
        '<link name="tool"/>',
        '<joint name="waist" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/>'
        '<axis xyz="0 0 1"/><limit lower="-3.0" upper="3.0" effort="50" velocity="2"/></joint>',
        '<joint name="elbow" type="revolute"><parent link="upper"/><child link="forearm"/><origin xyz="0 0 0.3"/>'
        '<axis xyz="0 1 0"/><limit lower="-2.0" upper="2.0" effort="30" velocity="2"/></joint>',
        '<joint name="wrist" type="revolute"><parent link="forearm"/><child link="hand"/><origin xyz="0 0 0.25"/>'
        '<axis xyz="0 1 0"/><limit lower="-1.8" upper="1.8" effort="10" velocity="2"/></joint>',
        '<joint name="finger_left" type="prismatic"><parent link="hand"/><child link="finger_l"/>'
        '<origin xyz="0.01 0 0.015"/><axis xyz="1 0 0"/><limit lower="0" upper="0.03" effort="20" velocity="0.5"/></joint>',
        f'<joint name="finger_right" type="prismatic"><parent link="hand"/><child link="finger_r"/>'
        f'<origin xyz="-0.01 0 0.015"/><axis xyz="-1 0 0"/><limit lower="0" upper="0.03" effort="20" velocity="0.5"/>'
        f'{finger_r_mimic}</joint>',
        '<joint name="tool_joint" type="fixed"><parent link="hand"/><child link="tool"/><origin xyz="0 0 0.06"/></joint>',
    ]
    if loop:
        parts.append('<joint name="closing" type="fixed"><parent link="base"/><child link="forearm"/></joint>')
    parts.append("</robot>")
    text = "\n".join(parts) + "\n"
    return text.replace("meshes/hand.stl", f"meshes/{mesh}") if mesh != "box.obj" else text


def _stl_box(path: Path) -> None:
    import trimesh

    trimesh.creation.box([0.08, 0.03, 0.03]).export(path)


DEFINITION = {
    "name": "twolink",
    "description": "a two-link arm with a parallel gripper, written by the tests",
    "urdf": "urdf/twolink.urdf",
    "packages": {"twolink": "."},
    "base_link": "base",
    "arm_joints": ["waist", "elbow", "wrist"],
    "gripper_joints": ["finger_left", "finger_right"],
    "gripper_open": [0.03, 0.03],
    "gripper_closed": [0.0, 0.0],
    "default_qpos": [0.0, 0.6, 0.9, 0.03, 0.03],
    "ee_link": "hand",
    "ee_offset": {"position": [0.0, 0.0, 0.06], "quaternion_wxyz": [1.0, 0.0, 0.0, 0.0]},
    "arm_stiffness": [400.0, 300.0, 100.0],
    "arm_damping": [40.0, 30.0, 10.0],
    "gripper_stiffness": 500.0,
    "gripper_damping": 50.0,
    "arm_force_limit": [60.0, 40.0, 20.0],
    "gripper_force_limit": 30.0,
    "control_hz": 10.0,
    "physics_hz": 500.0,
    "camera_mounts": {"wrist": {"link": "hand", "position": [0.0, 0.05, 0.0],
                                "quaternion_wxyz": [1.0, 0.0, 0.0, 0.0],
                                "width": 160, "height": 120, "fx": 120.0, "fy": 120.0, "cx": 79.5, "cy": 59.5}},
    "appearance_default": [0.3, 0.4, 0.8, 1.0],
    "appearance": {"hand": [0.1, 0.1, 0.1, 1.0]},
}

TOML = '''# a two-link arm written by the tests
name = "twolink"
description = "a two-link arm with a parallel gripper, written by the tests"
urdf = "urdf/twolink.urdf"
packages = { twolink = "." }
base_link = "base"
arm_joints = ["waist", "elbow", "wrist"]
gripper_joints = ["finger_left", "finger_right"]
gripper_open = [0.03, 0.03]
gripper_closed = [0.0, 0.0]
default_qpos = [0.0, 0.6, 0.9, 0.03, 0.03]
ee_link = "hand"
ee_offset = { position = [0.0, 0.0, 0.06], quaternion_wxyz = [1.0, 0.0, 0.0, 0.0] }
arm_stiffness = [400.0, 300.0, 100.0]
arm_damping = [40.0, 30.0, 10.0]
gripper_stiffness = 500.0
gripper_damping = 50.0
arm_force_limit = [60.0, 40.0, 20.0]
gripper_force_limit = 30.0
control_hz = 10.0
physics_hz = 500.0
appearance_default = [0.3, 0.4, 0.8, 1.0]

[camera_mounts.wrist]
link = "hand"
position = [0.0, 0.05, 0.0]
quaternion_wxyz = [1.0, 0.0, 0.0, 0.0]
width = 160
height = 120
fx = 120.0
fy = 120.0
cx = 79.5
cy = 59.5

[appearance]
hand = [0.1, 0.1, 0.1, 1.0]
'''


def write_two_link_robot(folder: Path, fmt: str = "toml", urdf_text: str | None = None, **changes) -> Path:
    """Write the URDF, its meshes and a definition file (``robot.toml``, ``robot.json`` or ``robot.yaml``) into
    ``folder``; ``changes``
    override definition fields (JSON form). Returns the definition's path."""
    folder = Path(folder)
    (folder / "meshes").mkdir(parents=True, exist_ok=True)
    (folder / "urdf").mkdir(exist_ok=True)
    (folder / "meshes" / "box.obj").write_text(BOX_OBJ)
    _stl_box(folder / "meshes" / "hand.stl")
    (folder / "meshes" / "hand.dae").write_text("<COLLADA/>\n")  # a broken Collada file
    (folder / "meshes" / "hand.3ds").write_bytes(b"MM\x00\x00")  # a format nothing here reads
    import trimesh

    trimesh.creation.box([0.08, 0.03, 0.03]).export(folder / "meshes" / "hand_box.glb")  # converted to OBJ
    (folder / "urdf" / "twolink.urdf").write_text(urdf_text if urdf_text is not None else two_link_urdf())
    if fmt == "toml" and not changes:
        path = folder / "robot.toml"
        path.write_text(TOML)
    elif fmt == "yaml":
        import yaml

        path = folder / "robot.yaml"
        path.write_text(yaml.safe_dump({**DEFINITION, **changes}, sort_keys=False))
    else:
        path = folder / "robot.json"
        path.write_text(json.dumps({**DEFINITION, **changes}, indent=1))
    return path
