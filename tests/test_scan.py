"""Object scanning (issue 18): synthetic captures on a ChArUco board, the visual hull and TSDF reconstructions graded
against the true meshes, texture on held-out views, bad captures, and a scanned object in a scene."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("open3d")
pytest.importorskip("skimage")
pytest.importorskip("cv2")

from real2sim.scan.o3d import open3d  # noqa: E402

open3d()  # before anything imports coacd in this process (DESIGN.md)


def _capture(root, **kw):
    from real2sim.scan.synthetic import SyntheticScanConfig, write_synthetic_scan

    cfg = SyntheticScanConfig(**kw)
    summary = write_synthetic_scan(root, cfg)
    return root, summary


def _scan(capture, out, depth=None, **kw):
    from real2sim.pipeline.scan import ScanConfig, scan_object

    kw.setdefault("collision", False)
    kw.setdefault("texture_size", 256)
    return scan_object(capture, out, ScanConfig(**kw), depth)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 12-view 320x240 can capture with depth (fast; for the checks that do not grade accuracy)."""
    return _capture(tmp_path_factory.mktemp("scan") / "can", shape="can", views=12, width=320, height=240, heldout=0,
                    depth=True, supersample=1)


def _small_scan(capture, out, **kw):
    kw.setdefault("resolution", 48)
    kw.setdefault("face_budget", 4000)
    return _scan(capture, out, **kw)


# -- (1) synthetic captures ----------------------------------------------------------------------------------

def test_synthetic_capture_has_board_poses_exposure_changes_mask_errors_and_metric_depth(small):
    import cv2

    from real2sim.capture.camera_file import camera_from_dict
    from real2sim.core.imaging import read_mask, read_rgb
    from real2sim.pipeline.scan import board_poses, read_board

    root, summary = small
    truth = json.loads((root / "truth" / "poses.json").read_text())["frames"]
    cam = camera_from_dict({**json.loads((root / "camera.json").read_text()), "T_world_camera": np.eye(4).tolist()})
    names = sorted(truth)
    images = [read_rgb(root / "frames" / f"{n}.png") for n in names]
    poses, skipped = board_poses(names, images, cam, read_board(root, None), 6)
    assert not skipped and len(poses) == 12  # the capture code finds the rendered board in every frame
    for n in names:  # and the poses are the true ones: the board gives metric scale and the table plane
        T, T_true = poses[n][0], np.asarray(truth[n])
        # (320x240 frames: a pixel is ~1.2 mm on the board; 640x480 halves these)
        assert np.linalg.norm(T[:3, 3] - T_true[:3, 3]) < 0.015 * np.linalg.norm(T_true[:3, 3]), n
        ang = np.degrees(np.arccos(np.clip((np.trace(T[:3, :3].T @ T_true[:3, :3]) - 1) / 2, -1, 1)))
        assert ang < 1.0, (n, ang)
    assert max(summary["gains"]) - min(summary["gains"]) > 0.1  # exposure changes between frames
    assert len(summary["mask_bites"]) == 1  # one mask lost a chunk of the object
    areas = [read_mask(root / "masks" / f"{n}.png").sum() for n in names]
    assert min(areas) > 0 and np.std(areas) > 0
    d = cv2.imread(str(root / "depth" / "000.png"), cv2.IMREAD_UNCHANGED)
    assert d.dtype == np.uint16 and 250 < np.median(d[d > 0]) < 700  # millimetres of a camera ~0.36 m away


# -- (2)+(3) reconstruction accuracy: 24 views, 640x480, board poses -----------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("shape", ["can", "box", "banana"])
def test_rgb_scan_meets_chamfer_iou_and_texture_psnr(shape, tmp_path):
    """Acceptance: Chamfer <= 2 mm, volume IoU >= 0.9 from 24 RGB views with a board; texture PSNR >= 25 dB on
    held-out views (poses from the board there too)."""
    from real2sim.pipeline.scan import heldout_psnr

    root, _ = _capture(tmp_path / "cap", shape=shape)
    res = _scan(root, tmp_path / "obj", reference=str(root / "truth" / "reference.obj"))
    g = res.report["grade"]
    assert g["chamfer_mm"] <= 2.0 and g["volume_iou"] >= 0.9, g
    assert res.report["watertight"] and res.report["mass_kg"] > 0
    assert len(res.report["frames_used"]) == 24
    # (the banana's ends curve down under themselves: no view sees there, and the report says so)
    assert not [w for w in res.warnings if "skipped" in w or "one side" in w or "lost" in w], res.warnings
    held = heldout_psnr(tmp_path / "obj", root / "truth" / "heldout" / "frames", root / "truth" / "heldout" / "masks",
                        root / "camera.json")
    assert held["psnr_db"] >= 25.0, held
    from real2sim.core.imaging import read_rgb

    turntable = read_rgb(tmp_path / "obj" / "turntable.png")  # the textured object on white, from 8 sides
    assert (turntable < 200).any(-1).mean() > 0.05 and turntable.std() > 20


@pytest.mark.slow
def test_visual_hull_cannot_see_into_the_mug_and_says_so_by_the_numbers(tmp_path):
    """The visual hull's known limit: no silhouette shows the inside of a cup, so the scan is the mug filled to the
    rim. Against the filled mug the hull meets the acceptance numbers; against the real (open) mug it fails both
    (measured IoU 0.23, Chamfer 2.3 mm: the inside's walls are only 4 mm from the outside; docs/scan.md)."""
    import trimesh

    from real2sim.scan.metrics import chamfer, volume_iou

    root, _ = _capture(tmp_path / "cap", shape="mug", heldout=0)
    res = _scan(root, tmp_path / "obj", reference=str(root / "truth" / "reference_filled.obj"))
    g = res.report["grade"]
    assert g["chamfer_mm"] <= 2.0 and g["volume_iou"] >= 0.9, g
    m = trimesh.load(tmp_path / "obj" / "visual.obj", force="mesh")
    v = np.asarray(m.vertices) + np.asarray(res.report["T_world_object"])[:3, 3]
    mug = trimesh.load(root / "truth" / "reference.obj", force="mesh")
    iou_open = volume_iou(v, m.faces, mug.vertices, mug.faces)
    ch_open = chamfer(v, m.faces, mug.vertices, mug.faces)["mean_m"] * 1e3
    assert iou_open < 0.5 and ch_open > 2.0, (iou_open, ch_open)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["can", "mug"])
def test_depth_scan_meets_chamfer_and_sees_into_the_mug(shape, tmp_path):
    """Acceptance with depth: Chamfer <= 1.5 mm against the real object, the mug's inside included."""
    root, _ = _capture(tmp_path / "cap", shape=shape, depth=True, heldout=0)
    res = _scan(root, tmp_path / "obj", depth=root / "depth", reference=str(root / "truth" / "reference.obj"))
    g = res.report["grade"]
    assert res.report["method"] == "tsdf" and g["chamfer_mm"] <= 1.5, g
    assert res.report["watertight"]


# -- (2) masks from one click ---------------------------------------------------------------------------------

def _deepest(mask):
    import cv2

    d = cv2.distanceTransform(mask.astype(np.uint8), cv2.DIST_L2, 5)
    y, x = np.unravel_index(np.argmax(d), d.shape)
    return float(x), float(y)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["can", "box"])
def test_one_click_scan_meets_the_geometry_bars(shape, tmp_path):
    """Item 2: no masks/, one click in one photo (``real2sim scan DIR --point X,Y --frame 000``): the click's mask is
    lifted to 3-D through the board's pose, tracked into every photo, corrected by a rough hull, and the scan meets
    Chamfer <= 2 mm and volume IoU >= 0.9; every photo's mask matches the true one (measured on 640x480: mean IoU
    ~0.97, docs/scan.md) and the report gives each photo's mask confidence."""
    from real2sim.apps.cli import main
    from real2sim.core.imaging import iou, read_mask

    root, _ = _capture(tmp_path / "cap", shape=shape, heldout=0, supersample=1)
    shutil.rmtree(root / "masks")
    names = sorted(p.stem for p in (root / "frames").glob("*.png"))
    x, y = _deepest(read_mask(root / "truth" / "masks" / "000.png"))
    assert main(["scan", str(root), "--out", str(tmp_path / "obj"), "--point", f"{x:.0f},{y:.0f}", "--frame", "000",
                 "--reference", str(root / "truth" / "reference.obj"), "--no-collision", "--texture-size", "256"]) == 0
    r = json.loads((tmp_path / "obj" / "report.json").read_text())
    g = r["grade"]
    assert g["chamfer_mm"] <= 2.0 and g["volume_iou"] >= 0.9, g
    assert r["mask_source"] == "one-click" and r["one_click"]["frame"] == "000"
    ious = [iou(read_mask(tmp_path / "obj" / "masks" / f"{n}.png"), read_mask(root / "truth" / "masks" / f"{n}.png"))
            for n in names]
    assert np.mean(ious) >= 0.95 and min(ious) >= 0.85, ious
    conf = r["mask_confidence"]
    assert set(conf) == set(names) and r["mask_confidence_mean"] >= 0.9, conf
    # the confidence (agreement with the other views) tracks the true IoU: the worst masks score lowest
    assert np.corrcoef([conf[n] for n in names], ious)[0, 1] > 0.5
    assert len(r["frames_used"]) == 24 - len(r["frames_low_confidence"]) >= 20


def test_a_mask_that_disagrees_with_the_other_views_gets_a_low_confidence(small, tmp_path):
    from real2sim.core.imaging import dilate, read_mask, write_mask

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    leak = dilate(read_mask(root / "masks" / "005.png"), 12)  # a segmenter that leaked into the board all around
    write_mask(root / "masks" / "005.png", leak)
    res = _small_scan(root, tmp_path / "obj")
    conf = res.report["mask_confidence"]
    bitten = {f"{i:03d}" for i in small[1]["mask_bites"]}  # the capture's own bad mask: a chunk of the object missing
    assert bitten and "005" not in bitten
    good = [v for n, v in conf.items() if n != "005" and n not in bitten]
    assert conf["005"] < 0.85 and all(conf[n] < 0.85 for n in bitten) and min(good) > 0.9, conf
    assert any("frame 005" in w and "disagrees with the other views" in w for w in res.warnings)


def test_a_prompt_on_a_missing_frame_says_which_frames_exist(small, tmp_path):
    from real2sim.core.errors import CaptureError
    from real2sim.pipeline.scan import ScanConfig, scan_object
    from real2sim.pipeline.scan_masks import ClickPrompt

    with pytest.raises(CaptureError, match="--frame 99: no such frame.*index 0..11"):
        scan_object(small[0], tmp_path / "obj", ScanConfig(resolution=48, collision=False),
                    prompt=ClickPrompt((160.0, 120.0), frame="99"))


# -- bad captures --------------------------------------------------------------------------------------------

def test_frames_without_the_board_are_skipped_and_counted(small, tmp_path):
    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    from real2sim.core.imaging import read_rgb, write_rgb

    for n in ("003", "007"):  # the board out of view: a frame of the table only
        img = read_rgb(root / "frames" / f"{n}.png")
        write_rgb(root / "frames" / f"{n}.png", np.full_like(img, 110))
    res = _small_scan(root, tmp_path / "obj", min_views=8)
    assert sorted(res.report["frames_skipped"]) == ["003", "007"]
    assert len(res.report["frames_used"]) == 10 and res.report["frames_total"] == 12
    assert any("2 of 12 frames skipped" in w for w in res.warnings)


def test_too_few_views_is_an_error_naming_the_count(small, tmp_path):
    from real2sim.scan.carve import ScanError

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    for p in sorted((root / "frames").glob("*.png"))[5:]:
        p.unlink()
    with pytest.raises(ScanError, match="only 5 of 5 frames"):
        _small_scan(root, tmp_path / "obj")
    assert not (tmp_path / "obj").exists()


def test_one_sided_capture_warns_how_much_was_seen(tmp_path):
    root, _ = _capture(tmp_path / "cap", shape="box", views=10, width=320, height=240, heldout=0, supersample=1,
                       azimuth_range_deg=100.0)
    res = _small_scan(root, tmp_path / "obj", min_views=6)
    w = [x for x in res.warnings if "one side" in x]
    assert w and f"{res.report['seen_fraction']:.0%}" in w[0]
    assert res.report["azimuth_gap_deg"] > 200 and res.report["seen_fraction"] < 0.9


def test_a_mask_that_loses_the_object_drops_its_frame(small, tmp_path):
    from real2sim.core.imaging import write_mask

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    write_mask(root / "masks" / "004.png", np.zeros((240, 320), bool))
    res = _small_scan(root, tmp_path / "obj")
    assert "004" not in res.report["frames_used"]
    assert any("004" in w and "lost the object" in w for w in res.warnings)


def test_depth_in_the_wrong_unit_is_detected_from_the_table(small, tmp_path):
    import cv2

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    for p in (root / "depth").glob("*.png"):  # written in 0.1 mm units but read as mm
        d = cv2.imread(str(p), cv2.IMREAD_UNCHANGED).astype(np.float64) * 10
        cv2.imwrite(str(p), np.clip(d, 0, 65535).astype(np.uint16))
    res = _small_scan(root, tmp_path / "obj", depth=root / "depth", reference=str(root / "truth" / "reference.obj"))
    assert res.report["depth_units_per_m"] == pytest.approx(10000.0)
    assert any("10000 units per metre" in w for w in res.warnings)
    assert res.report["grade"]["chamfer_mm"] < 3.0  # and the object came out at its size


def test_without_a_board_the_scan_says_what_it_needs(small, tmp_path):
    from real2sim.core.errors import CaptureError

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    (root / "board.json").unlink()
    with pytest.raises(CaptureError, match="pycolmap"):
        _small_scan(root, tmp_path / "obj")


def test_a_video_capture_is_sampled_into_frames(small, tmp_path):
    """DIR_OR_VIDEO: a video next to camera.json / board.json / masks (named by frame index) is scanned too."""
    import cv2

    from real2sim.core.imaging import read_rgb

    root = tmp_path / "cap"
    root.mkdir()
    for name in ("camera.json", "board.json"):
        shutil.copy(small[0] / name, root / name)
    frames = sorted((small[0] / "frames").glob("*.png"))
    writer = cv2.VideoWriter(str(root / "turn.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 5, (320, 240))
    (root / "masks").mkdir()
    for i, p in enumerate(frames):
        writer.write(cv2.cvtColor(read_rgb(p), cv2.COLOR_RGB2BGR))
        shutil.copy(small[0] / "masks" / p.name, root / "masks" / f"{i:04d}.png")
    writer.release()
    res = _small_scan(root / "turn.avi", tmp_path / "obj", reference=str(small[0] / "truth" / "reference.obj"))
    assert res.report["frames_total"] == 12 and len(res.report["frames_used"]) >= 10
    assert res.report["grade"]["volume_iou"] > 0.8, res.report["grade"]


def test_without_masks_the_scan_says_how_to_make_them(small, tmp_path):
    from real2sim.core.errors import CaptureError

    root = tmp_path / "cap"
    shutil.copytree(small[0], root)
    shutil.rmtree(root / "masks")
    with pytest.raises(CaptureError, match=r"--point X,Y.*one PNG per frame"):
        _small_scan(root, tmp_path / "obj")


# -- (4) into a scene ----------------------------------------------------------------------------------------

def test_scanned_object_goes_into_a_scene_that_exports_and_simulates(small, tmp_path):
    """scan -> add-object --scan (mesh, texture, mass and the scan's CoACD hulls) -> MJCF export -> the object
    rests on the table in MuJoCo: it neither falls through nor flies off."""
    mujoco = pytest.importorskip("mujoco")
    pytest.importorskip("coacd")
    from conftest import give_simple_collision

    from real2sim.apps.cli import main
    from real2sim.collision.inertia import compute_inertials
    from real2sim.core.bundle import Bundle
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    obj = tmp_path / "scanned_can"
    _small_scan(small[0], obj, collision=True)
    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene"))
    assert main(["add-object", str(b.root), "scanned", "--scan", str(obj), "--position", "0.16,-0.01,0.0"]) == 0
    b = Bundle.load(b.root)
    o = b.object("scanned")
    assert o.source.startswith("scan:") and o.visual.texture and o.mass and 0.1 < o.mass < 1.0
    assert o.collision.kind == "hulls" and o.collision.hulls and all(b.path(h).is_file() for h in o.collision.hulls)
    assert (b.object_dir("scanned") / "scan" / "turntable.png").is_file()
    compute_inertials(b)
    b.save()
    export_bundle(Bundle.load(b.root), engines=("mjcf",))
    xml = next((b.root / "exports" / "mjcf").glob("*.xml"))
    model = mujoco.MjModel.from_xml_path(str(xml))
    data = mujoco.MjData(model)
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "scanned")
    assert bid >= 0
    mujoco.mj_forward(model, data)
    z0 = float(data.xpos[bid][2])
    for _ in range(1000):
        mujoco.mj_step(model, data)
    assert abs(float(data.xpos[bid][2]) - z0) < 0.005 and np.linalg.norm(data.xpos[bid][:2] - [0.16, -0.01]) < 0.01
