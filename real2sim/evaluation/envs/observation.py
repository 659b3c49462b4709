"""What the policy sees: the one code path behind ``obs_mode="composited"`` and the review page's composite.

SIMPLER's visual matching: ``I' = M * I_sim + (1 - M) * I_real``. ``I_real`` is the bundle's background plate;
``M`` is the simulator's segmentation of the robot and of the *movable* objects (:func:`observed_objects`). Fixed
objects (the table) are not pasted: the plate shows the real ones. The env (:class:`~real2sim.evaluation.envs.env.
Real2SimEnv`) and the review page both call :func:`composite` on a loaded scene, with the lighting
:func:`apply_shading` sets, so the page shows the policy's observation pixel for pixel.

No gymnasium here: the review page imports this without the env's dependencies.
"""
from __future__ import annotations

import numpy as np

from real2sim.core.errors import UnknownNameError

SHADINGS = ("auto", "lit", "unlit")
"""'lit': the export's lights. 'unlit': every surface shows its stored colour/texture (textures back-projected from
photos carry the real light already; on the Bridge frame the cubes come 7-12 dB closer to the photo). 'auto':
'unlit' when the bundle's textures were back-projected from its frames (the texture stage ran, or the robot has link
textures from robot_appearance), else 'lit'."""


def resolve_shading(manifest, shading: str = "auto") -> str:
    """'lit' or 'unlit' for ``shading`` (see :data:`SHADINGS`)."""
    if shading not in SHADINGS:
        raise UnknownNameError("shading", shading, SHADINGS)
    if shading != "auto":
        return shading
    rec = manifest.stages.get("texture")
    backprojected = rec is not None and (rec.status in ("done", "stale") or (rec.status == "poor" and rec.metrics.get("applied")))
    # the robot's link textures are back-projected from the frames too (robot_appearance)
    backprojected = backprojected or bool(manifest.robot is not None and manifest.robot.textures)
    return "unlit" if backprojected else "lit"


def scene_shading(scene, manifest, shading: str = "auto") -> str:
    """The shading a loaded ``scene`` renders the bundle with: :func:`resolve_shading`, or 'lit' when the scene
    cannot change its lights."""
    return resolve_shading(manifest, shading) if "appearance" in scene.capabilities else "lit"


def apply_shading(scene, shading: str, light_scale: float = 1.0) -> None:
    """Set the scene's lights for ``shading`` ('lit': as exported, scaled by ``light_scale``; 'unlit')."""
    if "appearance" in scene.capabilities:
        scene.set_lighting(light_scale, unlit=shading == "unlit")


def observed_objects(scene, manifest) -> list[str]:
    """The objects rendered into the observation: the scene's movable ones (fixed ones come from the plate)."""
    return [o for o in scene.object_ids() if o in manifest.objects and not manifest.objects[o].fixed]


def rendered_objects(scene, manifest) -> list[str]:
    """The objects drawn over the plate: the movable ones and the articulated ones, fixed or not (their links move:
    a plate holds them at one joint position only; SIMPLER draws its cabinet over the drawer overlays too)."""
    return [o for o in scene.object_ids() if o in manifest.objects
            and (not manifest.objects[o].fixed or manifest.objects[o].articulation is not None)]


def composite(scene, camera: str, objects, background: np.ndarray, size: tuple[int, int] | None = None,
              depth: bool = False):
    """``(image (h, w, 3) uint8, mask (h, w) bool, depth (h, w) float32 or None)``: the robot and ``objects``
    rendered from ``camera`` over ``background`` (the plate at the image size), ``mask`` where they are."""
    import cv2

    rgb, mask, d = scene.render_layers(camera, list(objects), robot=True, depth=depth, size=size)
    # composite in place over the render when it is a fresh array of ours; cv2's masked copy is ~100x np.where's speed
    img = rgb if rgb.flags.writeable and rgb.flags.c_contiguous and rgb.base is None else rgb.copy()
    cv2.copyTo(np.ascontiguousarray(background), np.logical_not(mask).view(np.uint8), img)
    return img, mask, d
