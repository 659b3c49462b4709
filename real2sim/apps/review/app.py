"""``real2sim review DIR``: a Gradio page over a scene bundle.

The page holds no pipeline logic: every edit goes through :mod:`real2sim.apps.review.edits` (validated,
atomic, undoable, stale-marking, refused on concurrent change), what a tab shows comes from
:mod:`~real2sim.apps.review.views` and :mod:`~real2sim.apps.review.masks`, the preview from
:class:`~real2sim.apps.review.server.ReviewServer`, and every stage from :mod:`real2sim.pipeline`.
:func:`build_app` builds one tab per function: Overview, Overlay, Objects, Masks, Camera & robot,
Collision, Export & evaluate.

Each browser tab remembers the version of ``scene.json`` it loaded (``gr.State``); an edit
made from a tab that is behind the file on disk is refused with a message and the
'Reload from disk' button. The server binds to 127.0.0.1 unless told otherwise and serves
only files inside the bundle directory (plus Gradio's own cache of the images it renders);
``.history/`` is blocked.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.apps.review import edits, masks, views
from real2sim.apps.review.auth import LoginLimiter
from real2sim.apps.review.server import ReviewServer
from real2sim.apps.review.views import err_md, ok_md
from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError
from real2sim.engines import engine_names, simulator_names
from real2sim.evaluation.policies.base import PAGE_POLICIES, check_page_policy
from real2sim.pipeline import export_bundle

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

log = logging.getLogger(__name__)

MODES = ["composite", "composite + outlines", "difference", "wipe", "blend", "render"]
"""Overlay views (:meth:`ReviewServer.picture`): 'composite' is the policy's observation, pixel for pixel."""
# (elem_id, label, min, max, step) of the pose sliders
SPAN_M = 0.05
"""Position sliders span +-5 cm around the pose when selected (0.5 mm steps; arrow keys nudge one step)."""
SPAN_DEG = 10.0
"""Camera angle sliders span +-10 deg around the camera's pose when selected (0.1 deg steps)."""
# (elem_id, label, min, max, step) of the pose sliders; positions' ranges follow the selected pose
OBJECT_SLIDERS = [("pose_x", "x (m, +-5 cm around the pose when selected)", -SPAN_M, SPAN_M, 0.0005),
                  ("pose_y", "y (m, +-5 cm)", -SPAN_M, SPAN_M, 0.0005),
                  ("pose_z", "z (m, +-5 cm)", -SPAN_M, SPAN_M, 0.0005),
                  ("pose_turn", "turn about world Z (deg, from the orientation when selected)", -180, 180, 0.5)]
CAMERA_SLIDERS = [("cam_x", "camera x (m, +-5 cm)", -SPAN_M, SPAN_M, 0.0005),
                  ("cam_y", "camera y (m, +-5 cm)", -SPAN_M, SPAN_M, 0.0005),
                  ("cam_z", "camera z (m, +-5 cm)", -SPAN_M, SPAN_M, 0.0005),
                  ("cam_roll", "camera roll (deg, +-10)", -SPAN_DEG, SPAN_DEG, 0.1),
                  ("cam_pitch", "camera pitch (deg, +-10)", -SPAN_DEG, SPAN_DEG, 0.1),
                  ("cam_yaw", "camera yaw (deg, +-10)", -SPAN_DEG, SPAN_DEG, 0.1)]


# -- what every tab shares ------------------------------------------------------------------------
@dataclass
class _Page:
    """The server, this browser tab's ``scene.json`` version, the status lines, and the bundle as the page was built."""
    srv: ReviewServer
    version: gr.State
    status: gr.Markdown
    version_md: gr.Markdown
    bundle: Bundle

    @property
    def objects(self) -> list[str]:
        return list(self.bundle.manifest.objects)

    @property
    def first_object(self) -> str | None:
        """The first movable object (else the first object) is selected at first."""
        objs = self.bundle.manifest.objects
        dynamic = [o for o, spec in objs.items() if not spec.fixed] or list(objs)
        return dynamic[0] if dynamic else None

    @property
    def cameras(self) -> list[str]:
        return list(self.bundle.manifest.cameras)

    @property
    def nframes(self) -> int:
        return len(self.bundle.manifest.capture.frames)

    def frame_slider(self) -> gr.Slider:
        return gr.Slider(0, max(self.nframes - 1, 1), value=0, step=1, label="Frame", interactive=self.nframes > 1)


@dataclass
class _Overlay:
    camera: gr.Dropdown
    frame: gr.Slider
    mode: gr.Radio
    blend: gr.Slider
    note: gr.Markdown
    image: gr.Image

    @property
    def inputs(self) -> list:
        return [self.camera, self.frame, self.mode, self.blend]


@dataclass
class _Objects:
    select: gr.Dropdown
    sliders: list
    """x, y, z (m) and the turn about world Z (deg)."""
    text: gr.Textbox
    image: gr.Image
    ref: gr.State
    """The orientation (quaternion wxyz) the turn slider starts from: the object's when selected."""
    note: gr.Markdown
    scan: list
    """The scanned object's panel: its accordion, numbers, turntable picture, capture frames with masks."""
    joint_controls: list
    """:class:`~real2sim.apps.review.views.JointControl` of every articulated object's joints."""
    joint_sliders: list

    @property
    def fields(self) -> list:
        """What :func:`_object_values` fills: the sliders, the exact-pose text, the turn's reference."""
        return [*self.sliders, self.text, self.ref]


@dataclass
class _CameraRobot:
    select: gr.Dropdown
    sliders: list
    image: gr.Image
    robot_note: gr.Markdown
    base: list
    """base x, y, z (m), yaw (deg) number boxes."""
    joint_controls: list
    """:class:`~real2sim.apps.review.views.JointControl` of the robot's start joints."""
    joint_sliders: list
    mounted_select: gr.Dropdown
    mounted_image: gr.Image
    mounted_note: gr.Markdown


def _version_note(version: str) -> str:
    return f"scene.json version `{version}`"


def _writer(request) -> str | None:
    """One token per browser tab (Gradio session), so a tab's own quick successive edits are not 'concurrent'."""
    return getattr(request, "session_hash", None) or None


def _sliders(specs) -> list[gr.Slider]:
    return [gr.Slider(lo, hi, step=step, label=label, elem_id=elem_id) for elem_id, label, lo, hi, step in specs]


def _edit_message(res: edits.EditResult) -> str:
    return res.message + (f"; marked stale: {', '.join(res.stale)}" if res.stale else "")


# -- the page -------------------------------------------------------------------------------------
def build_app(bundle_dir, export_if_missing: bool = True) -> gr.Blocks:
    """The review page for the bundle at ``bundle_dir`` (not launched)."""
    srv = ReviewServer(bundle_dir, export_if_missing)
    b0 = srv.bundle()
    with gr.Blocks(title=f"real2sim review: {b0.manifest.name}") as app:
        app.review_server = srv  # for tests and shutdown
        page, undo_btn, reload_btn = _header(srv, b0)
        overview = _overview_tab(page)
        overlay = _overlay_tab(page)
        objects = _objects_tab(page, overlay)
        _masks_tab(page, app)
        camera = _camera_tab(page, overlay)
        _collision_tab(page)
        rollouts, _ = _scene_tab(page, overlay)
        _export_tab(page, app, rollouts)
        _wire_reload(page, app, undo_btn, reload_btn, overview, overlay, objects, camera)
    return app


def _header(srv: ReviewServer, b0: Bundle) -> tuple[_Page, gr.Button, gr.Button]:
    version = gr.State("")
    gr.Markdown(f"# real2sim review — `{srv.root}`")
    with gr.Row():
        status = gr.Markdown("", elem_id="status")
    with gr.Row():
        undo_btn = gr.Button("Undo last edit", elem_id="undo", size="sm")
        reload_btn = gr.Button("Reload from disk", elem_id="reload", size="sm")
        version_md = gr.Markdown("", elem_id="version")
    return _Page(srv, version, status, version_md, b0), undo_btn, reload_btn


def _wire_reload(page: _Page, app: gr.Blocks, undo_btn, reload_btn, overview: list, overlay: _Overlay,
                 objects: _Objects, camera: _CameraRobot) -> None:
    """Page load, 'Reload from disk' and 'Undo last edit' refresh every tab."""
    srv = page.srv
    joint_controls = objects.joint_controls + camera.joint_controls
    outputs = [page.version, page.version_md, *overview, overlay.image, overlay.note, objects.image,
               *objects.fields, *camera.sliders, camera.image, camera.robot_note, *camera.base, *objects.scan,
               *objects.joint_sliders, *camera.joint_sliders, camera.mounted_image, camera.mounted_note]
    inputs = [*overlay.inputs, objects.select, camera.select, camera.mounted_select]

    def load_all(cam, frame, mode, blend, oid, cam2, mounted):
        ver = srv.version()
        cam_img, img, note = _robot_views(srv, cam, frame, mode, blend)
        return (ver, _version_note(ver), *views.overview(srv.bundle()), img, note, img,
                *_object_values(srv, oid), *_camera_values(srv, cam2), cam_img, *views.robot_fields(srv.bundle()),
                *_scan_values(srv, oid), *_joint_slider_values(srv, joint_controls),
                *(srv.mounted_view(mounted) if camera.mounted_select.choices else (None, "")))
    app.load(load_all, inputs, outputs)

    def overview_after_edit():
        return views.overview(srv.bundle())
    page.version.change(overview_after_edit, None, overview, show_progress="hidden")  # every edit, whichever tab

    def reload(cam, frame, mode, blend, oid, cam2, mounted):
        return (ok_md("reloaded scene.json from disk"),) + load_all(cam, frame, mode, blend, oid, cam2, mounted)
    reload_btn.click(reload, inputs, [page.status] + outputs)

    def do_undo(ver, cam, frame, mode, blend, oid, cam2, mounted, request: gr.Request = None):
        try:
            res = edits.undo(srv.root, ver, writer=_writer(request))
        except Real2SimError as exc:
            return (err_md(str(exc)),) + tuple(gr.update() for _ in outputs)
        return (ok_md(res.message),) + load_all(cam, frame, mode, blend, oid, cam2, mounted)
    undo_btn.click(do_undo, [page.version] + inputs, [page.status] + outputs)


# -- Overview, Overlay ----------------------------------------------------------------------------
def _overview_tab(page: _Page) -> list:
    """Returns its outputs: summary, stage table, undo history, report pictures."""
    with gr.Tab("Overview", id="overview"):
        summary = gr.Markdown(elem_id="summary")
        stages_df = gr.Dataframe(headers=["stage", "status", "quality (number, bar)", "metrics", "message"], interactive=False,
                                 elem_id="stages", wrap=True)
        history_df = gr.Dataframe(headers=["#", "edit"], interactive=False, label="Undo history (newest last)",
                                  elem_id="history")
        reports_gallery = gr.Gallery(label="Reports (click one to see it full size)", columns=2, height=560,
                                     object_fit="contain", elem_id="reports")
        refresh_btn = gr.Button("Refresh", size="sm")
    outputs = [summary, stages_df, history_df, reports_gallery]

    def overview():
        return views.overview(page.srv.bundle())
    refresh_btn.click(overview, None, outputs)
    return outputs


def _overlay_tab(page: _Page) -> _Overlay:
    cams = page.cameras
    with gr.Tab("Overlay", id="overlay_tab"):
        with gr.Row():
            camera = gr.Dropdown(cams, value=cams[0] if cams else None, label="Camera")
            frame = page.frame_slider()
            mode = gr.Radio(MODES, value="composite", label="View", elem_id="overlay_mode")
            blend = gr.Slider(0, 1, value=0.5, step=0.05, label="Blend / wipe position (0 = photo, 1 = simulation)")
        note = gr.Markdown(elem_id="overlay_note")
        gr.Markdown("**composite** is exactly what the policy sees in `real2sim eval --obs-mode composited`: the "
                    "background plate with the robot and the movable objects rendered (fixed objects such as the "
                    "table come from the plate). **difference**: the composite against the photo, with its colour "
                    "scale and PSNR. **wipe**: photo left of the slider, composite right. Outlines: each simulated "
                    "entity in colour, the photo's mask in black; the note gives each object's mask IoU. "
                    "Fullscreen (the image's corner button) zooms.")
        image = gr.Image(label="Overlay", type="numpy", format="png", interactive=False, elem_id="overlay",
                         buttons=["download", "fullscreen"])
    overlay = _Overlay(camera, frame, mode, blend, note, image)

    def view(cam, frame, mode, blend):
        return page.srv.picture(cam, frame, mode, blend)
    for c in overlay.inputs:
        c.change(view, overlay.inputs, [image, note], trigger_mode="always_last")
    return overlay


# -- Objects ----------------------------------------------------------------------------------------
def _object_values(srv: ReviewServer, oid: str | None) -> list:
    """The pose sliders re-centred on ``oid``'s pose (x, y, z, turn 0), its exact-pose text and the turn's reference
    orientation (all unchanged when it is not in the bundle)."""
    m = srv.bundle().manifest
    if not oid or oid not in m.objects:
        return [gr.update()] * 4 + ["", None]
    pose = m.objects[oid].pose
    xyz = [round(float(v), 4) for v in pose.position]
    return ([gr.update(value=v, minimum=round(v - SPAN_M, 4), maximum=round(v + SPAN_M, 4)) for v in xyz]
            + [gr.update(value=0)] + [views.pose_text_quat(pose), list(pose.quaternion_wxyz)])


def _scan_values(srv: ReviewServer, oid: str | None) -> list:
    """The scanned-object panel of ``oid`` (hidden when it was not scanned): visibility, numbers, pictures."""
    panel = views.scan_panel(srv.bundle(), oid)
    if panel is None:
        return [gr.update(visible=False), "", None, None]
    return [gr.update(visible=True), panel["markdown"], panel["turntable"], panel["frames"]]


def _turned(ref, turn_deg: float) -> np.ndarray:
    """``ref`` (quaternion wxyz) turned by ``turn_deg`` about world +Z (quaternion wxyz): no Euler angles, so no
    gimbal lock whatever the object's tilt."""
    from real2sim.core.geometry import matrix_to_quat_wxyz, quat_wxyz_to_matrix

    c, s_ = np.cos(np.radians(turn_deg)), np.sin(np.radians(turn_deg))
    Rz = np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1]])
    return np.asarray(matrix_to_quat_wxyz(Rz @ quat_wxyz_to_matrix(ref)))


def _save_object_pose(srv: ReviewServer, ver: str, oid: str, shown, ref, writer: str | None) -> tuple[str, str]:
    """Save what the sliders show (x, y, z m; turn deg about world Z from ``ref``); a component still at its
    shown rounding keeps its exact value, an unchanged orientation its exact quaternion. Returns (version, message)."""
    b = srv.bundle()
    if oid not in b.manifest.objects:
        raise edits.EditError(f"object '{oid}' is no longer in the bundle; press 'Reload from disk'")
    cur = b.manifest.objects[oid].pose
    new = views.keep_exact(shown[:3], cur.position, 4)
    q_cur = np.asarray(cur.quaternion_wxyz, float)
    q = _turned(ref if ref is not None else q_cur, float(shown[3] or 0.0))
    same_rot = abs(abs(float(np.dot(q, q_cur))) - 1.0) < 1e-12
    if np.allclose(new, cur.position, atol=1e-12) and same_rot:
        return srv.version(), f"object {oid}: unchanged"
    res = edits.set_object_pose(srv.root, oid, new, quaternion_wxyz=q_cur if same_rot else q,
                                expected_version=ver, writer=writer)
    return res.version, _edit_message(res)


def _objects_tab(page: _Page, overlay: _Overlay) -> _Objects:
    with gr.Tab("Objects", id="objects_tab"):
        with gr.Row():
            with gr.Column(scale=1):
                select = gr.Dropdown(page.objects, value=page.first_object, label="Object", elem_id="object_select")
                sliders = _sliders(OBJECT_SLIDERS)
                text = gr.Textbox(label="Exact pose: x, y, z (m), then the orientation as a quaternion qw, qx, qy, qz "
                                  "or as roll, pitch, yaw (deg)", elem_id="pose_text")
                apply_btn = gr.Button("Apply exact pose", elem_id="apply_pose")
                gr.Markdown("Sliders: +-5 cm around the pose when the object was selected, 0.5 mm per step (click "
                            "a slider, then the arrow keys nudge); the turn spins the object about the world's "
                            "vertical axis, whatever its tilt. Re-fit the object to its masks (render-and-compare), "
                            "or re-project its texture from the frames: both can be undone.")
                with gr.Row():
                    realign_btn = gr.Button("Re-run alignment", elem_id="rerun_alignment")
                    retexture_btn = gr.Button("Re-run texturing", elem_id="rerun_texture")
                joint_controls = views.object_joint_controls(page.bundle)
                with gr.Accordion("Joints of articulated objects", open=True, visible=bool(joint_controls),
                                  elem_id="object_joints"):
                    gr.Markdown("Each joint between its limits: **m** for a prismatic joint (a drawer), **deg** for a "
                                "revolute one (a door). A change is saved as `real2sim set-joints` does (the posed "
                                "mesh follows; undoable). A fixed object (a cabinet) is not pasted into the "
                                "composite when there is a plate (the plate shows the real one): choose View "
                                "*render* or *blend* on the Overlay tab to see its joints move.")
                    joint_sliders = _joint_sliders(joint_controls, page.bundle, prefix=True)
            with gr.Column(scale=2):
                note = gr.Markdown(elem_id="object_note")
                image = gr.Image(label="Live overlay (the View chosen on the Overlay tab)", type="numpy", format="png",
                                 interactive=False, elem_id="object_preview")
        with gr.Accordion("Scanned object: the mesh next to its capture", open=True, visible=False,
                          elem_id="scan_panel") as scan_box:
            scan_note = gr.Markdown(elem_id="scan_note")
            with gr.Row():
                scan_turntable = gr.Image(label="The scanned mesh, turned around (textured)", type="filepath",
                                          interactive=False, elem_id="scan_turntable")
                scan_frames = gr.Image(label="Capture frames with their masks (and mask confidence)", type="filepath",
                                       interactive=False, elem_id="scan_frames")
    objects = _Objects(select, sliders, text, image, gr.State(None), note,
                       [scan_box, scan_note, scan_turntable, scan_frames], joint_controls, joint_sliders)
    _wire_objects(page, overlay, objects, apply_btn, realign_btn, retexture_btn)
    _wire_object_joints(page, overlay, objects)
    return objects


def _wire_objects(page: _Page, overlay: _Overlay, objects: _Objects, apply_btn, realign_btn, retexture_btn) -> None:
    srv, view = page.srv, page.srv.picture
    sliders = objects.sliders

    def select_object(oid, cam, frame, mode, blend):
        img, note = view(cam, frame, mode, blend)
        return (*_object_values(srv, oid), img, note, *_scan_values(srv, oid))
    objects.select.input(select_object, [objects.select, *overlay.inputs],
                         [*objects.fields, objects.image, objects.note, *objects.scan])

    def apply_pose(ver, oid, x, y, z, turn, ref, cam, frame, mode, blend, request: gr.Request = None):
        """A slider moved: save, redraw, show the exact pose in the text field (the sliders keep their range)."""
        if not oid:
            return ver, err_md("no object selected"), *[gr.update()] * 5
        try:
            nver, msg = _save_object_pose(srv, ver, oid, [x, y, z, turn], ref, _writer(request))
        except (Real2SimError, TypeError, ValueError) as exc:
            img, note = view(cam, frame, mode, blend)
            return ver, err_md(str(exc)), img, img, gr.update(), gr.update(), note
        img, note = view(cam, frame, mode, blend)
        text = views.pose_text_quat(srv.bundle().manifest.objects[oid].pose)
        return nver, _saved_md(msg), img, img, _version_note(nver), text, note

    pose_inputs = [page.version, objects.select, *sliders, objects.ref, *overlay.inputs]
    pose_outputs = [page.version, page.status, objects.image, overlay.image, page.version_md, objects.text, objects.note]
    for s in sliders:
        s.input(apply_pose, pose_inputs, pose_outputs, trigger_mode="always_last", show_progress="hidden")
        s.release(apply_pose, pose_inputs, pose_outputs, trigger_mode="always_last", show_progress="hidden")

    def apply_text(ver, oid, text, cam, frame, mode, blend, request: gr.Request = None):
        """'Apply exact pose': x, y, z (m) and a quaternion wxyz (7 numbers) or roll, pitch, yaw in deg (6)."""
        keep = [gr.update()] * 5  # the four sliders and the turn's reference
        try:
            vals = [float(v) for v in text.replace(";", ",").split(",")]
            if len(vals) not in (6, 7):
                raise ValueError(f"expected 7 numbers 'x, y, z, qw, qx, qy, qz' or 6 'x, y, z, roll, pitch, yaw', "
                                 f"got {len(vals)}")
        except ValueError as exc:
            return ver, err_md(f"cannot read the exact pose '{text}': {exc}"), *[gr.update()] * 5, *keep
        if not oid:
            return ver, err_md("no object selected"), *[gr.update()] * 5, *keep
        try:
            if len(vals) == 7:
                res = edits.set_object_pose(srv.root, oid, vals[:3], quaternion_wxyz=vals[3:], expected_version=ver,
                                            writer=_writer(request))
            else:
                res = edits.set_object_pose(srv.root, oid, vals[:3], np.radians(vals[3:]), expected_version=ver,
                                            writer=_writer(request))
        except (Real2SimError, TypeError, ValueError) as exc:
            img, note = view(cam, frame, mode, blend)
            return ver, err_md(str(exc)), img, img, gr.update(), gr.update(), note, *keep
        img, note = view(cam, frame, mode, blend)
        fields = _object_values(srv, oid)  # re-centred on the new pose
        return (res.version, ok_md(_edit_message(res)), img, img, _version_note(res.version), fields[4], note,
                *fields[:4], fields[5])
    apply_btn.click(apply_text, [page.version, objects.select, objects.text, *overlay.inputs],
                    pose_outputs + sliders + [objects.ref])

    def rerun(stage, ver, oid, cam, frame, mode, blend, request):
        try:
            res = edits.rerun_object_stage(srv.root, stage, oid, expected_version=ver, writer=_writer(request))
            msg, nver, done = res.message, res.version, True
        except Real2SimError as exc:
            msg, nver, done = str(exc), ver, False
        img, note = view(cam, frame, mode, blend)
        fields = _object_values(srv, oid) if done and oid else [gr.update()] * 6
        return (nver, ok_md(msg) if done else err_md(msg), img, img, _version_note(nver), fields[4], note,
                *fields[:4], fields[5])

    def realign(ver, oid, cam, frame, mode, blend, request: gr.Request = None):
        return rerun("alignment", ver, oid, cam, frame, mode, blend, request)

    def retexture(ver, oid, cam, frame, mode, blend, request: gr.Request = None):
        return rerun("texture", ver, oid, cam, frame, mode, blend, request)
    realign_btn.click(realign, [page.version, objects.select, *overlay.inputs], pose_outputs + sliders + [objects.ref])
    retexture_btn.click(retexture, [page.version, objects.select, *overlay.inputs], pose_outputs + sliders + [objects.ref])


# -- Masks ------------------------------------------------------------------------------------------
@dataclass
class _Masks:
    select: gr.Dropdown
    frame: gr.Slider
    backend: gr.Dropdown
    click_mode: gr.Radio
    image: gr.Image
    note: gr.Markdown
    proposal: gr.State
    clicks: gr.State


def _masks_tab(page: _Page, app: gr.Blocks) -> None:
    with gr.Tab("Masks", id="masks_tab"):
        note = gr.Markdown(elem_id="mask_note")
        with gr.Row():
            select = gr.Dropdown(page.objects, value=page.first_object, label="Object")
            frame = page.frame_slider()
            backend = gr.Dropdown(masks.seg_backends(), value="auto", label="Segmentation backend")
            click_mode = gr.Radio(masks.CLICK_MODES, value=masks.CLICK_MODES[0], label="A click adds", elem_id="click_mode")
        image = gr.Image(label="Click on the object to re-segment", type="numpy", format="png",
                         interactive=False, elem_id="mask_image")
        tab = _Masks(select, frame, backend, click_mode, image, note, gr.State(None), gr.State(None))
        with gr.Row():
            clear_btn = gr.Button("Clear clicks", elem_id="clear_clicks")
            accept_btn = gr.Button("Accept mask", elem_id="accept_mask")
            reject_btn = gr.Button("Reject mask", elem_id="reject_mask")
    _wire_mask_view(page, app, tab, clear_btn)
    _wire_mask_edits(page, tab, accept_btn, reject_btn)


def _wire_mask_view(page: _Page, app: gr.Blocks, tab: _Masks, clear_btn) -> None:
    """Choosing an object or frame, or 'Clear clicks', shows the saved mask; a click re-segments."""
    srv = page.srv

    def mask_refresh(oid, frame):
        img, note = masks.mask_picture(srv.bundle(), oid, frame)
        return img, note, None, None
    refresh_outputs = [tab.image, tab.note, tab.proposal, tab.clicks]
    for c in (tab.select, tab.frame):
        c.change(mask_refresh, [tab.select, tab.frame], refresh_outputs)
    app.load(mask_refresh, [tab.select, tab.frame], refresh_outputs)
    clear_btn.click(mask_refresh, [tab.select, tab.frame], refresh_outputs)

    def mask_click(oid, frame, backend, mode, clicks, evt: gr.SelectData):
        x, y = (int(v) for v in evt.index)
        clicks = masks.add_click(clicks, mode, (x, y))
        if not clicks["points"] and len(clicks["corners"]) < 2:
            img, note = masks.mask_picture(srv.bundle(), oid, frame, None, clicks)
            return img, note, None, clicks, ok_md(f"box corner at ({x}, {y}); click the opposite corner")
        try:
            prop = masks.resegment(srv.bundle(), int(frame or 0), oid, clicks, backend)
        except Exception as exc:  # noqa: BLE001 - any backend failure is shown on the page
            if not isinstance(exc, Real2SimError):
                log.exception("re-segmentation failed")
            img, note = masks.mask_picture(srv.bundle(), oid, frame, None, clicks)
            return img, note, None, clicks, err_md(f"re-segmentation at ({x}, {y}) failed: {exc}")
        img, note = masks.mask_picture(srv.bundle(), oid, frame, prop, clicks)
        return (img, note, prop, clicks,
                ok_md(f"re-segmented '{oid}' from {masks.describe_clicks(clicks)} with backend '{backend}'"))
    tab.image.select(mask_click, [tab.select, tab.frame, tab.backend, tab.click_mode, tab.clicks],
                     [tab.image, tab.note, tab.proposal, tab.clicks, page.status])


def _wire_mask_edits(page: _Page, tab: _Masks, accept_btn, reject_btn) -> None:
    """'Accept mask' saves the proposal; 'Reject mask' discards it, or (without one) removes the saved mask."""
    srv = page.srv

    def mask_accept(ver, oid, frame, prop, request: gr.Request = None):
        if prop is None:
            return ver, err_md("no mask proposal to accept: click on the object in the image first"), gr.update(), gr.update(), None
        try:
            b = srv.bundle()
            res = edits.set_mask(srv.root, masks.frame_key(b, int(frame or 0)), oid, prop, expected_version=ver,
                                 writer=_writer(request))
        except Real2SimError as exc:
            return ver, err_md(str(exc)), gr.update(), gr.update(), prop
        img, note = masks.mask_picture(srv.bundle(), oid, frame)
        return res.version, ok_md(res.message), img, note, None

    def mask_reject(ver, oid, frame, prop, request: gr.Request = None):
        if prop is not None:
            img, note = masks.mask_picture(srv.bundle(), oid, frame)
            return ver, ok_md("proposal discarded"), img, note, None
        try:
            b = srv.bundle()
            res = edits.remove_mask(srv.root, masks.frame_key(b, int(frame or 0)), oid, expected_version=ver,
                                    writer=_writer(request))
        except Real2SimError as exc:
            return ver, err_md(str(exc)), gr.update(), gr.update(), None
        img, note = masks.mask_picture(srv.bundle(), oid, frame)
        return res.version, ok_md(res.message), img, note, None

    inputs = [page.version, tab.select, tab.frame, tab.proposal]
    outputs = [page.version, page.status, tab.image, tab.note, tab.proposal]
    accept_btn.click(mask_accept, inputs, outputs).then(lambda: None, None, tab.clicks)
    reject_btn.click(mask_reject, inputs, outputs).then(lambda: None, None, tab.clicks)


# -- Camera & robot -------------------------------------------------------------------------------
def _camera_values(srv: ReviewServer, cam: str | None) -> list:
    """The six camera sliders (unchanged when ``cam`` is not in the bundle)."""
    vals = views.camera_pose_fields(srv.bundle().manifest, cam)
    if vals is None:
        return [gr.update()] * 6
    spans = [SPAN_M] * 3 + [SPAN_DEG] * 3
    return [gr.update(value=v, minimum=round(v - d, 4), maximum=round(v + d, 4)) for v, d in zip(vals, spans)]


def _save_camera_pose(srv: ReviewServer, ver: str, cam: str, shown, writer: str | None) -> tuple[str, str]:
    """Save what the camera sliders show (m, deg), keeping exact values where unchanged. Returns (version, message)."""
    b = srv.bundle()
    if cam not in b.manifest.cameras:
        raise edits.EditError(f"camera '{cam}' is not in the bundle")
    cur_xyz, cur_rpy = edits.camera_xyz_rpy(b.manifest.cameras[cam].T_world_camera)
    new = views.keep_exact(shown[:3], cur_xyz, 4)
    deg = views.keep_exact(shown[3:], np.degrees(cur_rpy), 2)
    deg = np.where(np.abs(deg) > 180, (deg + 180) % 360 - 180, deg)  # a slider +-10 deg around 175 passes 180
    if np.allclose(new, cur_xyz, atol=1e-12) and np.allclose(deg, np.degrees(cur_rpy), atol=1e-12):
        return srv.version(), f"camera {cam}: unchanged"
    res = edits.set_camera_pose(srv.root, cam, new, np.radians(deg), expected_version=ver, writer=writer)
    return res.version, _edit_message(res)


def _saved_md(msg: str):
    """The status after a slider's save: its message, or the status left as it is when nothing changed. Undo, or an
    edit elsewhere, sets the sliders and a slider's release then fires with the values already saved: its
    'unchanged' must not cover what that edit said ("undid: camera main")."""
    return gr.update() if msg.endswith(": unchanged") else ok_md(msg)


def _camera_tab(page: _Page, overlay: _Overlay) -> _CameraRobot:
    cams = page.cameras
    with gr.Tab("Camera & robot", id="camera_tab"):
        with gr.Row():
            with gr.Column(scale=1):
                select = gr.Dropdown(cams, value=cams[0] if cams else None, label="Camera")
                sliders = _sliders(CAMERA_SLIDERS)
                robot_note = gr.Markdown(elem_id="robot_note")
                with gr.Group(visible=page.bundle.manifest.robot is not None):
                    base = [gr.Number(label=label) for label in ("base x (m)", "base y (m)", "base z (m)", "base yaw (deg)")]
                    robot_btn = gr.Button("Apply base pose")
                robot_controls, why = views.robot_joint_controls(page.bundle)
                with gr.Accordion("Robot joints (its start pose)", open=True,
                                  visible=page.bundle.manifest.robot is not None, elem_id="robot_joints"):
                    gr.Markdown("The robot's start joints (`robot.joint_positions`: where each episode starts), each "
                                "between its limits: **deg** for a revolute joint, **m** for a prismatic one (a "
                                "finger). This tab's preview and the mounted cameras draw the robot at these joints; "
                                "the Overlay tab draws it at the frame's recorded joints where the frame has them. "
                                "Saved as `real2sim set-joints DIR robot NAME=VALUE` does; undoable."
                                + (f" ({why})" if why else ""))
                    robot_sliders = _joint_sliders(robot_controls, page.bundle)
            with gr.Column(scale=2):
                image = gr.Image(label="Live overlay (the robot at its start joints)", type="numpy", format="png",
                                 interactive=False, elem_id="camera_preview")
                mounted = views.mounted_camera_names(page.bundle)
                with gr.Group(visible=bool(mounted)):
                    mounted_select = gr.Dropdown(sorted(mounted), value=sorted(mounted)[0] if mounted else None,
                                                 label="Robot-mounted camera", elem_id="mounted_select")
                    mounted_note = gr.Markdown(elem_id="mounted_note")
                    mounted_image = gr.Image(label="View from the robot-mounted camera (render only: no plate)",
                                             type="numpy", format="png", interactive=False, elem_id="mounted_view")
    tab = _CameraRobot(select, sliders, image, robot_note, base, robot_controls, robot_sliders, mounted_select,
                       mounted_image, mounted_note)
    _wire_camera(page, overlay, tab)
    _wire_robot(page, base, robot_btn)
    _wire_robot_joints(page, overlay, tab)
    return tab


def _wire_camera(page: _Page, overlay: _Overlay, tab: _CameraRobot) -> None:
    srv = page.srv

    def camera_select(cam, frame, mode, blend):
        return (*_camera_values(srv, cam), _robot_views(srv, cam, frame, mode, blend)[0])
    tab.select.input(camera_select, [tab.select, overlay.frame, overlay.mode, overlay.blend], [*tab.sliders, tab.image])

    def apply_camera(ver, cam, x, y, z, roll, pitch, yaw, frame, mode, blend, request: gr.Request = None):
        try:
            nver, msg = _save_camera_pose(srv, ver, cam, [x, y, z, roll, pitch, yaw], _writer(request))
        except (Real2SimError, TypeError, ValueError) as exc:
            img, over, note = _robot_views(srv, cam, frame, mode, blend)
            return ver, err_md(str(exc)), img, gr.update(), over, note
        img, over, note = _robot_views(srv, cam, frame, mode, blend)
        return nver, _saved_md(msg), img, _version_note(nver), over, note

    inputs = [page.version, tab.select, *tab.sliders, overlay.frame, overlay.mode, overlay.blend]
    outputs = [page.version, page.status, tab.image, page.version_md, overlay.image, overlay.note]
    for s in tab.sliders:
        s.input(apply_camera, inputs, outputs, trigger_mode="always_last", show_progress="hidden")
        s.release(apply_camera, inputs, outputs, trigger_mode="always_last", show_progress="hidden")


def _wire_robot(page: _Page, base: list, robot_btn) -> None:
    srv = page.srv

    def apply_robot(ver, x, y, z, yaw, request: gr.Request = None):
        try:
            r = srv.bundle().manifest.robot
            rpy = edits.pose_to_xyz_rpy(r.base_pose)[1] if r else [0, 0, 0]
            res = edits.set_robot_base_pose(srv.root, [x, y, z], [rpy[0], rpy[1], np.radians(yaw)], expected_version=ver,
                                            writer=_writer(request))
        except (Real2SimError, TypeError, ValueError) as exc:
            return ver, err_md(str(exc)), gr.update()
        return res.version, ok_md(res.message), _version_note(res.version)
    robot_btn.click(apply_robot, [page.version, *base], [page.version, page.status, page.version_md])


# -- joint sliders (articulated objects on the Objects tab, the robot on the Camera & robot tab) -------------
def _robot_views(srv: ReviewServer, cam, frame, mode, blend) -> tuple:
    """(the Camera & robot tab's picture: the robot at its start joints, the Overlay tab's picture: at the frame's
    recorded joints where it has them, the Overlay's note); one render when the frame records no joints."""
    over, note = srv.picture(cam, frame, mode, blend)
    frames = srv.bundle().manifest.capture.frames
    recorded = bool(frames) and bool(frames[int(np.clip(int(frame or 0), 0, len(frames) - 1))].joint_positions)
    return (srv.picture(cam, frame, mode, blend, robot_start=True)[0] if recorded else over), over, note


def _joint_sliders(controls: list, bundle: Bundle, prefix: bool = False) -> list[gr.Slider]:
    """One slider per joint, its range the joint's limits in the shown unit (m or deg), at the stored value."""
    out = []
    for c, v in zip(controls, views.joint_values(bundle, controls)):
        lo, hi = c.bounds()
        shown = c.shown(v)
        out.append(gr.Slider(lo, hi, value=None if shown is None else float(np.clip(shown, lo, hi)), step=c.step,
                             label=f"{c.owner}: {c.label}" if prefix else c.label, elem_id=c.elem_id))
    return out


def _joint_slider_values(srv: ReviewServer, controls: list) -> list:
    """The sliders' values from ``scene.json`` (after a reload or an undo)."""
    return [gr.update() if v is None else gr.update(value=c.shown(v))
            for c, v in zip(controls, views.joint_values(srv.bundle(), controls))]


def _save_joint(srv: ReviewServer, ver: str, control, shown, writer: str | None) -> tuple[str, str]:
    """Save one joint slider's value (m or deg on the page; m or rad in the bundle); a slider still at the shown
    rounding keeps the exact stored value. Returns (version, message in the slider's unit)."""
    owner = "robot" if control.robot else f"object {control.owner}"
    if shown is None:
        raise edits.EditError(f"{owner} joint {control.joint.name}: no value")
    cur = views.joint_values(srv.bundle(), [control])[0]
    if cur is None:
        raise edits.EditError(f"{owner} is no longer in the bundle; press 'Reload from disk'")
    value = control.to_store(float(shown), cur)
    text = f"{owner} joint {control.joint.name} = {float(shown):g} {control.joint.unit}"
    if value == cur:
        return srv.version(), f"{text}: unchanged"
    if control.robot:
        res = edits.set_robot_joints(srv.root, {control.joint.name: value}, expected_version=ver, writer=writer)
    else:
        res = edits.set_object_joints(srv.root, control.owner, {control.joint.name: value}, expected_version=ver,
                                      writer=writer)
    return res.version, text + (f"; marked stale: {', '.join(res.stale)}" if res.stale else "")


def _wire_joint_sliders(page: _Page, controls: list, sliders: list, extra_inputs: list, outputs: list, redraw) -> None:
    """Each slider saves its joint (:func:`_save_joint`) on drag and release; ``redraw(*extra)`` gives the pictures
    that follow (``outputs`` after version, status and version note)."""
    srv = page.srv

    def handler(control):
        def apply(ver, shown, *extra, request: gr.Request = None):
            try:
                nver, msg = _save_joint(srv, ver, control, shown, _writer(request))
                ok, back = True, gr.update()
            except (Real2SimError, TypeError, ValueError) as exc:
                nver, msg, ok = ver, str(exc), False
                cur = views.joint_values(srv.bundle(), [control])[0]
                back = gr.update() if cur is None else gr.update(value=control.shown(cur))  # the saved value again
            return (nver, _saved_md(msg) if ok else err_md(msg), _version_note(nver) if ok else gr.update(), back,
                    *redraw(*extra))
        return apply

    for c, s in zip(controls, sliders):
        fn = handler(c)
        for ev in (s.input, s.release):
            # preprocess=False: a value typed outside the limits reaches the edit, which refuses it naming the joint
            # and its limits (Gradio's own check would only say 'Value 0.3 is greater than maximum value 0.15')
            ev(fn, [page.version, s, *extra_inputs], [page.version, page.status, page.version_md, s, *outputs],
               trigger_mode="always_last", show_progress="hidden", preprocess=False)


def _wire_object_joints(page: _Page, overlay: _Overlay, objects: _Objects) -> None:
    """An articulated object's joint slider: save, then the live overlay (and the Overlay tab) follow."""
    def redraw(cam, frame, mode, blend):
        img, note = page.srv.picture(cam, frame, mode, blend)
        return img, img, note
    _wire_joint_sliders(page, objects.joint_controls, objects.joint_sliders, overlay.inputs,
                        [objects.image, overlay.image, objects.note], redraw)


def _wire_robot_joints(page: _Page, overlay: _Overlay, tab: _CameraRobot) -> None:
    """A robot joint slider: save, then this tab's preview (robot at the start joints), the mounted camera's view and
    the Overlay tab follow. Choosing a mounted camera shows its view."""
    srv = page.srv

    def redraw(cam, frame, mode, blend, mounted):
        img, over, note = _robot_views(srv, cam, frame, mode, blend)
        mimg, mnote = srv.mounted_view(mounted) if tab.mounted_select.choices else (None, "")
        return img, mimg, mnote, over, note
    _wire_joint_sliders(page, tab.joint_controls, tab.joint_sliders, [*overlay.inputs, tab.mounted_select],
                        [tab.image, tab.mounted_image, tab.mounted_note, overlay.image, overlay.note], redraw)
    tab.mounted_select.change(srv.mounted_view, tab.mounted_select, [tab.mounted_image, tab.mounted_note])


# -- Collision --------------------------------------------------------------------------------------
def _collision_tab(page: _Page) -> None:
    with gr.Tab("Collision", id="collision_tab") as collision_tab:
        select = gr.Dropdown(page.objects, value=page.first_object, label="Object")
        note = gr.Markdown(elem_id="collision_note")
        with gr.Row():
            view3d = gr.Model3D(label="visual mesh (grey) vs collision hulls (colours)", height=420,
                                elem_id="collision_view", clear_color=(0.95, 0.95, 0.95, 1.0))
            stats = gr.JSON(label="hull stats")

    def collision_view(oid):
        return views.collision_view(page.srv.bundle(), oid)
    select.change(collision_view, select, [view3d, note, stats])
    # Model3D only starts its WebGL canvas when it gets a value while visible: (re)send it on tab select
    collision_tab.select(lambda: None, None, view3d).then(collision_view, select, [view3d, note, stats])


# -- 3D scene, settle, rollouts -----------------------------------------------------------------------
def _scene_tab(page: _Page, overlay: _Overlay) -> tuple[gr.Dropdown, gr.Button]:
    """The whole scene in 3D, a physics settle preview and the recorded rollouts. Returns the rollout list and its
    refresh button (an evaluation refreshes them)."""
    srv = page.srv
    with gr.Tab("3D scene & rollouts", id="scene_tab") as scene_tab:
        gr.Markdown("The saved scene in 3D: objects at their poses (textured), their collision geometry in place "
                    "(translucent red), the robot at the frame's joints and each camera's frustum (yellow). Drag to "
                    "orbit, scroll to zoom.")
        with gr.Row():
            collision = gr.Checkbox(True, label="collision geometry", elem_id="scene_collision")
            draw_btn = gr.Button("Redraw the 3D scene", size="sm", elem_id="scene_draw")
        scene_note = gr.Markdown(elem_id="scene_note")
        view3d = gr.Model3D(label="scene (world +Z up)", height=480, elem_id="scene_view",
                            clear_color=(0.95, 0.95, 0.95, 1.0))
        gr.Markdown("**Settle**: step the physics from the saved poses, as every episode starts (its `settle_s`), and "
                    "see where things come to rest: an object that moves more than a few mm floats, sinks or "
                    "intersects something. The bundle is not changed.")
        with gr.Row():
            seconds = gr.Number(1.0, label="settle time (s)", minimum=0.01, maximum=10, elem_id="settle_seconds")
            settle_btn = gr.Button("Settle", elem_id="settle_btn")
        settle_note = gr.Markdown(elem_id="settle_note")
        with gr.Row():
            settle_img = gr.Image(label="after settling (the policy's view)", type="numpy", format="png",
                                  interactive=False, elem_id="settle_image")
            settle_df = gr.Dataframe(headers=["object", "moved (mm)", "turned (deg)", "dropped (mm)"],
                                     interactive=False, elem_id="settle_table")
        gr.Markdown("**Rollouts**: episode videos recorded by an evaluation with videos on (the Export & evaluate "
                    "tab, or `real2sim eval DIR --videos`).")
        with gr.Row():
            vids = views.rollout_videos(srv.root)
            videos = gr.Dropdown(vids, value=vids[0] if vids else None, label="episode video (newest first)",
                                 elem_id="rollout_select")
            refresh_btn = gr.Button("Refresh the list", size="sm")
        video = gr.Video(label="rollout", elem_id="rollout_video", autoplay=True, loop=True, height=400)

    def draw(with_collision, frame):
        try:
            path, note = views.scene_glb(srv.bundle(), int(frame or 0), bool(with_collision))
        except Real2SimError as exc:
            return None, err_md(str(exc))
        return str(path), note
    # Model3D starts its WebGL canvas only when it gets a value while visible: (re)send it on tab select
    scene_tab.select(lambda: None, None, view3d).then(draw, [collision, overlay.frame], [view3d, scene_note])
    draw_btn.click(draw, [collision, overlay.frame], [view3d, scene_note])
    collision.change(draw, [collision, overlay.frame], [view3d, scene_note])

    def settle(cam, secs):
        try:
            img, rows, note = srv.settle(cam, float(secs or 1.0))
        except (Real2SimError, TypeError, ValueError) as exc:
            return None, [], err_md(str(exc))
        return img, rows, note
    settle_btn.click(settle, [overlay.camera, seconds], [settle_img, settle_df, settle_note])

    def play(rel):
        if not rel:
            return None
        try:
            return str(views.playable_video(srv.bundle(), rel))
        except Real2SimError as exc:
            gr.Warning(str(exc))
            return None
    videos.change(play, videos, video)
    scene_tab.select(play, videos, video)  # the newest episode, ready to play
    refresh_btn.click(lambda: gr.update(choices=views.rollout_videos(srv.root)), None, videos)
    return videos, refresh_btn


# -- Export & evaluate ------------------------------------------------------------------------------
def _export_tab(page: _Page, app: gr.Blocks, rollouts: gr.Dropdown | None = None) -> None:
    with gr.Tab("Export & evaluate", id="export_tab"):
        with gr.Row():
            engines = gr.CheckboxGroup(engine_names(), value=engine_names(), label="Engines")
            policy = gr.Textbox("scripted", label=f"Policy: {' or '.join(PAGE_POLICIES)}[:noise=0.02] (replay files and "
                                "policy servers: 'real2sim eval' on the command line)", elem_id="eval_policy")
            episodes = gr.Number(3, label="Episodes", precision=0, minimum=1, maximum=200, elem_id="eval_episodes")
            obs_mode = gr.Dropdown(["state", "render", "composited"], value="state", label="Observation")
        with gr.Row():
            tasks = sorted(page.bundle.manifest.tasks)
            task = gr.Dropdown(tasks, value=tasks[0] if tasks else None, label="Task", elem_id="eval_task")
            backend = gr.Dropdown(simulator_names(), value=simulator_names()[0], label="Simulator",
                                  elem_id="eval_backend")
            record = gr.Checkbox(False, label="record episode videos (3D scene & rollouts tab)", elem_id="eval_videos")
        with gr.Row():
            export_btn = gr.Button("Export", variant="primary", elem_id="export_btn")
            eval_btn = gr.Button("Evaluate", elem_id="eval_btn")
        export_md = gr.Markdown(elem_id="export_result")
        eval_md = gr.Markdown(elem_id="eval_result")
        files = gr.Dataframe(headers=["file", "bytes"], interactive=False, elem_id="export_files",
                             label="Files under exports/")
    export_btn.click(_exporter(page), [page.version, engines], [page.version, page.status, export_md, files, page.version_md])
    app.load(lambda: views.export_files(page.srv.root), None, files)
    ev = eval_btn.click(_evaluator(page), [policy, episodes, obs_mode, task, backend, record], eval_md)
    if rollouts is not None:
        ev.then(lambda: gr.update(choices=views.rollout_videos(page.srv.root)), None, rollouts)


def _exporter(page: _Page):
    srv = page.srv

    def do_export(ver, engines, progress=gr.Progress()):
        if not engines:
            return ver, err_md("choose at least one engine"), "", [], gr.update()
        progress(0.1, desc=f"exporting to {', '.join(engines)}")
        try:
            b = srv.bundle()
            if ver and srv.version() != ver:
                raise edits.ConcurrentEditError("scene.json changed since this page loaded it; press 'Reload from disk' first")
            results = export_bundle(b, engines=tuple(engines), force=True)
        except Real2SimError as exc:
            files = views.export_files(srv.root)
            return (srv.version(), err_md(f"export failed: {exc}. The bundle is unchanged apart from the stage status; "
                                          "previous exports are kept."), err_md(str(exc)), files, _version_note(srv.version()))
        progress(0.9, desc="listing files")
        lines = views.export_lines(results, srv.root)
        srv.reset_preview()
        nver = srv.version()
        failed = [n for n, r in results.items() if isinstance(r, Exception)]
        msg = (err_md(f"export failed for {', '.join(failed)} (the other engines exported; see below)") if failed
               else ok_md("export finished"))
        return nver, msg, lines, views.export_files(srv.root), _version_note(nver)
    return do_export


def _evaluator(page: _Page):
    srv = page.srv

    def do_eval(policy, episodes, obs_mode, task=None, backend=None, record=False, progress=gr.Progress()):
        try:
            from real2sim.evaluation.envs.runner import evaluate  # needs gymnasium (optional)
        except ImportError as exc:
            return err_md(f"evaluation is not available in this install ({exc}). Export works; install the "
                          "evaluation extra (pip install 'real2sim[envs]') and run `real2sim eval DIR`")
        try:
            n = int(episodes)
            if not 1 <= n <= 200:
                raise ValueError(f"episodes must be 1..200, got {n}")
            policy = check_page_policy(policy)
        except (TypeError, ValueError, Real2SimError) as exc:
            return err_md(str(exc))
        progress(0, desc=f"evaluating {policy} for {n} episode(s)")

        def tick(done, total, rec):
            try:
                progress(done / max(total, 1), desc=f"episode {done}/{total}")
            except Exception:  # noqa: BLE001 - progress display only
                pass

        try:
            s = srv.on_render_thread(lambda: evaluate(srv.root, task or None, policy, n, obs_mode=obs_mode,
                                                      backend=backend or None, videos=bool(record),
                                                      out_dir=srv.root / "results" / "review", progress=tick))
        except Real2SimError as exc:
            return err_md(f"evaluation failed: {exc}")
        return views.eval_summary(s, srv.root)
    return do_eval


# -- serving ----------------------------------------------------------------------------------------
def launch(bundle_dir, host: str = "127.0.0.1", port: int | None = None, auth: tuple[str, str] | str | None = None,
           block: bool = True, quiet: bool = False, login_limit: tuple[int, float] = (5, 60.0)):
    """Serve the review page. ``auth``: ``(user, password)`` or ``"user:pass"``; ``login_limit``: (failed logins,
    seconds) after which a user name is refused for that long (:class:`LoginLimiter`). Returns ``(app, url)`` when not
    blocking."""
    root = Path(bundle_dir).resolve()
    app = build_app(root)
    if isinstance(auth, str):
        if ":" not in auth:
            raise ValueError("--auth must look like USER:PASSWORD")
        auth = tuple(auth.split(":", 1))
    check = LoginLimiter(*auth, max_failures=login_limit[0], window_s=login_limit[1]).check if auth else None
    app.queue(default_concurrency_limit=4)
    _, url, _ = app.launch(server_name=host, server_port=port, auth=check, allowed_paths=[str(root)],
                           blocked_paths=[str(root / edits.HISTORY_DIR)], prevent_thread_lock=True, quiet=quiet,
                           show_error=True, footer_links=[], ssr_mode=False)
    log.info("review page for %s at %s", root, url)
    if block:
        try:
            app.block_thread()
        finally:
            app.review_server.close()
    return app, url
