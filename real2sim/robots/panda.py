"""Franka Emika Panda (7-DoF arm + Franka Hand).

Source: ``franka_panda/panda.urdf`` from the ``pybullet`` wheel's ``pybullet_data`` (complete
URDF with inertials and OBJ meshes that MuJoCo, SAPIEN and USD all read; ``rtb-data``'s Panda
xacro has no inertials and only Collada visuals, ``mani-skill``/``robosuite`` pull in far more).
Default gains are ManiSkill's Panda joint-position controller gains.
"""
from real2sim.robots.spec import RobotDef

ROBOT = RobotDef(
    name="panda",
    aliases=("franka", "franka_panda", "fr3"),
    description="Franka Emika Panda (7 DoF) with the Franka Hand",
    source={"kind": "urdf", "package": "pybullet_data", "pip": "pybullet",
            "file": "franka_panda/panda.urdf",
            "packages": {"": "franka_panda"}},
    base_link="panda_link0",
    arm_joints=tuple(f"panda_joint{i}" for i in range(1, 8)),
    gripper_joints=("panda_finger_joint1", "panda_finger_joint2"),
    gripper_open=(0.04, 0.04),
    gripper_closed=(0.0, 0.0),
    default_qpos=(0.0, -0.4, 0.0, -2.2, 0.0, 1.9, 0.785, 0.04, 0.04),
    ee_link="panda_hand",
    ee_offset=((0.0, 0.0, 0.1034), (1.0, 0.0, 0.0, 0.0)),
    arm_stiffness=(1000.0,) * 7,
    arm_damping=(100.0,) * 7,
    gripper_stiffness=1000.0,
    gripper_damping=100.0,
    arm_force_limit=(100.0,) * 7,  # ManiSkill's Panda drive limits
    gripper_force_limit=100.0,
    armature=0.1,
    control_hz=10.0,
    physics_hz=500.0,
    camera_mounts={"hand": {"link": "panda_hand", "position": (0.05, 0.0, 0.04),
                            "quaternion_wxyz": (1.0, 0.0, 0.0, 0.0)}},
    appearance_default=(0.92, 0.92, 0.92, 1.0),
    appearance={"panda_leftfinger": (0.2, 0.2, 0.2, 1.0), "panda_rightfinger": (0.2, 0.2, 0.2, 1.0)},
)
