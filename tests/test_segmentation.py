"""Segmentation: backends, real Bridge cubes from one click, tiny SAM through the real predictor, propagation,
bundle stage, CLI."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.segmentation import (
    BACKENDS,
    Prompt,
    SegmentationError,
    propagate,
    segment,
)


def synthetic_scene(seed=0, shift=0):
    rng = np.random.default_rng(seed)
    import cv2

    base = cv2.resize(rng.uniform(120, 170, (12, 16, 3)).astype(np.float32), (160, 120), interpolation=cv2.INTER_CUBIC)
    plate = np.clip(base + rng.normal(0, 3, base.shape), 0, 255).astype(np.uint8)
    img = plate.copy()
    gt = np.zeros((120, 160), bool)
    gt[40:70, 50 + shift:85 + shift] = True
    img[gt] = (40, 160, 60)
    return img, plate, gt


def test_backends_on_synthetic_object():
    img, plate, gt = synthetic_scene()
    assert iou(segment(img, Prompt([(65, 55)]), plate=plate), gt) > 0.95  # auto -> difference
    assert iou(segment(img, Prompt([(65, 55)]), backend="grabcut"), gt) > 0.9
    assert iou(segment(img, Prompt(box=(45, 35, 90, 75)), backend="grabcut"), gt) > 0.9
    assert iou(segment(img, Prompt(box=(45, 35, 90, 75)), plate=plate, backend="difference"), gt) > 0.95
    with pytest.raises(SegmentationError, match="needs a background plate"):
        segment(img, Prompt([(65, 55)]), backend="difference")
    with pytest.raises(SegmentationError, match="outside"):
        segment(img, Prompt([(500, 55)]))
    with pytest.raises(KeyError, match="did you mean 'grabcut'"):
        segment(img, Prompt([(65, 55)]), backend="grabcat")


def test_grabcut_is_deterministic():
    img, _, _ = synthetic_scene(1)
    a = segment(img, Prompt([(60, 50)]), backend="grabcut")
    b = segment(img, Prompt([(60, 50)]), backend="grabcut")
    assert (a == b).all()


def _cube_refs(shared_data):
    """Reference cube masks: Lab distance (lightness x0.5) to the person-made plate > 30 in a 120 px window around
    the cube, opened, closed, the component at the cube, holes filled. Checked by eye."""
    import cv2

    from real2sim.core.imaging import component_at, fill_holes
    from real2sim.segmentation.colour import lab_image

    img = cv2.cvtColor(cv2.imread(str(shared_data / "bridge" / "stack_cube_first_frame.png")), cv2.COLOR_BGR2RGB)
    plate = cv2.cvtColor(cv2.imread(str(shared_data / "bridge" / "stack_cube_plate.png")), cv2.COLOR_BGR2RGB)
    d = np.linalg.norm(lab_image(img) - lab_image(plate), axis=-1)
    refs = {}
    for name, (x, y) in {"green": (170, 245), "yellow": (465, 195)}.items():
        win = np.zeros(d.shape, bool)
        win[y - 60:y + 60, x - 60:x + 60] = True
        m = ((d > 30) & win).astype(np.uint8)
        m = cv2.morphologyEx(m, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
        refs[name] = fill_holes(component_at(m, [(x, y)], 0))
    return img, plate, refs


@pytest.mark.realdata
def test_bridge_cubes_from_one_click_without_plate(shared_data, record_property):
    import time

    img, _, refs = _cube_refs(shared_data)
    assert 2000 < refs["green"].sum() < 3200 and 2000 < refs["yellow"].sum() < 3000
    clicks = {"green": (170, 245), "yellow": (465, 195)}  # one click near each cube's middle
    for name, (x, y) in clicks.items():
        assert refs[name][y, x]
        t0 = time.perf_counter()
        m = segment(img, Prompt([(x, y)]))  # no plate: auto -> grabcut
        dt = time.perf_counter() - t0
        score = iou(m, refs[name])
        record_property(f"cube_iou_{name}", round(score, 4))
        record_property(f"cube_seconds_{name}", round(dt, 3))
        print(f"{name} cube: IoU {score:.3f} in {dt:.3f} s")
        assert score >= 0.85


def tiny_sam():
    import torch
    from segment_anything.modeling import (
        ImageEncoderViT,
        MaskDecoder,
        PromptEncoder,
        Sam,
        TwoWayTransformer,
    )

    torch.manual_seed(0)
    size, dim = 64, 32
    enc = ImageEncoderViT(img_size=size, patch_size=16, embed_dim=dim, depth=1, num_heads=2, mlp_ratio=2.0,
                          out_chans=dim, use_rel_pos=False, window_size=0, global_attn_indexes=())
    pe = PromptEncoder(embed_dim=dim, image_embedding_size=(size // 16, size // 16), input_image_size=(size, size),
                       mask_in_chans=8)
    dec = MaskDecoder(num_multimask_outputs=3, transformer=TwoWayTransformer(depth=1, embedding_dim=dim, mlp_dim=32, num_heads=2),
                      transformer_dim=dim, iou_head_depth=1, iou_head_hidden_dim=16)
    return Sam(enc, pe, dec).eval()


def test_sam_backend_runs_real_predictor_with_tiny_model():
    pytest.importorskip("segment_anything")
    from real2sim.segmentation import SamBackend

    img, _, _ = synthetic_scene()
    be = SamBackend(model=tiny_sam())
    m1 = be(img, Prompt([(65, 55)]))
    m2 = be(img, Prompt([(65, 55)]))
    m3 = SamBackend(model=tiny_sam())(img, Prompt(box=(45, 35, 90, 75)))
    assert m1.shape == (120, 160) and m1.dtype == bool and m3.shape == (120, 160)
    assert (m1 == m2).all()
    old = BACKENDS["sam"]
    try:
        BACKENDS["sam"] = be
        assert segment(img, Prompt([(65, 55)]), backend="sam").shape == (120, 160)
    finally:
        BACKENDS["sam"] = old


def _sam_reference(model, img, click=None, box=None):
    """SAM's own batched ``Sam.forward`` (not the ``SamPredictor`` the backend wraps): the image resized to the
    encoder's side, the prompt mapped with it, the best-scored of the three masks at the original size."""
    import torch
    from segment_anything.utils.transforms import ResizeLongestSide

    t = ResizeLongestSide(model.image_encoder.img_size)
    x = torch.as_tensor(t.apply_image(img)).permute(2, 0, 1).contiguous()
    item = {"image": x, "original_size": img.shape[:2]}
    if click is not None:
        item["point_coords"] = torch.as_tensor(t.apply_coords(np.array([[click]], float), img.shape[:2]),
                                               dtype=torch.float32)
        item["point_labels"] = torch.ones(1, 1, dtype=torch.int64)
    if box is not None:
        item["boxes"] = torch.as_tensor(t.apply_boxes(np.array([box], float), img.shape[:2]), dtype=torch.float32)
    out = model([item], multimask_output=box is None)[0]
    return out["masks"][0, int(out["iou_predictions"][0].argmax())].numpy()


def test_sam_backend_gives_sams_own_mask_for_each_prompt():
    """The backend's plumbing (prompt coordinates in image pixels, the image resized, the best-scored mask, back at
    the image's size) against SAM's batched forward pass: the same mask for clicks and boxes, and a different mask
    where the prompt differs, so a backend ignoring the prompt or mapping it wrongly fails."""
    pytest.importorskip("segment_anything")
    from real2sim.segmentation import SamBackend

    img, _, _ = synthetic_scene()
    model = tiny_sam()
    be = SamBackend(model=model)
    got = {}
    for click in ((65, 55), (130, 20)):
        ref = _sam_reference(model, img, click=click)
        got[click] = be(img, Prompt([click]))
        assert 0.0 < ref.mean() < 1.0, "the reference mask is trivial: the test would not see a wrong prompt"
        assert (got[click] == ref).mean() > 0.999, (got[click] == ref).mean()
    assert (got[(65, 55)] != got[(130, 20)]).mean() > 0.01  # the prompt moves the mask
    box = (45, 35, 90, 75)
    assert (be(img, Prompt(box=box)) == _sam_reference(model, img, box=box)).mean() > 0.999


def test_sam_without_checkpoint_is_a_clear_error(monkeypatch):
    pytest.importorskip("segment_anything")
    from real2sim.core.errors import DependencyMissing
    from real2sim.segmentation import SamBackend

    monkeypatch.delenv("REAL2SIM_SAM_CHECKPOINT", raising=False)
    img, _, _ = synthetic_scene()
    with pytest.raises(DependencyMissing, match="checkpoint"):
        SamBackend()(img, Prompt([(65, 55)]))


def test_propagation_follows_moving_object():
    frames, gts = [], []
    for i in range(5):
        img, plate, gt = synthetic_scene(shift=4 * i)
        frames.append(img)
        gts.append(gt)
    frames = np.stack(frames)
    for pl in (None, plate):
        masks, info = propagate(frames, gts[0], 0, plate=pl)
        assert all(iou(m, g) > 0.85 for m, g in zip(masks, gts)), [round(iou(m, g), 3) for m, g in zip(masks, gts)]
        assert [inf["state"] for inf in info] == ["prompt"] + ["moved"] * 4


def occlusion_clip(n=12):
    """A static textured object, a second one that slides right, and a dark bar sweeping over the static one."""
    import cv2

    rng = np.random.default_rng(3)
    base = cv2.resize(rng.uniform(110, 180, (24, 32, 3)).astype(np.float32), (320, 240), interpolation=cv2.INTER_CUBIC)
    tex = cv2.resize(rng.uniform(70, 255, (8, 8, 3)).astype(np.float32), (50, 40), interpolation=cv2.INTER_NEAREST)
    frames, static_gt, moving_gt, bars = [], np.zeros((240, 320), bool), [], []
    static_gt[60:100, 40:90] = True
    for i in range(n):
        img = base.copy()
        img[60:100, 40:90] = tex
        x = 150 + 6 * i
        m = np.zeros((240, 320), bool)
        m[150:190, x:x + 50] = True
        img[150:190, x:x + 50] = tex[:, ::-1]
        bar = np.zeros((240, 320), bool)
        bar[:, 20 + 12 * i:45 + 12 * i] = True  # the "arm" crosses the static object in frames 0..6
        bar[150:, :] = False
        img[bar] = (25, 25, 30)
        frames.append(np.clip(img + rng.normal(0, 2, img.shape), 0, 255).astype(np.uint8))
        moving_gt.append(m)
        bars.append(bar)
    return np.stack(frames), static_gt, moving_gt, bars


def test_propagation_keeps_static_objects_under_an_occluder_and_tracks_a_moving_one():
    from real2sim.segmentation import propagate_many

    frames, static_gt, moving_gt, bars = occlusion_clip()
    first_static = static_gt & ~bars[0]
    res = propagate_many(frames, {"box": first_static, "slider": moving_gt[0]}, 0)
    box, slider = res["box"], res["slider"]
    for i in range(len(frames)):
        visible = first_static & ~bars[i]  # what the prompt showed of it, less what covers it now
        # the static object's extent never moves, whatever passes over it; the visible part excludes the bar
        assert box.info[i]["state"] in ("prompt", "rest", "occluded"), (i, box.info[i])
        assert not (box.masks[i] & bars[i]).any(), i
        assert iou(box.masks[i], visible) > 0.85, (i, round(iou(box.masks[i], visible), 3))
        assert iou(slider.masks[i], moving_gt[i]) > 0.85, (i, round(iou(slider.masks[i], moving_gt[i]), 3))
    assert iou(box.extents[3], static_gt & ~bars[0]) > 0.95  # the extent is the prompted mask while occluded
    assert slider.states()[1:] == ["moved"] * (len(frames) - 1)
    assert any(s == "occluded" for s in box.states())


def test_segment_stage_and_contact_sheet(tmp_path):
    from real2sim.capture import init_bundle
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_rgb
    from real2sim.segmentation.stage import segment_stage

    gts = []
    for i in range(3):
        img, plate, gt = synthetic_scene(shift=3 * i)
        gts.append(gt)
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", img)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    rec, ran = segment_stage(b, {"cube": {"frame": 0, "prompt": Prompt([(65, 55)])}})
    assert ran
    assert rec.status == "done"
    b = Bundle.load(b.root)
    assert set(b.manifest.capture.masks) == {"000000", "000001", "000002"}
    from real2sim.core.imaging import read_mask

    assert iou(read_mask(b.path(b.manifest.capture.masks["000002"]["cube"])), gts[2]) > 0.8  # followed the slide
    # the cube slides: propagation records it as carried away, so alignment and texturing will not use frames 1-2
    assert [b.manifest.capture.mask_state(k, "cube") for k in ("000000", "000001", "000002")] == ["prompt", "moved", "moved"]
    import json

    rep = json.loads((b.root / "reports" / "segment.json").read_text())
    assert rep["entities"]["cube"]["states"] == {"prompt": 1, "moved": 2}
    # segmenting it again without propagation drops the propagated frames (no stale masks stay behind)
    segment_stage(b, {"cube": {"frame": 0, "prompt": Prompt([(65, 55)])}}, propagate_masks=False)
    b = Bundle.load(b.root)
    assert set(b.manifest.capture.masks) == {"000000"} and b.manifest.capture.mask_state("000000", "cube") == "prompt"
    d = json.loads((b.root / "scene.json").read_text())
    d["capture"]["mask_states"] = {"000000": {"cube": "hidden"}}
    (b.root / "scene.json").write_text(json.dumps(d))
    with pytest.raises(Exception, match="capture.mask_states.000000.cube"):
        Bundle.load(b.root)
    assert (b.root / "reports" / "segment.png").is_file() and (b.root / "reports" / "segment.json").is_file()
    with pytest.raises(SegmentationError, match="frames 0..2"):
        segment_stage(b, {"cube": {"frame": 7, "prompt": {"points": [[65, 55]]}}})


def test_cli_handlers(tmp_path):
    from real2sim.apps.cli.capture import add_parsers as add_capture
    from real2sim.apps.cli.segmentation import add_parsers as add_seg
    from real2sim.core.imaging import read_mask, write_rgb

    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    add_capture(sub)
    add_seg(sub)
    img, plate, gt = synthetic_scene()
    write_rgb(tmp_path / "img.png", img)
    write_rgb(tmp_path / "plate.png", plate)
    a = ap.parse_args(["segment", "--image", str(tmp_path / "img.png"), "--point", "65,55", "--out", str(tmp_path / "m.png")])
    assert a.fn(a) == 0 and iou(read_mask(tmp_path / "m.png"), gt) > 0.9
    a = ap.parse_args(["segment", "--image", str(tmp_path / "img.png"), "--box", "45,35,90,75", "--plate",
                       str(tmp_path / "plate.png"), "--backend", "difference", "--out", str(tmp_path / "m2.png")])
    assert a.fn(a) == 0 and iou(read_mask(tmp_path / "m2.png"), gt) > 0.9
    covered = []
    for i in range(4):
        f, _, g = synthetic_scene(shift=10 * i)
        covered.append(g)
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", f)
    a = ap.parse_args(["plate", "--frames", str(tmp_path / "frames"), "--out", str(tmp_path / "p.png"),
                       "--confidence", str(tmp_path / "c.png")])
    assert a.fn(a) == 0 and (tmp_path / "c.png").is_file()
    from reference import ref_psnr

    from real2sim.core.imaging import read_rgb

    frame0 = read_rgb(tmp_path / "frames" / "000.png")
    seen = covered[0] & (np.sum(covered, 0) == 1)  # the cube in frame 0 only, the table in the three others
    assert ref_psnr(read_rgb(tmp_path / "p.png"), plate, seen) > ref_psnr(frame0, plate, seen) + 10  # the cube is gone
    a = ap.parse_args(["init", str(tmp_path / "scene"), "--frames", str(tmp_path / "frames"), "--robot", "widowx"])
    assert a.fn(a) == 0 and (tmp_path / "scene" / "scene.json").is_file()


def test_one_click_keeps_the_whole_object_on_a_board():
    """One click on a can standing on a ChArUco board (the scan's setting): the board's squares give edges as strong as
    the can's, so an outline that follows them must not win the pick; the can is kept whole, without board squares
    (six seeded scenes; main@008fafa's pick by outline contrast: mean IoU 0.84, worst 0.61)."""
    from real2sim.demos.mask_cases import procedural_case

    ious = []
    for seed in range(6):
        c = procedural_case(seed, size=(240, 320), surface="charuco")
        ious.append(iou(segment(c.image, Prompt([c.click]), backend="grabcut"), c.mask))
    assert np.mean(ious) >= 0.9 and min(ious) >= 0.75, ious


def test_mask_helpers_agree_with_independent_references_on_random_masks():
    """The mask helpers the one-click masks are built from (they work on the mask's box, and compare candidate
    masks by their boxes) give the whole-image answers: holes filled as scipy fills them, the component under a
    point as scipy labels it (8-connected), IoU as the reference IoU."""
    from scipy import ndimage

    from real2sim.core.imaging import MaskOverlaps, component_at, fill_holes

    rng = np.random.default_rng(3)
    ov = MaskOverlaps()
    masks = []
    for _ in range(200):
        h, w = rng.integers(2, 50, 2)
        m = np.zeros((40, 40), bool)
        y0, x0 = rng.integers(0, 40, 2)
        m[y0:y0 + h, x0:x0 + w] = rng.random((min(h, 40 - y0), min(w, 40 - x0))) < rng.uniform(0.3, 0.9)
        assert np.array_equal(fill_holes(m), ndimage.binary_fill_holes(m))
        labels, _ = ndimage.label(m, np.ones((3, 3)))
        if m.any():
            y, x = np.argwhere(m)[rng.integers(0, m.sum())]
            assert np.array_equal(component_at(m, [(x, y)], 0), labels == labels[y, x])
        masks.append(m)
    masks.append(np.zeros((40, 40), bool))
    for a, b in zip(masks, masks[1:] + masks[:1]):
        assert ov.iou(a, b) == iou(a, b) and ov.area(a) == a.sum()


def _shadow_clip(seed: int = 0, h: int = 240, w: int = 320, colour=(190.0, 70.0, 55.0)):
    """A still object of ``colour`` on a table, the arm's soft cast shadow over its lower half in frame 0 only
    (gone in the later frames), a black bar (the arm) over its left third in frames 4-5. Returns (frames, object
    mask, the bar's masks)."""
    import cv2

    from real2sim.demos.mask_cases import procedural_plate

    rng = np.random.default_rng(seed)
    table = procedural_plate(h, w, rng).astype(np.float32)
    obj = np.zeros((h, w), bool)
    obj[90:170, 120:200] = True
    scene = np.where(obj[..., None], np.array(colour) * (0.9 + 0.1 * rng.random((h, w, 1))), table)
    shade = np.zeros((h, w), np.float32)
    shade[135:200, 60:260] = 0.45  # darkens to 55 %, like the arm's shadow on the real clip's table
    shade = cv2.GaussianBlur(shade, (0, 0), 4.0)
    frames, bars = [], []
    for i in range(7):
        img = scene * (1.0 - shade[..., None]) if i == 0 else scene.copy()
        bar = np.zeros((h, w), bool)
        if i in (4, 5):
            bar[60:200, 110:145] = True
            img[bar] = 22.0
        frames.append(np.clip(img + rng.normal(0, 1.5, img.shape), 0, 255).astype(np.uint8))
        bars.append(bar)
    return np.stack(frames), obj, bars


def test_a_shadow_on_a_still_object_in_the_prompt_frame_that_leaves_does_not_take_its_part_away():
    """The prompt frame has the arm's shadow over half of a still object; later frames show that half lit. A pixel
    of an object at rest whose colour is its reference's scaled alike in every channel is the object under a
    shadow that came or went (:func:`propagate.shaded`), not an occluder: the mask stays the whole object (it lost
    the lit half before, IoU about 0.5), and the black bar that later covers a third of it stays out."""
    from real2sim.segmentation import propagate_many
    from real2sim.segmentation.propagate import PropagateConfig

    frames, obj, bars = _shadow_clip()
    on = propagate_many(frames, {"obj": obj}, 0)["obj"]
    off = propagate_many(frames, {"obj": obj}, 0, PropagateConfig(shade_ratio=0))["obj"]
    for i in range(1, len(frames)):
        seen = obj & ~bars[i]
        assert on.info[i]["state"] == "rest", (i, on.info[i])
        assert iou(on.masks[i], seen) > 0.95, (i, round(iou(on.masks[i], seen), 3))
        assert (on.masks[i] & bars[i]).sum() <= 0.01 * on.masks[i].sum(), i
    assert min(iou(off.masks[i], obj & ~bars[i]) for i in (1, 2, 3, 6)) < 0.7, "the clip no longer shows the failure"


def test_a_yellow_object_whose_blue_is_near_black_keeps_its_lit_part_after_a_shadow_leaves():
    """The same clip with a yellow cube (blue 3 levels): under the shadow its blue is 1-2 levels, lit 2-5, and that
    channel's factor is noise, which vetoed the shade (the lit half lost again, as the benchmark's yellow cubes did).
    Each channel's factor is known to ``shade_noise`` levels over its value: the near-black channel no longer vetoes;
    the black bar still stays out (its blue is 20 levels above the cube's: no shade of it)."""
    from real2sim.segmentation import propagate_many
    from real2sim.segmentation.propagate import PropagateConfig

    frames, obj, bars = _shadow_clip(colour=(205.0, 185.0, 3.0))
    on = propagate_many(frames, {"obj": obj}, 0)["obj"]
    strict = propagate_many(frames, {"obj": obj}, 0, PropagateConfig(shade_noise=0))["obj"]
    for i in range(1, len(frames)):
        seen = obj & ~bars[i]
        assert iou(on.masks[i], seen) > 0.95, (i, round(iou(on.masks[i], seen), 3))
        assert (on.masks[i] & bars[i]).sum() <= 0.01 * on.masks[i].sum(), i
    assert min(iou(strict.masks[i], obj & ~bars[i]) for i in (1, 2, 3, 6)) < 0.8, "the clip no longer shows the failure"


def test_an_object_of_the_floors_colour_is_not_carried_off_by_the_arm_passing_over_it(shared_data):
    """The propagation benchmark's clip of a low-contrast 7up can on a Google Robot plate, the WidowX over 30-80 %
    of it in frames 4-8: the flow of the can's few visible pixels is the arm's, and carried by it the can (of the
    floor's colour) still "matched" the floor: it was called moved in frames 4-10, its mask off the can (IoU
    0.00-0.23). Motion now also has to explain the pixels where carried and unchanged predict other colours
    (``motion_where_told``): the can stays at rest or occluded, its visible part found."""
    from real2sim.demos import mask_cases as mc
    from real2sim.demos.propagate_cases import still_clip
    from real2sim.segmentation.propagate import AT_PROMPTED_POSE, PropagateConfig, propagate

    plates = mc.plates(shared_data)
    name = "google_move_near_real_eval_1"
    _, _, frames, objs, robot = still_clip(shared_data, list(plates).index(name), name, plates[name], "lowcontrast", 1)
    prompt = objs[0] & ~robot[0]
    masks, info = propagate(frames, prompt, 0)
    old = propagate(frames, prompt, 0, config=PropagateConfig(motion_where_told=False))[1]
    assert any(inf["state"] == "moved" for inf in old), "the clip no longer shows the failure"
    assert all(inf["state"] in AT_PROMPTED_POSE for inf in info), [inf["state"] for inf in info]
    scores = [iou(masks[i], objs[i] & ~robot[i]) for i in range(1, len(masks))]
    assert min(scores) > 0.6 and np.mean(scores) > 0.85, np.round(scores, 2)


def _carried_clip_scores(shared_data, name: str, family: str, config):
    """The propagation benchmark's carried clip of ``family`` over the real plate ``name``, propagated from its
    frame-0 mask with ``config``: (IoU with the visible object in frames 1.., each frame's state)."""
    from real2sim.demos import mask_cases as mc
    from real2sim.demos.propagate_cases import carried_clip
    from real2sim.segmentation.propagate import propagate

    plates = mc.plates(shared_data)
    _, _, frames, objs, robot = carried_clip(shared_data, list(plates).index(name), name, plates[name], family)
    masks, info = propagate(frames, objs[0] & ~robot[0], 0, config=config)
    return [iou(masks[i], objs[i] & ~robot[i]) for i in range(1, len(masks))], [inf["state"] for inf in info]


def test_a_low_contrast_object_carried_off_is_followed(shared_data):
    """The propagation benchmark's clip of a yellow cube on the Google Robot's grey-beige floor, carried 3 px a frame
    from frame 3 on, in view all along: moved a few pixels, 85 % of its pixels still kept their colours within the
    tolerance, the moved hypothesis explained 93 %, and the plain margin (10 % more) left the cube behind: its mask
    held still while the cube moved off (IoU 0.00 from frame 8). A motion of an object seen whole now needs 30 % of
    what standing still leaves unexplained where that is less (``motion_margin_share``)."""
    from real2sim.segmentation.propagate import PropagateConfig

    clip = (shared_data, "google_coke_can_real_eval_1", "lowcontrast")
    old, _ = _carried_clip_scores(*clip, PropagateConfig(motion_margin_share=0.0))
    assert old[-1] < 0.2, "the clip no longer shows the failure"
    new, states = _carried_clip_scores(*clip, PropagateConfig())
    assert "moved" in states[3:6], states
    assert min(new) > 0.4 and np.mean(new) > 0.65, np.round(new, 2)


def test_a_plain_coloured_object_carried_off_is_followed(shared_data):
    """The propagation benchmark's clip of a plain blue pepsi can on a Google Robot plate, carried 3 px a frame from
    frame 3 on: from one frame to the next only its edges change colour (93-96 % of its pixels kept theirs), and
    motion was tested only under 90 %: the can was never tested, its mask held still while it moved off (IoU 0.00
    by frame 11). Motion is now tested whenever a visible pixel changed (``check_motion_below``), and the moved
    hypothesis (100 %) clears the margin for an object seen whole (``motion_margin_share``; the plain 10 % it does
    not)."""
    from real2sim.segmentation.propagate import PropagateConfig

    clip = (shared_data, "open_drawer_a1", "base")
    old, _ = _carried_clip_scores(*clip, PropagateConfig(check_motion_below=0.9))
    assert old[-1] < 0.2, "the clip no longer shows the failure"
    new, _ = _carried_clip_scores(*clip, PropagateConfig())
    assert min(new) > 0.7 and np.mean(new) > 0.8, np.round(new, 2)


def test_a_still_spoons_one_pixel_handle_stays_in_its_propagated_mask():
    """The visible mask of an object at rest is cleaned of specks by an opening, which took a 1 px handle with them
    (half the spoon, from the first propagated frame on); the opening now spares the object's own thin parts."""
    import cv2

    from real2sim.demos.mask_cases import procedural_plate
    from real2sim.segmentation import propagate_many
    from real2sim.segmentation.propagate import _clean

    rng = np.random.default_rng(3)
    h, w = 200, 260
    table = procedural_plate(h, w, rng).astype(np.float32)
    spoon = np.zeros((h, w), np.uint8)
    cv2.ellipse(spoon, ((90, 100), (26, 18), 0.0), 1, -1)
    cv2.line(spoon, (103, 100), (220, 100), 1, 1)
    spoon = spoon > 0
    image = np.where(spoon[..., None], np.array([60.0, 80.0, 200.0]), table)
    frames = np.stack([np.clip(image + rng.normal(0, 1.5, image.shape), 0, 255).astype(np.uint8) for _ in range(5)])
    handle = spoon.copy()
    handle[:, :104] = False
    assert (_clean(spoon, spoon) & handle).sum() < 0.2 * handle.sum(), "the plain opening takes the handle (the failure)"
    assert (_clean(spoon, spoon, keep_thin=True) & handle).sum() == handle.sum()
    res = propagate_many(frames, {"spoon": spoon}, 0)["spoon"]
    for i in range(1, len(frames)):
        assert res.info[i]["state"] == "rest", (i, res.info[i])
        assert iou(res.masks[i], spoon) > 0.95, (i, round(iou(res.masks[i], spoon), 3))
