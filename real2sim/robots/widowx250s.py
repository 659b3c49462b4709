"""WidowX 250s (6-DoF arm + parallel gripper), the Bridge / SIMPLER robot.

Source: the ``trossen_descriptions`` xacro shipped in the ``rtb-data`` package, expanded with
``xacro`` (the ``interbotix_gazebo`` include is dropped: it needs ROS and only adds Gazebo
textures). The gripper's spinning ``gripper`` prop joint is frozen (cosmetic, passive).
Default gains are SIMPLER's fitted WidowX gains (``simpler_env`` / ManiSkill2-real2sim
``widowx`` controller config).
"""
from real2sim.robots.spec import RobotDef

ROBOT = RobotDef(
    name="widowx250s",
    aliases=("widowx", "wx250s", "bridge_widowx"),
    description="Trossen WidowX 250s (6 DoF) with its parallel gripper, as used by Bridge/SIMPLER",
    source={"kind": "xacro", "package": "rtbdata", "pip": "rtb-data",
            "file": "xacro/trossen_descriptions/urdf/wx250s.urdf.xacro",
            "packages": {"trossen_descriptions": "xacro/trossen_descriptions"},
            "drop_includes": ["interbotix_gazebo"],
            "args": {"robot_name": ""}},
    strip_link_prefix="/",
    fixed_joints=("gripper",),
    # rtb-data's xacro turns the frame by pi about x at the elbow, which reverses the elbow and
    # wrist_angle axes against Interbotix's (and the Bridge data's) convention: undo it.
    negate_joints=("elbow", "wrist_angle"),
    base_link="base_link",
    arm_joints=("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"),
    gripper_joints=("left_finger", "right_finger"),
    gripper_open=(0.037, -0.037),
    gripper_closed=(0.015, -0.015),
    default_qpos=(-0.0184, 0.0399, 0.2224, -0.0046, 1.3652, 0.0015, 0.037, -0.037),  # SIMPLER's rest pose
    ee_link="ee_gripper_link",
    ee_offset=((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
    arm_stiffness=(1169.7891719504198, 730.0, 808.4601346394447, 1229.1299089624076, 1272.2760456418862,
                   1056.3326605132252),
    arm_damping=(330.0, 180.0, 152.12036565582588, 309.6215302722146, 201.04998711007383, 269.51458932695414),
    gripper_stiffness=1000.0,
    gripper_damping=200.0,
    # SIMPLER's WidowX also limits its drives (arm 200/200/100/100/100/100 N m, gripper 60 N); with them the scripted
    # oracle's top-down grasp of a cube at the edge of reach stalls (IK at the elbow/wrist limits), so they stay off.
    armature=0.01,
    control_hz=5.0,
    physics_hz=500.0,
    camera_mounts={"wrist": {"link": "gripper_bar_link", "position": (0.02, 0.0, 0.04),
                             "quaternion_wxyz": (1.0, 0.0, 0.0, 0.0)}},
    appearance_default=(0.08, 0.08, 0.08, 1.0),
    appearance={"left_finger_link": (0.15, 0.15, 0.15, 1.0), "right_finger_link": (0.15, 0.15, 0.15, 1.0)},
)
