"""The Bridge journey on the real stack-cube frame (../shared/data; skips with a reason when it is absent).

One run of :func:`real2sim.demos.bridge.build_bridge_scene` (about 20-30 s on 2 cores): init -> one-click cube
masks -> robot joints from its silhouette -> plate -> table height, alignment, texture -> robot appearance ->
collision -> export (MJCF, USD, SAPIEN) -> visual gap -> graded scripted policies in MuJoCo and SAPIEN ->
MMRV between the engines.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def bridge(tmp_path_factory, shared_data):
    """Built once for every test here."""
    from real2sim.demos.bridge import build_bridge_scene

    out = tmp_path_factory.mktemp("bridge")
    return build_bridge_scene(shared_data, out, episodes=2)


def test_bridge_data_fixture(shared_data):
    """The shared_data fixture finds the Bridge files the journey reads."""
    for rel in ("bridge/stack_cube_first_frame.png", "bridge/stack_cube_plate.png",
                "objects/green_cube_3cm/textured.dae", "objects/yellow_cube_3cm/textured.dae"):
        assert (shared_data / rel).is_file(), rel


def test_cubes_masks_and_alignment(bridge):
    _, rep = bridge
    for oid in ("green_cube", "yellow_cube"):
        al = rep["alignment"][oid]
        assert al["status"] == "aligned" and al["mean_iou"] >= 0.85, (oid, al)
        # one click + GrabCut vs a plate-difference x hue reference (which includes the green cube's shadow)
        assert rep["segmentation"][oid]["iou_vs_reference"] >= 0.75, rep["segmentation"]
        px = rep["alignment_px"]["cubes"][oid]
        assert px["iou_render_vs_mask"] >= 0.85 and px["mask_centroid_vs_projected_centre_px"] < 3.0, px
        assert rep["texture"][oid]["psnr_db"] > 25, rep["texture"][oid]


def test_aligned_cubes_cover_the_cubes_found_with_the_person_made_plate(bridge, shared_data):
    """Independent of the pipeline's own masks and IoU: each exported cube pose, its mesh's corners projected here
    through the bundle's camera, against the cube's pixels found by differencing the frame with the person-made
    plate (tests/reference.py). Measured: green 0.82 (a few pixels off: the journey aligns to its own one-click mask,
not to this one), yellow 0.95; the same cubes 1 cm off score 0.61-0.72, 2 cm off 0.36-0.52."""
    from reference import bridge_cube_ious

    ious = bridge_cube_ious(bridge[0], shared_data)
    assert min(ious.values()) >= 0.78, ious


def test_robot_joints_fitted_to_the_frame(bridge):
    _, rep = bridge
    fit = rep["robot_fit"]
    assert fit["iou_fitted"] > fit["iou_default"] + 0.2 and fit["iou_fitted"] >= 0.7, fit
    assert rep["alignment_px"]["robot"]["silhouette_vs_mask"]["mean_px"] < 6, rep["alignment_px"]["robot"]


def test_fitted_robot_lies_on_the_gripper_found_without_the_model(bridge, shared_data):
    """Graded by a reference the fit never saw: the gripper's dark pixels in the frame (tests/reference.py), against
    the robot rendered at the fitted joints and at the default joints, with the test's own IoU. Only the gripper is
    in view; the reference holds its cables, the model does not."""
    from reference import bridge_gripper_iou

    from real2sim.robots import get_robot

    bundle, _ = bridge
    m = bundle.manifest
    fitted = bridge_gripper_iou(bundle, shared_data, m.capture.frames[0].joint_positions)
    default = bridge_gripper_iou(bundle, shared_data, get_robot(m.robot.name).default_qpos)
    print(f"robot silhouette vs the gripper's pixels: fitted {fitted:.3f}, default joints {default:.3f}")
    assert fitted >= 0.7 and fitted > default + 0.2, (fitted, default)


def test_exports_load_and_evaluation_ran_in_both_engines(bridge):
    from real2sim.engines import get_exporter

    bundle, rep = bridge
    for engine in ("mjcf", "usd", "sapien"):
        assert not str(rep["exports"][engine]).startswith("failed"), rep["exports"]
    for engine in ("mjcf", "sapien"):
        exp = get_exporter(engine)
        with exp.load(exp.out_dir(bundle)) as scene:
            assert {"green_cube", "yellow_cube"} <= set(scene.object_ids())
            np.testing.assert_allclose(scene.object_pose("green_cube")[:3, 3],
                                       bundle.object("green_cube").pose.position, atol=1e-4)
    for engine in ("mujoco", "sapien"):
        rates = rep["success"][engine]["lift_green_cube"]
        assert set(rates) == {"scripted", "scripted:noise=0.03", "random"}
        assert all(r["trials"] == 2 for r in rates.values())
        # lifting one cube: the oracle lifts it every time, random actions never (docs/journey.md: 6/6 and 0/6)
        assert rates["scripted"]["rate"] == 1.0 and rates["random"]["rate"] == 0.0, rates
        assert (bundle.root / "results" / engine / "sim.csv").is_file()
    from test_metrics import simpler_reference_mmrv

    for task, m in rep["metrics"].items():  # the reported MMRV is SIMPLER's loop over the reported rates
        pols = sorted(rep["success"]["mujoco"][task])
        rates = [[rep["success"][e][task][p]["rate"] for p in pols] for e in ("mujoco", "sapien")]
        assert m["mmrv"] == pytest.approx(simpler_reference_mmrv(*rates), abs=1e-3), (task, m, rates)


def test_visual_gap_improves_and_reports_exist(bridge):
    bundle, rep = bridge
    for plate in ("bundle_plate", "person_made_plate"):
        g = rep["visual_gap"][plate]
        assert g["plus_objects"]["cubes"]["psnr_db"] > g["plate_only"]["cubes"]["psnr_db"] + 3, g
        assert g["plus_objects"]["cubes"]["ssim"] > g["plate_only"]["cubes"]["ssim"], g
        assert g["plus_robot"]["union"]["psnr_db"] > g["plus_objects"]["union"]["psnr_db"], g
    saved = json.loads((bundle.reports_dir() / "bridge.json").read_text())
    assert saved["visual_gap"]["bundle_plate"]["plate_only"] == rep["visual_gap"]["bundle_plate"]["plate_only"]
    from PIL import Image

    with Image.open(bundle.reports_dir() / "bridge_gap.png") as im:  # four 320x240 tiles, a title and a legend band
        assert im.size == (4 * 320, 30 + 240 + 24)
        legend = np.asarray(im.convert("L"))[-24:]
    assert (legend > 150).mean() > 0.01  # the legend (each composite's PSNR) is written on it


def test_ssim_and_psnr_helpers():
    from real2sim.demos.bridge import psnr, ssim

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:60, 0:80]
    a = np.repeat(((xx + yy) * 1.5).astype(np.uint8)[..., None], 3, -1)  # smooth ramp
    assert ssim(a, a) == pytest.approx(1.0) and psnr(a, a) == float("inf")
    b = np.clip(a.astype(int) + rng.normal(0, 20, a.shape[:2])[..., None], 0, 255).astype(np.uint8)
    assert 0 < ssim(a, b) < 0.5 and 20 < psnr(a, b) < 25  # structure lost to noise; PSNR of sigma 20 ~ 22 dB
    mask = np.zeros(a.shape[:2], bool)
    mask[:, :40] = True
    c = a.copy()
    c[:, 40:] = 255 - c[:, 40:]
    assert ssim(a, c, mask[:, :]) > ssim(a, c) and psnr(a, c, mask) == float("inf")


def test_relative_data_path_resolves_against_the_working_directory(tmp_path, monkeypatch, shared_data):
    """``python -m real2sim.demos.bridge ../shared/data out/`` as docs/journey.md writes it: the cube meshes are
    found (they used to be looked up relative to the recipe folder, OUT/inputs)."""
    from real2sim.demos.bridge import _recipe
    from real2sim.pipeline.recipe import bundle_from_recipe

    monkeypatch.chdir(shared_data.parent)
    (tmp_path / "inputs").mkdir()
    recipe = _recipe(tmp_path / "inputs", Path(shared_data.name))  # e.g. 'data', relative to the working directory
    bundle = bundle_from_recipe(recipe, tmp_path / "scene")
    assert {"green_cube", "yellow_cube"} <= set(bundle.manifest.objects)
    assert bundle.path(bundle.object("green_cube").visual.mesh).is_file()


def test_robot_textures_on_the_real_frame(bridge, tmp_path):
    """The robot's link textures back-projected from the frame beat its flat colours in the robot region of the
    composite (plate + robot, over the real robot mask united with the rendered silhouette): in the stage's own
    raster and in MuJoCo's unlit render of the export. One frame, one pose: in-sample (the clip's held-out numbers are
    in docs/texture.md). Measured: 18.1 -> 19.7 dB (raster), 18.2 -> 19.8 dB (MuJoCo)."""
    from real2sim.demos.robot_texture import engine_robot_psnr

    bundle, rep = bridge
    app = rep["robot_appearance"]
    assert app["textures_kept"] and app["scored_on"] == "in_sample", app
    assert app["psnr_db_composite_textured"] > app["psnr_db_composite_flat"] + 1.0, app
    assert bundle.manifest.robot.textures  # written, and read by the exports (tests/test_robot_texture.py)
    res = engine_robot_psnr(bundle.root, tmp_path / "eng", ["mujoco"])
    row = res["engines"]["mjcf"]
    print(f"MuJoCo unlit composite, robot region: {row['flat_db']:.2f} dB flat -> {row['textured_db']:.2f} dB textured")
    assert row["gain_db"] > 1.0, row
