"""The review app (``real2sim review DIR``): scriptable bundle edits, the preview, and a Gradio page over them.

Modules (only :mod:`.app` imports Gradio):

- :mod:`.versions`: ``scene.json`` versions, the edit lock and the undo history;
- :mod:`.edits`: every edit (object/camera/robot poses, masks, re-running a stage for one object, undo);
- :mod:`.preview`: :class:`PreviewRenderer` (the export re-posed from the manifest), real frames, overlays;
- :mod:`.views`: what the tabs show (stage table, missing pieces, pose fields, collision view, exports);
- :mod:`.masks`: the Masks tab's clicks, re-segmentation and picture;
- :mod:`.server`: :class:`ReviewServer`, the state shared by every browser tab (one render thread);
- :mod:`.app`: ``build_app`` (one function per tab) and ``launch``.
"""
from __future__ import annotations

from real2sim.apps.review.edits import (
    ConcurrentEditError,
    EditError,
    EditResult,
    history,
    manifest_version,
    remove_mask,
    rerun_object_stage,
    set_camera_pose,
    set_mask,
    set_object_pose,
    set_robot_base_pose,
    undo,
)
from real2sim.apps.review.preview import PreviewRenderer, compose_overlay, real_image
from real2sim.apps.review.server import ReviewServer

__all__ = ["ConcurrentEditError", "EditError", "EditResult", "PreviewRenderer", "ReviewServer", "compose_overlay",
           "history", "manifest_version", "real_image", "remove_mask", "rerun_object_stage", "set_camera_pose",
           "set_mask", "set_object_pose", "set_robot_base_pose", "undo"]
