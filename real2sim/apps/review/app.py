"""``real2sim review DIR``: a Gradio page over a scene bundle.

The page holds no pipeline logic: every edit goes through :mod:`real2sim.apps.review.library` (validated,
atomic, undoable, stale-marking, refused on concurrent change) and every stage through
:mod:`real2sim.pipeline`. Tabs: Overview, Overlay, Objects, Masks, Camera & robot, Collision,
Export & evaluate.

Each browser tab remembers the version of ``scene.json`` it loaded (``gr.State``); an edit
made from a tab that is behind the file on disk is refused with a message and the
'Reload from disk' button. The server binds to 127.0.0.1 unless told otherwise and serves
only files inside the bundle directory (plus Gradio's own cache of the images it renders);
``.history/`` is blocked.

All MuJoCo work runs on one worker thread (an EGL context belongs to the thread that made it).
"""
from __future__ import annotations

import concurrent.futures
import logging
import os
from pathlib import Path

import numpy as np

from real2sim.engines import engine_names
from real2sim.pipeline import export_bundle

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from real2sim.apps.review import library as rv  # noqa: E402
from real2sim.core.bundle import Bundle  # noqa: E402
from real2sim.core.errors import Real2SimError  # noqa: E402
from real2sim.core.manifest import MASK_STATES_AT_POSE  # noqa: E402

log = logging.getLogger(__name__)

MODES = ["composite", "blend", "difference", "render"]
CLICK_MODES = ["object point", "background point", "box corner"]


def _ok(msg: str) -> str:
    return f"**OK:** {msg}"


def _err(msg: str) -> str:
    return f"**Error:** {msg}"


class ReviewServer:
    """Server-side state shared by every browser tab: the bundle directory and one preview renderer."""

    def __init__(self, bundle_dir: Path, export_if_missing: bool = True):
        self.root = Path(bundle_dir).resolve()
        Bundle.load(self.root)  # fail early with the bundle's own message
        self.export_if_missing = export_if_missing
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="review-render")
        self._preview: rv.PreviewRenderer | None = None
        self.preview_error = ""

    # -- helpers ---------------------------------------------------------------------------------
    def bundle(self) -> Bundle:
        return Bundle.load(self.root)

    def version(self) -> str:
        return rv.manifest_version(self.root)

    def _on_render_thread(self, fn, *args):
        return self._pool.submit(fn, *args).result()

    def _get_preview(self, bundle: Bundle) -> rv.PreviewRenderer | None:
        if self._preview is None and not self.preview_error:
            try:
                self._preview = rv.PreviewRenderer(bundle, export_if_missing=self.export_if_missing)
            except Real2SimError as exc:
                self.preview_error = f"no preview: {exc}"
                log.warning("%s", self.preview_error)
        return self._preview

    def reset_preview(self) -> None:
        def close():
            if self._preview is not None:
                self._preview.close()
            self._preview, self.preview_error = None, ""
        self._on_render_thread(close)

    def picture(self, camera: str | None, frame: int, mode: str, blend: float, highlight: list[str] | None = None):
        """(overlay image, note) for the current manifest."""
        def work():
            bundle = self.bundle()
            cams = list(bundle.manifest.cameras)
            if not cams:
                return None, "no camera in the bundle: add one with 'real2sim init DIR --frames ... --camera camera.json'"
            cam = camera if camera in cams else cams[0]
            real, real_note = rv.real_image(bundle, int(frame or 0))
            pr = self._get_preview(bundle)
            if pr is None:
                return real, f"{self.preview_error} ({real_note})"
            pr.sync(bundle.manifest)
            img = pr.render(cam)
            mask = pr.mask(cam, list(bundle.manifest.objects if highlight is None else highlight)) if mode == "composite" and real is not None else None
            return rv.compose_overlay(img, real, blend, mode, mask), f"camera '{cam}'; real image: {real_note}"
        return self._on_render_thread(work)

    def close(self) -> None:
        def close():
            if self._preview is not None:
                self._preview.close()
        self._on_render_thread(close)
        self._pool.shutdown(wait=True)


def _choices(d) -> list[str]:
    return list(d)


def build_app(bundle_dir, export_if_missing: bool = True) -> gr.Blocks:
    """The review page for the bundle at ``bundle_dir`` (not launched)."""
    srv = ReviewServer(bundle_dir, export_if_missing)
    b0 = srv.bundle()
    objects0 = _choices(b0.manifest.objects)
    dynamic0 = [o for o, spec in b0.manifest.objects.items() if not spec.fixed] or objects0
    cams0 = _choices(b0.manifest.cameras)
    nframes0 = len(b0.manifest.capture.frames)

    with gr.Blocks(title=f"real2sim review: {b0.manifest.name}") as app:
        app.review_server = srv  # for tests and shutdown
        version = gr.State("")
        gr.Markdown(f"# real2sim review — `{srv.root}`")
        with gr.Row():
            status = gr.Markdown("", elem_id="status")
        with gr.Row():
            undo_btn = gr.Button("Undo last edit", elem_id="undo", size="sm")
            reload_btn = gr.Button("Reload from disk", elem_id="reload", size="sm")
            version_md = gr.Markdown("", elem_id="version")

        # ---------------------------------------------------------------- Overview
        with gr.Tab("Overview", id="overview"):
            summary = gr.Markdown(elem_id="summary")
            stages_df = gr.Dataframe(headers=["stage", "status", "metrics", "message"], interactive=False,
                                     elem_id="stages", wrap=True)
            history_df = gr.Dataframe(headers=["#", "edit"], interactive=False, label="Undo history (newest last)")
            reports_gallery = gr.Gallery(label="Reports", columns=3, height=320, elem_id="reports")
            refresh_btn = gr.Button("Refresh", size="sm")

        # ---------------------------------------------------------------- Overlay
        with gr.Tab("Overlay", id="overlay_tab"):
            with gr.Row():
                cam_dd = gr.Dropdown(cams0, value=cams0[0] if cams0 else None, label="Camera")
                frame_sl = gr.Slider(0, max(nframes0 - 1, 1), value=0, step=1, label="Frame",
                                     interactive=nframes0 > 1)
                mode_radio = gr.Radio(MODES, value="composite", label="View")
                blend_sl = gr.Slider(0, 1, value=0.5, step=0.05, label="Blend (0 = real, 1 = simulation)")
            overlay_note = gr.Markdown(elem_id="overlay_note")
            overlay_img = gr.Image(label="Overlay", type="numpy", format="png", interactive=False, elem_id="overlay")

        # ---------------------------------------------------------------- Objects
        with gr.Tab("Objects", id="objects_tab"):
            with gr.Row():
                with gr.Column(scale=1):
                    obj_dd = gr.Dropdown(objects0, value=dynamic0[0] if dynamic0 else None, label="Object",
                                         elem_id="object_select")
                    sx = gr.Slider(-1.5, 1.5, step=0.001, label="x (m)", elem_id="pose_x")
                    sy = gr.Slider(-1.5, 1.5, step=0.001, label="y (m)", elem_id="pose_y")
                    sz = gr.Slider(-0.5, 1.5, step=0.001, label="z (m)", elem_id="pose_z")
                    sr = gr.Slider(-180, 180, step=0.5, label="roll (deg)", elem_id="pose_roll")
                    sp = gr.Slider(-180, 180, step=0.5, label="pitch (deg)", elem_id="pose_pitch")
                    syaw = gr.Slider(-180, 180, step=0.5, label="yaw (deg)", elem_id="pose_yaw")
                    pose_text = gr.Textbox(label="Exact pose: x, y, z (m), roll, pitch, yaw (deg)",
                                           elem_id="pose_text")
                    apply_btn = gr.Button("Apply exact pose", elem_id="apply_pose")
                    gr.Markdown("Re-fit this object to its masks (render-and-compare), or re-project its texture "
                                "from the frames. Both can be undone.")
                    with gr.Row():
                        realign_btn = gr.Button("Re-run alignment", elem_id="rerun_alignment")
                        retexture_btn = gr.Button("Re-run texturing", elem_id="rerun_texture")
                with gr.Column(scale=2):
                    obj_img = gr.Image(label="Live overlay", type="numpy", format="png", interactive=False,
                                       elem_id="object_preview")
        pose_sliders = [sx, sy, sz, sr, sp, syaw]

        # ---------------------------------------------------------------- Masks
        with gr.Tab("Masks", id="masks_tab"):
            mask_note = gr.Markdown(elem_id="mask_note")
            with gr.Row():
                mask_obj = gr.Dropdown(objects0, value=dynamic0[0] if dynamic0 else None, label="Object")
                mask_frame = gr.Slider(0, max(nframes0 - 1, 1), value=0, step=1, label="Frame",
                                       interactive=nframes0 > 1)
                backend_dd = gr.Dropdown(_seg_backends(), value="auto", label="Segmentation backend")
                click_mode = gr.Radio(CLICK_MODES, value=CLICK_MODES[0], label="A click adds", elem_id="click_mode")
            mask_img = gr.Image(label="Click on the object to re-segment", type="numpy", format="png",
                                interactive=False, elem_id="mask_image")
            mask_state = gr.State(None)
            clicks_state = gr.State(None)
            with gr.Row():
                clear_btn = gr.Button("Clear clicks", elem_id="clear_clicks")
                accept_btn = gr.Button("Accept mask", elem_id="accept_mask")
                reject_btn = gr.Button("Reject mask", elem_id="reject_mask")

        # ---------------------------------------------------------------- Camera & robot
        with gr.Tab("Camera & robot", id="camera_tab"):
            with gr.Row():
                with gr.Column(scale=1):
                    cam2_dd = gr.Dropdown(cams0, value=cams0[0] if cams0 else None, label="Camera")
                    cx_ = gr.Slider(-3, 3, step=0.001, label="camera x (m)", elem_id="cam_x")
                    cy_ = gr.Slider(-3, 3, step=0.001, label="camera y (m)", elem_id="cam_y")
                    cz_ = gr.Slider(-1, 3, step=0.001, label="camera z (m)", elem_id="cam_z")
                    cr_ = gr.Slider(-180, 180, step=0.1, label="camera roll (deg)", elem_id="cam_roll")
                    cp_ = gr.Slider(-180, 180, step=0.1, label="camera pitch (deg)", elem_id="cam_pitch")
                    cyaw_ = gr.Slider(-180, 180, step=0.1, label="camera yaw (deg)", elem_id="cam_yaw")
                    robot_md = gr.Markdown(elem_id="robot_note")
                    with gr.Group(visible=b0.manifest.robot is not None):
                        rx = gr.Number(label="base x (m)")
                        ry = gr.Number(label="base y (m)")
                        rz = gr.Number(label="base z (m)")
                        ryaw = gr.Number(label="base yaw (deg)")
                        robot_btn = gr.Button("Apply base pose")
                with gr.Column(scale=2):
                    cam_img = gr.Image(label="Live overlay", type="numpy", format="png", interactive=False,
                                       elem_id="camera_preview")
        cam_sliders = [cx_, cy_, cz_, cr_, cp_, cyaw_]

        # ---------------------------------------------------------------- Collision
        with gr.Tab("Collision", id="collision_tab") as collision_tab:
            col_dd = gr.Dropdown(objects0, value=dynamic0[0] if dynamic0 else None, label="Object")
            col_note = gr.Markdown(elem_id="collision_note")
            with gr.Row():
                col_3d = gr.Model3D(label="visual mesh (grey) vs collision hulls (colours)", height=420,
                                    elem_id="collision_view", clear_color=(0.95, 0.95, 0.95, 1.0))
                col_json = gr.JSON(label="hull stats")

        # ---------------------------------------------------------------- Export & evaluate
        with gr.Tab("Export & evaluate", id="export_tab"):
            with gr.Row():
                engines_cb = gr.CheckboxGroup(engine_names(), value=engine_names(), label="Engines")
                policy_tb = gr.Textbox("scripted", label="Policy (as for 'real2sim eval --policy')", elem_id="eval_policy")
                episodes_nb = gr.Number(3, label="Episodes", precision=0, minimum=1, maximum=200, elem_id="eval_episodes")
                obs_dd = gr.Dropdown(["state", "render", "composited"], value="state", label="Observation")
            with gr.Row():
                export_btn = gr.Button("Export", variant="primary", elem_id="export_btn")
                eval_btn = gr.Button("Evaluate", elem_id="eval_btn")
            export_md = gr.Markdown(elem_id="export_result")
            export_files = gr.Dataframe(headers=["file", "bytes"], interactive=False, elem_id="export_files")
            eval_md = gr.Markdown(elem_id="eval_result")

        # ================================================================= handlers
        view_inputs = [cam_dd, frame_sl, mode_radio, blend_sl]

        def view(camera, frame, mode, blend, highlight=None):
            img, note = srv.picture(camera, frame, mode, blend, highlight)
            return img, note

        def overview():
            b = srv.bundle()
            m = b.manifest
            lines = [f"**{m.name}** — {len(m.objects)} objects, cameras: {', '.join(m.cameras) or 'none'}, "
                     f"{len(m.capture.frames)} frames, robot: {m.robot.name if m.robot else 'none'}"]
            stale = [n for n, r in m.stages.items() if r.status in ("stale", "failed")]
            if stale:
                lines.append("**Stale or failed:** " + ", ".join(f"`{n}` ({m.stages[n].status})" for n in stale))
            missing = rv.missing_pieces(b)
            if missing:
                lines.append("**Missing:**\n" + "\n".join(f"- {x}" for x in missing))
            rows = rv.stage_table(b) or [["(none)", "", "", "run 'real2sim build'"]]
            hist = [[h["file"].split(".")[0], h["edit"]] for h in rv.history(srv.root)] or [["", "(no edits yet)"]]
            pics = sorted(p for p in (b.root / "reports").glob("**/*.png")) if (b.root / "reports").is_dir() else []
            pics += sorted((b.root / "objects").glob("*/collision/quality.png"))
            gallery = [(str(p), b.rel(p)) for p in pics[:24]]
            return "\n\n".join(lines), rows, hist, gallery

        def object_values(oid):
            b = srv.bundle()
            if not oid or oid not in b.manifest.objects:
                return [gr.update()] * 6 + [""]
            xyz, rpy = rv.pose_to_xyz_rpy(b.manifest.objects[oid].pose)
            deg = [round(float(np.degrees(a)), 2) for a in rpy]
            vals = [round(v, 4) for v in xyz] + deg
            return vals + [", ".join(f"{v:g}" for v in vals)]

        def camera_values(cam):
            b = srv.bundle()
            if not cam or cam not in b.manifest.cameras:
                return [gr.update()] * 6
            xyz, rpy = rv.camera_xyz_rpy(b.manifest.cameras[cam].T_world_camera)
            return [round(v, 4) for v in xyz] + [round(float(np.degrees(a)), 2) for a in rpy]

        def robot_values():
            b = srv.bundle()
            r = b.manifest.robot
            if r is None:
                return (f"No robot in this bundle: run `real2sim init {b.root} --frames PATH --robot NAME`. "
                        "Robot appearance editing comes with the robot colour-matching stage."), 0, 0, 0, 0
            xyz, rpy = rv.pose_to_xyz_rpy(r.base_pose)
            return (f"Robot **{r.name}**. Base pose edits are saved to scene.json; the preview does not draw the "
                    "robot yet (the MJCF export has no robot)."), *[round(v, 4) for v in xyz], round(float(np.degrees(rpy[2])), 2)

        def load_all(camera, frame, mode, blend, oid, cam2):
            ver = srv.version()
            ov = overview()
            img, note = view(camera, frame, mode, blend)
            objv = object_values(oid)
            camv = camera_values(cam2)
            rob = robot_values()
            return (ver, f"scene.json version `{ver}`", *ov, img, note, img, *objv, *camv, img, *rob)

        load_outputs = [version, version_md, summary, stages_df, history_df, reports_gallery, overlay_img, overlay_note,
                        obj_img, *pose_sliders, pose_text, *cam_sliders, cam_img, robot_md, rx, ry, rz, ryaw]
        load_inputs = [*view_inputs, obj_dd, cam2_dd]
        app.load(load_all, load_inputs, load_outputs)

        def reload(camera, frame, mode, blend, oid, cam2):
            out = load_all(camera, frame, mode, blend, oid, cam2)
            return (_ok("reloaded scene.json from disk"),) + out
        reload_btn.click(reload, load_inputs, [status] + load_outputs)
        refresh_btn.click(overview, None, [summary, stages_df, history_df, reports_gallery])

        def do_undo(ver, camera, frame, mode, blend, oid, cam2, request: gr.Request = None):
            try:
                res = rv.undo(srv.root, ver, writer=_writer(request))
            except Real2SimError as exc:
                return (_err(str(exc)),) + tuple(gr.update() for _ in load_outputs)
            return (_ok(res.message),) + load_all(camera, frame, mode, blend, oid, cam2)
        undo_btn.click(do_undo, [version] + load_inputs, [status] + load_outputs)

        for c in view_inputs:
            c.change(view, view_inputs, [overlay_img, overlay_note], trigger_mode="always_last")

        # -- objects
        def select_object(oid, camera, frame, mode, blend):
            vals = object_values(oid)
            img, _ = view(camera, frame, mode, blend)
            return (*vals, img)
        obj_dd.input(select_object, [obj_dd, *view_inputs], [*pose_sliders, pose_text, obj_img])

        def apply_pose(ver, oid, x, y, z, roll, pitch, yaw, camera, frame, mode, blend, request: gr.Request = None):
            if not oid:
                return ver, _err("no object selected"), gr.update(), gr.update(), gr.update(), gr.update()
            try:
                b = srv.bundle()
                if oid not in b.manifest.objects:
                    raise rv.EditError(f"object '{oid}' is no longer in the bundle; press 'Reload from disk'")
                cur = b.manifest.objects[oid].pose
                cur_xyz, cur_rpy = rv.pose_to_xyz_rpy(cur)
                new = _keep_exact([x, y, z], cur_xyz, 4)
                deg = _keep_exact([roll, pitch, yaw], np.degrees(cur_rpy), 2)
                same_rot = np.allclose(deg, np.degrees(cur_rpy), atol=1e-12)
                if np.allclose(new, cur_xyz, atol=1e-12) and same_rot:
                    msg, nver = f"object {oid}: unchanged", srv.version()
                else:
                    res = rv.set_object_pose(srv.root, oid, new, np.radians(deg),
                                             quaternion_wxyz=cur.quaternion_wxyz if same_rot else None,
                                             expected_version=ver, writer=_writer(request))
                    msg = res.message + (f"; marked stale: {', '.join(res.stale)}" if res.stale else "")
                    nver = res.version
            except (Real2SimError, TypeError, ValueError) as exc:
                img, _ = view(camera, frame, mode, blend)
                return ver, _err(str(exc)), img, img, gr.update(), gr.update()
            img, _ = view(camera, frame, mode, blend)
            return nver, _ok(msg), img, img, f"scene.json version `{nver}`", gr.update()

        pose_inputs = [version, obj_dd, *pose_sliders, *view_inputs]
        pose_outputs = [version, status, obj_img, overlay_img, version_md, pose_text]
        for s in pose_sliders:
            s.input(apply_pose, pose_inputs, pose_outputs, trigger_mode="always_last", show_progress="hidden")
            s.release(apply_pose, pose_inputs, pose_outputs, trigger_mode="always_last", show_progress="hidden")

        def apply_text(ver, oid, text, camera, frame, mode, blend, request: gr.Request = None):
            try:
                vals = [float(v) for v in text.replace(";", ",").split(",")]
                if len(vals) != 6:
                    raise ValueError(f"expected 6 numbers 'x, y, z, roll, pitch, yaw', got {len(vals)}")
            except ValueError as exc:
                return ver, _err(f"cannot read the exact pose '{text}': {exc}"), gr.update(), gr.update(), gr.update(), gr.update(), *[gr.update()] * 6
            out = apply_pose(ver, oid, *vals, camera, frame, mode, blend, request)
            sl = object_values(oid)[:6] if out[1].startswith("**OK:**") else [gr.update()] * 6
            return (*out, *sl)
        apply_btn.click(apply_text, [version, obj_dd, pose_text, *view_inputs], pose_outputs + pose_sliders)

        def rerun(stage, ver, oid, camera, frame, mode, blend, request: gr.Request = None):
            try:
                res = rv.rerun_object_stage(srv.root, stage, oid, expected_version=ver, writer=_writer(request))
                msg, nver, ok = res.message, res.version, True
            except Real2SimError as exc:
                msg, nver, ok = str(exc), ver, False
            img, _ = view(camera, frame, mode, blend)
            sl = object_values(oid)[:6] if ok and oid else [gr.update()] * 6
            return (nver, _ok(msg) if ok else _err(msg), img, img, f"scene.json version `{nver}`", gr.update(), *sl)
        def realign(ver, oid, camera, frame, mode, blend, request: gr.Request = None):
            return rerun("alignment", ver, oid, camera, frame, mode, blend, request)

        def retexture(ver, oid, camera, frame, mode, blend, request: gr.Request = None):
            return rerun("texture", ver, oid, camera, frame, mode, blend, request)
        realign_btn.click(realign, [version, obj_dd, *view_inputs], pose_outputs + pose_sliders)
        retexture_btn.click(retexture, [version, obj_dd, *view_inputs], pose_outputs + pose_sliders)

        # -- camera & robot
        def camera_select(cam, frame, mode, blend):
            img, _ = view(cam, frame, mode, blend)
            return (*camera_values(cam), img)
        cam2_dd.input(camera_select, [cam2_dd, frame_sl, mode_radio, blend_sl], [*cam_sliders, cam_img])

        def apply_camera(ver, cam, x, y, z, roll, pitch, yaw, frame, mode, blend, request: gr.Request = None):
            try:
                b = srv.bundle()
                if cam not in b.manifest.cameras:
                    raise rv.EditError(f"camera '{cam}' is not in the bundle")
                cur_xyz, cur_rpy = rv.camera_xyz_rpy(b.manifest.cameras[cam].T_world_camera)
                new = _keep_exact([x, y, z], cur_xyz, 4)
                deg = _keep_exact([roll, pitch, yaw], np.degrees(cur_rpy), 2)
                if np.allclose(new, cur_xyz, atol=1e-12) and np.allclose(deg, np.degrees(cur_rpy), atol=1e-12):
                    msg, nver = f"camera {cam}: unchanged", srv.version()
                else:
                    res = rv.set_camera_pose(srv.root, cam, new, np.radians(deg), expected_version=ver,
                                             writer=_writer(request))
                    msg, nver = res.message + (f"; marked stale: {', '.join(res.stale)}" if res.stale else ""), res.version
            except (Real2SimError, TypeError, ValueError) as exc:
                img, _ = view(cam, frame, mode, blend)
                return ver, _err(str(exc)), img, gr.update()
            img, _ = view(cam, frame, mode, blend)
            return nver, _ok(msg), img, f"scene.json version `{nver}`"

        cam_inputs = [version, cam2_dd, *cam_sliders, frame_sl, mode_radio, blend_sl]
        for s in cam_sliders:
            s.input(apply_camera, cam_inputs, [version, status, cam_img, version_md], trigger_mode="always_last",
                    show_progress="hidden")
            s.release(apply_camera, cam_inputs, [version, status, cam_img, version_md], trigger_mode="always_last",
                      show_progress="hidden")

        def apply_robot(ver, x, y, z, yaw, request: gr.Request = None):
            try:
                b = srv.bundle()
                r = b.manifest.robot
                rpy = rv.pose_to_xyz_rpy(r.base_pose)[1] if r else [0, 0, 0]
                res = rv.set_robot_base_pose(srv.root, [x, y, z], [rpy[0], rpy[1], np.radians(yaw)], expected_version=ver,
                                             writer=_writer(request))
            except (Real2SimError, TypeError, ValueError) as exc:
                return ver, _err(str(exc)), gr.update()
            return res.version, _ok(res.message), f"scene.json version `{res.version}`"
        robot_btn.click(apply_robot, [version, rx, ry, rz, ryaw], [version, status, version_md])

        # -- masks
        def mask_view(oid, frame, proposal=None, clicks=None):
            b = srv.bundle()
            seg_note = _seg_status()
            real, note = rv.real_image(b, int(frame or 0))
            if real is None:
                return None, f"{note}. Masks need real frames. {seg_note}"
            key = _frame_key(b, int(frame or 0))
            shown = real.astype(np.float32)
            rel = b.manifest.capture.masks.get(key, {}).get(oid) if oid else None
            parts = [f"frame `{key}`, object `{oid}`."]
            if rel and b.path(rel).is_file():
                m = rv.read_rgb(b.path(rel))[..., 0] > 127
                if m.shape == shown.shape[:2]:
                    shown[m] = shown[m] * 0.5 + np.array([0, 120, 255]) * 0.5
                state = b.manifest.capture.mask_state(key, oid)
                parts.append(f"Saved mask: `{rel}` (blue), state `{state}`"
                             + (" (not used for alignment/texture: the object is not at its scene pose or mostly "
                                "hidden here)." if state not in MASK_STATES_AT_POSE else "."))
            else:
                parts.append(f"No saved mask for this object: run `real2sim build {b.root}` (segment stage) or click it.")
            if proposal is not None and proposal.shape == shown.shape[:2]:
                shown[proposal] = shown[proposal] * 0.4 + np.array([255, 60, 0]) * 0.6
                parts.append(f"Proposal: {int(proposal.sum())} px (orange) — Accept or Reject.")
            parts.append(seg_note)
            img = shown.round().astype(np.uint8)
            if clicks:
                img = _draw_clicks(img, clicks)
                if len(clicks.get("corners", [])) == 1:
                    parts.append("Box: click the opposite corner.")
            return img, " ".join(parts)

        def mask_refresh(oid, frame):
            img, note = mask_view(oid, frame)
            return img, note, None, None
        for c in (mask_obj, mask_frame):
            c.change(mask_refresh, [mask_obj, mask_frame], [mask_img, mask_note, mask_state, clicks_state])
        app.load(mask_refresh, [mask_obj, mask_frame], [mask_img, mask_note, mask_state, clicks_state])
        clear_btn.click(mask_refresh, [mask_obj, mask_frame], [mask_img, mask_note, mask_state, clicks_state])

        def mask_click(oid, frame, backend, mode, clicks, evt: gr.SelectData):
            x, y = (int(v) for v in evt.index)
            clicks = _add_click(clicks, mode, (x, y))
            if not clicks["points"] and len(clicks["corners"]) < 2:
                img, note = mask_view(oid, frame, None, clicks)
                return img, note, None, clicks, _ok(f"box corner at ({x}, {y}); click the opposite corner")
            try:
                b = srv.bundle()
                prop = _resegment(b, int(frame or 0), oid, clicks, backend)
            except Exception as exc:  # noqa: BLE001 - any backend failure is shown on the page
                if not isinstance(exc, Real2SimError):
                    log.exception("re-segmentation failed")
                img, note = mask_view(oid, frame, None, clicks)
                return img, note, None, clicks, _err(f"re-segmentation at ({x}, {y}) failed: {exc}")
            img, note = mask_view(oid, frame, prop, clicks)
            return img, note, prop, clicks, _ok(f"re-segmented '{oid}' from {_describe_clicks(clicks)} with backend '{backend}'")
        mask_img.select(mask_click, [mask_obj, mask_frame, backend_dd, click_mode, clicks_state],
                        [mask_img, mask_note, mask_state, clicks_state, status])

        def mask_accept(ver, oid, frame, prop, request: gr.Request = None):
            if prop is None:
                return ver, _err("no mask proposal to accept: click on the object in the image first"), gr.update(), gr.update(), None
            try:
                b = srv.bundle()
                res = rv.set_mask(srv.root, _frame_key(b, int(frame or 0)), oid, prop, expected_version=ver,
                                  writer=_writer(request))
            except Real2SimError as exc:
                return ver, _err(str(exc)), gr.update(), gr.update(), prop
            img, note = mask_view(oid, frame)
            return res.version, _ok(res.message), img, note, None
        accept_btn.click(mask_accept, [version, mask_obj, mask_frame, mask_state], [version, status, mask_img, mask_note, mask_state]
                         ).then(lambda: None, None, clicks_state)

        def mask_reject(ver, oid, frame, prop, request: gr.Request = None):
            if prop is not None:
                img, note = mask_view(oid, frame)
                return ver, _ok("proposal discarded"), img, note, None
            try:
                b = srv.bundle()
                res = rv.remove_mask(srv.root, _frame_key(b, int(frame or 0)), oid, expected_version=ver,
                                     writer=_writer(request))
            except Real2SimError as exc:
                return ver, _err(str(exc)), gr.update(), gr.update(), None
            img, note = mask_view(oid, frame)
            return res.version, _ok(res.message), img, note, None
        reject_btn.click(mask_reject, [version, mask_obj, mask_frame, mask_state], [version, status, mask_img, mask_note, mask_state]
                         ).then(lambda: None, None, clicks_state)

        # -- collision
        def collision_view(oid):
            b = srv.bundle()
            if not oid or oid not in b.manifest.objects:
                return None, "no object selected", {}
            obj = b.manifest.objects[oid]
            if obj.collision.kind in ("pending", "none"):
                return None, f"object `{oid}` has no collision geometry ({obj.collision.kind}): run `real2sim build {b.root}`", {}
            try:
                glb = rv.collision_glb(b, oid)
            except Real2SimError as exc:
                return None, _err(str(exc)), {}
            stats = rv.collision_stats(b, oid)
            n = len(obj.collision.hulls) if obj.collision.kind == "hulls" else 1
            if not stats:
                stats = {"kind": obj.collision.kind, "parts": n, "size": obj.collision.size,
                         "note": f"no reports/collision.json entry: run 'real2sim build {b.root}' for hull quality numbers"}
            note = f"`{oid}`: {obj.collision.kind}, {n} part(s); 3D view written to `{b.rel(glb)}`"
            return str(glb), note, stats
        col_dd.change(collision_view, col_dd, [col_3d, col_note, col_json])
        # Model3D only starts its WebGL canvas when it gets a value while visible: (re)send it on tab select
        collision_tab.select(lambda: None, None, col_3d).then(collision_view, col_dd, [col_3d, col_note, col_json])

        # -- export & evaluate
        def do_export(ver, engines, progress=gr.Progress()):

            if not engines:
                return ver, _err("choose at least one engine"), "", [], gr.update()
            progress(0.1, desc=f"exporting to {', '.join(engines)}")
            try:
                b = srv.bundle()
                if ver and rv.manifest_version(srv.root) != ver:
                    raise rv.ConcurrentEditError("scene.json changed since this page loaded it; press 'Reload from disk' first")
                results = export_bundle(b, engines=tuple(engines), force=True)
            except Real2SimError as exc:
                files = _export_files(srv.root)
                return srv.version(), _err(f"export failed: {exc}. The bundle is unchanged apart from the stage status; "
                                           "previous exports are kept."), _err(str(exc)), files, f"scene.json version `{srv.version()}`"
            progress(0.9, desc="listing files")
            lines = []
            for name, r in results.items():
                if isinstance(r, Exception):
                    lines.append(f"- **{name}**: failed — {r}")
                elif hasattr(r, "main_file"):
                    lines.append(f"- **{name}**: `{Path(r.main_file).relative_to(srv.root)}` ({len(r.files)} files, "
                                 f"{len(r.warnings)} warnings)")
                else:
                    lines.append(f"- **{name}**: {r}")
            srv.reset_preview()
            nver = srv.version()
            failed = [n for n, r in results.items() if isinstance(r, Exception)]
            msg = (_err(f"export failed for {', '.join(failed)} (the other engines exported; see below)") if failed
                   else _ok("export finished"))
            return nver, msg, "\n".join(lines), _export_files(srv.root), f"scene.json version `{nver}`"
        export_btn.click(do_export, [version, engines_cb], [version, status, export_md, export_files, version_md])
        app.load(lambda: _export_files(srv.root), None, export_files)

        def do_eval(policy, episodes, obs_mode, progress=gr.Progress()):
            try:
                from real2sim.evaluation.envs.runner import evaluate
            except ImportError as exc:
                return _err(f"evaluation is not available in this install (issue 6; {exc}). Export works; "
                            "run `real2sim eval DIR` once it is installed")
            try:
                n = int(episodes)
                if not 1 <= n <= 200:
                    raise ValueError(f"episodes must be 1..200, got {n}")
            except (TypeError, ValueError) as exc:
                return _err(str(exc))
            out = srv.root / "results" / "review"
            progress(0, desc=f"evaluating {policy} for {n} episode(s)")

            def tick(done, total, rec):
                try:
                    progress(done / max(total, 1), desc=f"episode {done}/{total}")
                except Exception:  # noqa: BLE001 - progress display only
                    pass

            try:
                s = srv._on_render_thread(lambda: evaluate(srv.root, None, policy, n, obs_mode=obs_mode, out_dir=out,
                                                           progress=tick))
            except Real2SimError as exc:
                return _err(f"evaluation failed: {exc}")
            return (f"**{s.policy}** on task `{s.task}` ({s.backend}): **{s.successes}/{s.trials}** successes "
                    f"({s.rate:.0%}); {s.ran} run, {s.skipped} already done, {s.seconds:.1f} s.  \n"
                    f"Episodes: `{Path(s.results_path).relative_to(srv.root)}`; summary for `real2sim metrics --sim`: "
                    f"`{Path(s.csv_path).relative_to(srv.root)}`")
        eval_btn.click(do_eval, [policy_tb, episodes_nb, obs_dd], eval_md)
    return app


def _writer(request) -> str | None:
    """One token per browser tab (Gradio session), so a tab's own quick successive edits are not 'concurrent'."""
    return getattr(request, "session_hash", None) or None


def _keep_exact(shown, exact, decimals: int) -> np.ndarray:
    """Slider values back to numbers: a component still equal to the rounded current value keeps its exact value.

    The page shows positions to 0.1 mm and angles to 0.01 deg; without this, moving one slider would
    also snap the other five components to their rounded values.
    """
    shown = np.asarray(shown, dtype=float)
    exact = np.asarray(exact, dtype=float)
    same = np.isclose(shown, np.round(exact, decimals), atol=0.5 * 10.0 ** -decimals * 1e-3)
    return np.where(same, exact, shown)


def _frame_key(bundle: Bundle, frame: int) -> str:
    """Key of ``capture.masks`` for frame index ``frame`` (``"000000"``, as segmentation.segment_stage writes)."""
    frames = bundle.manifest.capture.frames
    return f"{int(np.clip(frame, 0, max(len(frames) - 1, 0))):06d}"


def _seg_module():
    try:
        from real2sim import segmentation
    except ImportError:
        return None
    return segmentation if hasattr(segmentation, "segment") else None


def _seg_backends() -> list[str]:
    seg = _seg_module()
    names = list(getattr(seg, "BACKENDS", [])) if seg else []
    return ["auto"] + [n for n in names if n != "auto"]


def _seg_status() -> str:
    if _seg_module() is None:
        return ("Re-segmentation is unavailable: the segmentation package (`real2sim.segmentation.segment`) is not in this "
                "build yet.")
    return "Click on the object to re-segment it."


def _add_click(clicks: dict | None, mode: str, xy) -> dict:
    """Accumulate the clicks of one prompt: positive/negative points and up to two box corners."""
    c = {"points": [], "labels": [], "corners": []} if not clicks else {k: list(v) for k, v in clicks.items()}
    if mode == "box corner":
        c["corners"] = (c["corners"] if len(c["corners"]) < 2 else [])[-1:] + [list(xy)]
    else:
        c["points"].append(list(xy))
        c["labels"].append(0 if mode == "background point" else 1)
    return c


def _box(clicks: dict):
    if len(clicks.get("corners", [])) == 2:
        (x0, y0), (x1, y1) = clicks["corners"]
        return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
    return None


def _describe_clicks(clicks: dict) -> str:
    parts = []
    pos, neg = sum(clicks["labels"]), len(clicks["labels"]) - sum(clicks["labels"])
    if pos or neg:
        parts.append(f"{pos} object / {neg} background click(s)")
    if _box(clicks):
        parts.append(f"box {_box(clicks)}")
    return " + ".join(parts)


def _draw_clicks(img: np.ndarray, clicks: dict) -> np.ndarray:
    from PIL import Image, ImageDraw

    pil = Image.fromarray(img)
    d = ImageDraw.Draw(pil)
    for (x, y), lab in zip(clicks.get("points", []), clicks.get("labels", [])):
        d.ellipse([x - 4, y - 4, x + 4, y + 4], outline=(0, 0, 0), fill=(40, 220, 40) if lab else (230, 30, 30))
    box = _box(clicks)
    if box:
        d.rectangle(box, outline=(255, 230, 0), width=2)
    for x, y in clicks.get("corners", [])[:1] if not box else []:
        d.rectangle([x - 3, y - 3, x + 3, y + 3], outline=(255, 230, 0), width=2)
    return np.asarray(pil)


def _resegment(bundle: Bundle, frame: int, oid: str, clicks: dict, backend: str) -> np.ndarray:
    seg = _seg_module()
    if seg is None:
        raise rv.EditError(_seg_status())
    real, note = rv.real_image(bundle, frame)
    if real is None:
        raise rv.EditError(note)
    plate = None
    if bundle.manifest.capture.plate and bundle.path(bundle.manifest.capture.plate).is_file():
        plate = rv.read_rgb(bundle.path(bundle.manifest.capture.plate))
    prompt = seg.Prompt(points=[tuple(p) for p in clicks["points"]], labels=list(clicks["labels"]), box=_box(clicks))
    out = seg.segment(real, prompt, plate=plate, backend=backend or "auto")
    mask = np.asarray(getattr(out, "mask", out)).astype(bool)
    if mask.shape != real.shape[:2] or not mask.any():
        raise rv.EditError(f"the '{backend}' backend returned an empty mask for {_describe_clicks(clicks)}; click inside "
                           "the object, draw a box, or try another backend")
    return mask


def _export_files(root: Path) -> list[list]:
    d = Path(root) / "exports"
    if not d.is_dir():
        return []
    return [[p.relative_to(root).as_posix(), p.stat().st_size] for p in sorted(d.rglob("*")) if p.is_file()][:500]


def launch(bundle_dir, host: str = "127.0.0.1", port: int | None = None, auth: tuple[str, str] | str | None = None,
           block: bool = True, quiet: bool = False):
    """Serve the review page. ``auth``: ``(user, password)`` or ``"user:pass"``. Returns ``(app, url)`` when not blocking."""
    root = Path(bundle_dir).resolve()
    app = build_app(root)
    if isinstance(auth, str):
        if ":" not in auth:
            raise ValueError("--auth must look like USER:PASSWORD")
        auth = tuple(auth.split(":", 1))
    app.queue(default_concurrency_limit=4)
    _, url, _ = app.launch(server_name=host, server_port=port, auth=auth, allowed_paths=[str(root)],
                           blocked_paths=[str(root / rv.HISTORY_DIR)], prevent_thread_lock=True, quiet=quiet,
                           show_error=True, footer_links=[], ssr_mode=False)
    log.info("review page for %s at %s", root, url)
    if block:
        try:
            app.block_thread()
        finally:
            app.review_server.close()
    return app, url
