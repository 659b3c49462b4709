"""The review page in a real Chromium (Debian ``chromium`` driven by Playwright).

One server per module, in a thread of the test process, on a free localhost port, over a
tabletop bundle with a synthetic "real" frame (the scene rendered before the cube was
misplaced by 4 cm). Screenshots go to ``test-artifacts/review/``.
"""
from __future__ import annotations

import io
import json
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "review"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing: install Debian's 'chromium' package (apt-get install -y chromium)",
                allow_module_level=True)
pytest.importorskip("gradio", reason="the review page needs gradio: pip install 'real2sim[review]'")
pytest.importorskip("playwright", reason="browser tests need playwright: pip install 'real2sim[review]'")


REAL_CUBE_POSITION: list[float] = []  # where the cube is in the synthetic real frame


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_review_bundle(root: Path):
    """Tabletop bundle (simple collision, MJCF export) + a synthetic real frame; the cube then misplaced."""
    from conftest import give_simple_collision
    from PIL import Image

    from real2sim.apps.review import preview
    from real2sim.core.manifest import FrameSpec
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), root))
    export_bundle(b, engines=("mjcf",))
    pr = preview.PreviewRenderer(b)
    pr.sync(b.manifest)
    img = pr.render("main")
    pr.close()
    (root / "capture" / "frames").mkdir(parents=True)
    Image.fromarray(img).save(root / "capture" / "frames" / "000000.png")
    b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png")]
    real_pos = list(b.manifest.objects["cube"].pose.position)
    b.manifest.objects["cube"].pose.position[0] += 0.04  # "misplaced"
    b.save()
    return real_pos


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from real2sim.apps.review.app import launch

    root = tmp_path_factory.mktemp("review") / "scene"
    REAL_CUBE_POSITION[:] = make_review_bundle(root)
    app, url = launch(root, port=_free_port(), block=False, quiet=True)
    yield root, url.rstrip("/")
    app.close()
    app.review_server.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        user_dir = tempfile.mkdtemp(prefix="r2s-chromium-")
        ctx = p.chromium.launch_persistent_context(user_dir, executable_path=str(CHROMIUM), headless=True, args=ARGS,
                                                   viewport={"width": 1400, "height": 1000})
        yield ctx
        ctx.close()
        shutil.rmtree(user_dir, ignore_errors=True)


def open_page(browser, url):
    """A new page at ``url`` once the app has rendered its version line. Under load (two cores, the suite's other
    workers) the first load has twice in CI never finished in 60 s (each time a different test, passing alone in
    about 10 s): such a page is loaded again, once."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    ready = "() => document.querySelector('#version') && document.querySelector('#version').innerText.includes('version')"
    page = browser.new_page()
    page.goto(url)
    try:
        page.wait_for_function(ready, timeout=60_000)
    except PlaywrightTimeout:
        page.reload()
        page.wait_for_function(ready, timeout=60_000)
    return page


def goto_tab(page, name):
    page.get_by_role("tab", name=name).click()
    time.sleep(0.3)


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def img_pixels(page, base, selector) -> tuple[str, np.ndarray]:
    from PIL import Image

    src = page.locator(f"{selector} img").first.get_attribute("src")
    assert src, f"no image in {selector}"
    status, data = fetch(src if src.startswith("http") else base + src)
    assert status == 200, (src, status)
    return src, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)


def wait_new_src(page, selector, old_src, timeout=20.0) -> str:
    t0 = time.time()
    while time.time() - t0 < timeout:
        src = page.locator(f"{selector} img").first.get_attribute("src")
        if src and src != old_src:
            return src
        time.sleep(0.1)
    raise AssertionError(f"{selector} did not change within {timeout} s")


def stable_image_size(page, selector, timeout=20.0) -> list[float]:
    """[natural w, natural h, shown w, shown h] of an image once it is loaded and its layout stopped changing
    (under load the page may still be laying it out: a click mapped through a passing size lands elsewhere)."""
    js = (f"() => {{ const i = document.querySelector('{selector}'); if (!i || !i.complete) return null; "
          "const r = i.getBoundingClientRect(); return [i.naturalWidth, i.naturalHeight, r.width, r.height]; }")
    t0, last, same = time.time(), None, 0
    while time.time() - t0 < timeout:
        cur = page.evaluate(js)
        if cur and cur[0] > 0 and cur[2] > 0:
            same = same + 1 if cur == last else 0
            if same >= 3:
                return cur
        last = cur
        time.sleep(0.2)
    raise AssertionError(f"{selector}: no stable image size; last {last}")


def status_text(page, contains, timeout=20.0) -> str:
    t0 = time.time()
    txt = ""
    while time.time() - t0 < timeout:
        txt = page.locator("#status").inner_text()
        if contains in txt:
            return txt
        time.sleep(0.1)
    raise AssertionError(f"status never said {contains!r}; last: {txt!r}")


def enter_number(page, selector, value: str):
    """Type ``value`` into a number box and submit it (again if the tab's first load overwrote it meanwhile)."""
    box = page.locator(selector)
    for _ in range(3):
        box.fill(value)
        time.sleep(0.3)
        if box.input_value() == value:
            break
    assert box.input_value() == value
    box.press("Enter")


def apply_exact(page, text):
    """Type an exact pose into the text field and press 'Apply exact pose'."""
    page.bring_to_front()
    box = page.locator("#pose_text textarea, #pose_text input").first
    for _ in range(3):  # under load the tab's first load of the object's pose can land after our typing
        box.fill(text)
        box.press("Tab")
        time.sleep(0.4)
        if box.input_value() == text:
            break
    assert box.input_value() == text
    page.locator("#apply_pose").click()


def pose(root, oid):
    return json.loads((root / "scene.json").read_text())["objects"][oid]["pose"]


def test_pose_slider_moves_object_and_updates_overlay(server, browser):
    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    page.wait_for_selector("#object_preview img", timeout=30_000)
    before = pose(root, "cube")
    before_x = before["position"][0]
    src0, img0 = img_pixels(page, url, "#object_preview")
    enter_number(page, "#pose_x input[type=number]", f"{before_x - 0.04:.3f}")  # put the misplaced cube back
    src1 = wait_new_src(page, "#object_preview", src0)
    status_text(page, "object cube")
    _, img1 = img_pixels(page, url, "#object_preview")
    diff = np.abs(img1 - img0).max(-1)
    assert (diff > 30).sum() > 200, "the overlay did not change after moving the slider"
    after = pose(root, "cube")["position"]
    assert after[0] == pytest.approx(before_x - 0.04, abs=1e-6)
    assert after[1:] == before["position"][1:] and pose(root, "cube")["quaternion_wxyz"] == before["quaternion_wxyz"]
    page.screenshot(path=str(ARTIFACTS / "objects_after_move.png"), full_page=True)
    # the exact-pose field follows the slider edit (x, y, z, then the quaternion)
    t0 = time.time()
    box = page.locator("#pose_text textarea, #pose_text input").first
    while not box.input_value().startswith(f"{before_x - 0.04:.6g}") and time.time() - t0 < 60:
        time.sleep(0.1)
    assert box.input_value().startswith(f"{before_x - 0.04:.6g}"), box.input_value()
    # the keyboard on the range slider nudges: 0.5 mm per step
    rng = page.locator("#pose_y input[type=range]")
    y0 = pose(root, "cube")["position"][1]
    rng.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    wait_new_src(page, "#object_preview", src1)
    t0 = time.time()
    while abs(pose(root, "cube")["position"][1] - (y0 + 0.0025)) > 1e-6 and time.time() - t0 < 60:
        time.sleep(0.1)
    assert pose(root, "cube")["position"][1] == pytest.approx(y0 + 0.0025, abs=1e-6)
    # the difference view now shows the cube where the real frame has it
    goto_tab(page, "Overlay")
    page.get_by_label("difference").check()
    time.sleep(1.5)
    page.screenshot(path=str(ARTIFACTS / "overlay_difference.png"), full_page=True)
    page.close()


def test_camera_slider_moves_camera(server, browser):
    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Camera & robot")
    page.wait_for_selector("#camera_preview img", timeout=30_000)
    T0 = json.loads((root / "scene.json").read_text())["cameras"]["main"]["T_world_camera"]
    src0, img0 = img_pixels(page, url, "#camera_preview")
    enter_number(page, "#cam_z input[type=number]", f"{T0[2][3] + 0.05:.3f}")
    wait_new_src(page, "#camera_preview", src0)
    status_text(page, "camera main")
    _, img1 = img_pixels(page, url, "#camera_preview")
    assert (np.abs(img1 - img0).max(-1) > 30).sum() > 1000
    T1 = json.loads((root / "scene.json").read_text())["cameras"]["main"]["T_world_camera"]
    assert T1[2][3] == pytest.approx(T0[2][3] + 0.05, abs=1e-6)
    assert np.allclose(np.array(T1)[:3, :3], np.array(T0)[:3, :3], atol=1e-9), "moving z must not touch the rotation"
    page.locator("#undo").click()
    status_text(page, "undid: camera main")
    # the slider undo set fires its release with the values already saved: nothing moves, the status stays. The
    # fixed handler shows nothing to wait for, so the status is watched for 2 s (the unfixed one overwrote it well
    # within that), failing as soon as it changes
    page.locator("#cam_z input[type=number]").focus()
    page.locator("#cam_z input[type=number]").press("Tab")
    for _ in range(20):
        assert "undid: camera main" in page.locator("#status").inner_text()
        page.wait_for_timeout(100)
    assert json.loads((root / "scene.json").read_text())["cameras"]["main"]["T_world_camera"] == T0
    page.close()


def test_undo_restores_previous_pose(server, browser):
    from real2sim.apps.review import edits

    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    apply_exact(page, "0.04, 0.04, 0.0225, 0, 0, 30")  # an earlier edit of this test, still undoable afterwards
    status_text(page, "object cube: position [0.04, 0.04")
    before = pose(root, "cube")
    time.sleep(2.5)  # edits within 2 s of each other merge into one undo step (one slider drag)
    apply_exact(page, "0.05, 0.05, 0.0225, 0, 0, 45")
    status_text(page, "object cube: position [0.05, 0.05")
    assert pose(root, "cube")["position"] == pytest.approx([0.05, 0.05, 0.0225])
    page.locator("#undo").click()
    status_text(page, "undid: object cube")
    assert pose(root, "cube") == before
    assert edits.history(root)  # the earlier edit is still undoable
    page.close()


def test_out_of_range_value_is_refused_and_shown(server, browser):
    from real2sim.core.bundle import Bundle

    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    before = (root / "scene.json").read_bytes()
    apply_exact(page, "9, 0, 0, 0, 0, 0")
    txt = status_text(page, "Error")
    assert "out of range" in txt and "5 m" in txt
    apply_exact(page, "0, 0, nan, 0, 0, 0")
    status_text(page, "finite")
    apply_exact(page, "0, 0, 0, 0, 0, 400")
    status_text(page, "+-180 deg")
    assert (root / "scene.json").read_bytes() == before
    Bundle.load(root)
    page.screenshot(path=str(ARTIFACTS / "objects_out_of_range.png"), full_page=True)
    page.close()


def test_concurrent_edit_from_second_tab_is_refused(server, browser):
    root, url = server
    a = open_page(browser, url)
    b = open_page(browser, url)
    for p in (a, b):
        goto_tab(p, "Objects")
    apply_exact(a, "0.1, -0.05, 0.0225, 0, 0, 0")
    status_text(a, "object cube: position [0.1, -0.05")
    apply_exact(b, "-0.1, 0.05, 0.0225, 0, 0, 0")
    txt = status_text(b, "Error")
    assert "changed since this page loaded it" in txt
    assert pose(root, "cube")["position"] == pytest.approx([0.1, -0.05, 0.0225])
    b.screenshot(path=str(ARTIFACTS / "concurrent_edit_refused.png"), full_page=True)
    # after reloading, tab B may edit
    b.locator("#reload").click()
    status_text(b, "reloaded")
    apply_exact(b, "-0.1, 0.05, 0.0225, 0, 0, 0")
    status_text(b, "object cube: position [-0.1, 0.05")
    assert pose(root, "cube")["position"] == pytest.approx([-0.1, 0.05, 0.0225])
    a.close()
    b.close()


def test_export_button_writes_files_and_failure_keeps_bundle(server, browser):
    from real2sim.core.bundle import Bundle

    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Export & evaluate")
    shutil.rmtree(root / "exports" / "usd", ignore_errors=True)
    for name in ("sapien",):  # keep the test short: MJCF + USD
        page.get_by_label(name).uncheck()
    page.locator("#export_btn").click()
    status_text(page, "export finished", timeout=90)
    assert (root / "exports" / "mjcf" / "scene.xml").is_file()
    assert (root / "exports" / "usd").is_dir() and any((root / "exports" / "usd").iterdir())
    t0 = time.time()
    while "exports/usd/" not in page.locator("#export_result").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert "exports/usd/" in page.locator("#export_result").inner_text(), page.locator("#export_result").inner_text()
    page.wait_for_function("() => document.querySelector('#export_files').innerText.includes('exports/mjcf/')", timeout=20_000)
    page.screenshot(path=str(ARTIFACTS / "export_done.png"), full_page=True)
    # a stage failing midway: a collision hull file vanished
    b = Bundle.load(root)
    hull = next(h for o in b.manifest.objects.values() for h in o.collision.hulls)
    saved = b.path(hull).read_bytes()
    b.path(hull).unlink()
    try:
        page.locator("#export_btn").click()
        txt = status_text(page, "export failed", timeout=90)
        assert Path(hull).name in txt
        b2 = Bundle.load(root)  # still valid
        assert b2.manifest.stages["export"].status == "failed"
        assert (root / "exports" / "mjcf" / "scene.xml").is_file(), "the previous export must be kept"
        page.screenshot(path=str(ARTIFACTS / "export_failed.png"), full_page=True)
    finally:
        b.path(hull).write_bytes(saved)
    # the failed export is not evaluated (its files are older than the scene): export again, then evaluate
    page.locator("#export_btn").click()
    status_text(page, "export finished", timeout=90)
    # Evaluate runs the episodes (the bundle's recipe has tasks; the test environment has gymnasium) and shows the
    # numbers the episode records on disk hold
    page.locator("#eval_btn").click()
    t0 = time.time()
    while not any(w in page.locator("#eval_result").inner_text() for w in ("successes", "rror")) and time.time() - t0 < 120:
        time.sleep(0.3)
    txt = page.locator("#eval_result").inner_text()
    assert "successes" in txt, txt
    recs = [json.loads(line) for line in (root / "results" / "review" / "episodes.jsonl").read_text().splitlines()
            if line.strip()]
    assert len(recs) == 3, recs  # the page's default: 3 episodes
    assert f"{sum(bool(r['success']) for r in recs)}/3 successes" in txt, txt
    page.screenshot(path=str(ARTIFACTS / "evaluate.png"), full_page=True)
    page.close()


def test_only_bundle_files_are_served(server):
    root, url = server
    inside = root / "capture" / "frames" / "000000.png"
    assert fetch(f"{url}/gradio_api/file={inside}")[0] == 200
    for outside in ("/etc/passwd", str(Path(__file__).resolve()), str(root.parent / "elsewhere.txt")):
        if outside.endswith("elsewhere.txt"):
            Path(outside).write_text("secret")
        status, body = fetch(f"{url}/gradio_api/file={outside}")
        assert status in (403, 404), (outside, status)
        assert b"root:" not in body and b"secret" not in body
    status, _ = fetch(f"{url}/gradio_api/file={root}/../elsewhere.txt")
    assert status in (403, 404)
    # the undo history is not served either
    hist = root / ".history" / "lock"
    if hist.exists():
        assert fetch(f"{url}/gradio_api/file={hist}")[0] in (403, 404)


def test_click_resegments(server, browser):
    from real2sim.apps.review import masks

    if masks.seg_module() is None:
        page = open_page(browser, server[1])
        goto_tab(page, "Masks")
        page.wait_for_function("() => document.querySelector('#mask_note').innerText.includes('unavailable')",
                               timeout=20_000)
        page.close()
        pytest.skip("real2sim.segmentation.segment is not in this build yet (segmentation/ is being written); the Masks tab "
                    "says re-segmentation is unavailable")
    root, url = server
    page = open_page(browser, url)
    goto_tab(page, "Masks")
    page.wait_for_selector("#mask_image img", timeout=30_000)
    img = page.locator("#mask_image img").first
    # the cube's position in the real frame: project its pose
    from real2sim.core.bundle import Bundle

    b = Bundle.load(root)
    cam = b.manifest.cameras["main"].camera()
    u, v = cam.project(np.array([REAL_CUBE_POSITION]))[0]
    # the image is letterboxed inside its box: map pixels through the displayed size
    shown = stable_image_size(page, "#mask_image img")
    img.click(position={"x": u * shown[2] / shown[0], "y": v * shown[3] / shown[1]})
    status_text(page, "re-segmented", timeout=60)
    page.screenshot(path=str(ARTIFACTS / "mask_proposal.png"), full_page=True)
    page.locator("#accept_mask").click()
    status_text(page, "mask 000000/cube")
    from PIL import Image

    m = np.asarray(Image.open(root / "masks" / "000000" / "cube.png")) > 127
    ys, xs = np.nonzero(m)
    assert 50 < m.sum() < 0.05 * m.size, "the mask should be about the size of the cube"
    assert abs(xs.mean() - u) < 25 and abs(ys.mean() - v) < 25, "the mask should sit where the click was"
    assert Bundle.load(root).manifest.capture.masks["000000"]["cube"] == "masks/000000/cube.png"
    # a box from two corner clicks
    page.locator("#clear_clicks").click()
    page.get_by_label("box corner").check()
    time.sleep(0.5)
    scale = (shown[2] / shown[0], shown[3] / shown[1])
    img.click(position={"x": (u - 30) * scale[0], "y": (v - 35) * scale[1]})
    status_text(page, "click the opposite corner")
    # the page redraws the image with the first corner marked; a click that lands while the
    # previous event is still queued can be dropped under load, so click again if it was
    for attempt in range(3):
        time.sleep(0.5)
        img.click(position={"x": (u + 30) * scale[0], "y": (v + 35) * scale[1]})
        try:
            status_text(page, "re-segmented 'cube' from box", timeout=20)
            break
        except AssertionError:
            if attempt == 2:
                raise
    page.screenshot(path=str(ARTIFACTS / "mask_box_proposal.png"), full_page=True)
    page.locator("#reject_mask").click()
    status_text(page, "proposal discarded")
    page.close()


def test_screenshot_every_tab(server, browser):
    root, url = server
    page = open_page(browser, url)
    for tab in ["Overview", "Overlay", "Objects", "Masks", "Camera & robot", "Collision", "3D scene & rollouts",
                "Export & evaluate"]:
        goto_tab(page, tab)
        time.sleep(1.5)
        page.screenshot(path=str(ARTIFACTS / f"tab_{tab.split()[0].lower()}.png"), full_page=True)
        if tab == "Collision":
            page.wait_for_selector("#collision_view canvas", timeout=30_000)  # the WebGL view started
            time.sleep(2)
            page.screenshot(path=str(ARTIFACTS / "tab_collision.png"), full_page=True)
    txt = page.locator("#collision_note").inner_text()
    assert "3D view written to" in txt
    assert (root / "reports" / "collision_cube.glb").is_file()
    page.close()


def make_policy_bundle(root: Path) -> None:
    """Tabletop bundle with a 'photo' and a different background plate (random pixels: every pixel of the
    composite tells which one it came from), a task that places nothing at random and does not settle (so the env's
    first observation is the scene as saved), exported; and a table stage recorded poor (its number and bar)."""
    from conftest import give_simple_collision
    from PIL import Image

    from real2sim.core.manifest import FrameSpec, StageRecord
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), root))
    rng = np.random.default_rng(0)
    photo = (rng.random((480, 640, 3)) * 255).astype(np.uint8)
    (root / "capture" / "frames").mkdir(parents=True)
    (root / "background").mkdir(exist_ok=True)
    Image.fromarray(photo).save(root / "capture" / "frames" / "000000.png")
    Image.fromarray(np.ascontiguousarray(photo[::-1])).save(root / "background" / "plate.png")
    b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png")]
    b.manifest.capture.plate = "background/plate.png"
    b.manifest.tasks["lift_cube"].init = {"settle_s": 0.0}
    b.manifest.stages["table"] = StageRecord("poor", "x", {}, [], {
        "spread_mm": 23.4, "applied": False,
        "gate": [{"metric": "spread_mm", "value": 23.4, "bar": 10.0, "rule": "spread of the objects' bottoms <= 10 mm",
                  "passed": False}]}, "table: spread 23.4 mm is above the bar 10 mm -> not applied")
    b.save()
    export_bundle(b, engines=("mjcf",))
    # an episode video as 'real2sim eval --videos' writes it (the runner's own writer): the scene drifting right
    from real2sim.apps.review.preview import PreviewRenderer
    from real2sim.evaluation.envs.runner import write_video

    pr = PreviewRenderer(b)
    pr.sync(b.manifest)
    frames = [np.roll(pr.render("main"), 8 * i, axis=1) for i in range(10)]
    cube_mask = pr.mask("main", ["cube"])  # the photo's mask of the cube: where the saved pose draws it
    pr.close()
    write_video(frames, root / "results" / "review" / "videos" / "scripted_lift_cube_mujoco_0.mp4")
    (root / "masks" / "000000").mkdir(parents=True, exist_ok=True)
    Image.fromarray(cube_mask.astype(np.uint8) * 255).save(root / "masks" / "000000" / "cube.png")
    b.manifest.capture.masks = {"000000": {"cube": "masks/000000/cube.png"}}
    b.save()


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory):
    from real2sim.apps.review.app import launch

    root = tmp_path_factory.mktemp("policy") / "scene"
    make_policy_bundle(root)
    app, url = launch(root, port=_free_port(), block=False, quiet=True)
    yield root, url.rstrip("/")
    app.close()
    app.review_server.close()


def test_composite_is_the_policys_observation(policy_server, browser):
    """The Overlay tab's composite, fetched from the page, equals the env's first observation pixel for pixel
    (eval --obs-mode composited: the plate with the robot and the movable objects; the table from the plate)."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    root, url = policy_server
    page = open_page(browser, url)
    goto_tab(page, "Overlay")
    page.wait_for_selector("#overlay img", timeout=30_000)
    _, shown = img_pixels(page, url, "#overlay")
    env = Real2SimEnv(root, task="lift_cube", obs_mode="composited")
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    assert env.obs_mode == "composited"
    assert shown.shape == obs["image"].shape and (shown == obs["image"]).all(), np.abs(shown - obs["image"]).max()
    from PIL import Image

    plate = np.asarray(Image.open(root / "background" / "plate.png").convert("RGB"))
    assert (shown == plate).all(-1).mean() > 0.5  # mostly plate: the table is not pasted over it
    page.screenshot(path=str(ARTIFACTS / "policy_composite.png"), full_page=True)
    # the difference view: a colour scale and the PSNR of the composite against the photo
    old = page.locator("#overlay img").first.get_attribute("src")
    page.locator("#overlay_mode").get_by_text("difference", exact=True).click()
    wait_new_src(page, "#overlay", old)
    t0 = time.time()
    while "PSNR" not in page.locator("#overlay_note").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert "PSNR" in page.locator("#overlay_note").inner_text()
    page.screenshot(path=str(ARTIFACTS / "policy_difference.png"), full_page=True)
    page.close()


def test_poor_stage_shows_on_overview(policy_server, browser):
    root, url = policy_server
    page = open_page(browser, url)
    goto_tab(page, "Overview")
    t0 = time.time()
    while "Poor" not in page.locator("#summary").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    summary = " ".join(page.locator("#summary").inner_text().split())
    assert "Poor" in summary and "table: spread_mm 23.4 misses the bar" in summary and "not applied" in summary, summary
    stages = page.locator("#stages").inner_text()
    assert "POOR" in stages and "<= 10" in stages, stages
    page.screenshot(path=str(ARTIFACTS / "overview_poor.png"), full_page=True)
    page.close()


def test_3d_scene_settle_and_rollout_playback(policy_server, browser):
    root, url = policy_server
    page = open_page(browser, url)
    goto_tab(page, "3D scene & rollouts")
    page.wait_for_selector("#scene_view canvas", timeout=60_000)  # the WebGL view of the whole scene started
    t0 = time.time()
    while "frustum" not in page.locator("#scene_note").inner_text() and time.time() - t0 < 30:
        time.sleep(0.2)
    note = page.locator("#scene_note").inner_text()
    assert "6 objects with collision geometry" in note and "robot widowx250s" in note and "1 camera frustum" in note
    import trimesh

    glb = trimesh.load(root / "reports" / "scene.glb")
    assert {"cube", "robot", "camera_main", "cube_collision_000"} <= set(glb.graph.nodes), sorted(glb.graph.nodes)
    time.sleep(2)
    page.screenshot(path=str(ARTIFACTS / "tab_scene3d.png"), full_page=True)
    # settle: the recipe drops its objects from 5 mm: after a second they rest 5 mm lower
    page.locator("#settle_btn").click()
    t0 = time.time()
    while "physics steps" not in page.locator("#settle_note").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert "largest move is 5.0 mm" in page.locator("#settle_note").inner_text()
    assert "cube" in page.locator("#settle_table").inner_text()
    page.wait_for_selector("#settle_image img", timeout=30_000)
    # rollout playback: the recorded episode plays in the page (converted to WebM for the browser)
    assert page.locator("#rollout_select input").input_value() == "results/review/videos/scripted_lift_cube_mujoco_0.mp4"
    page.wait_for_selector("#rollout_video video", timeout=60_000)
    page.wait_for_function("() => { const v = document.querySelector('#rollout_video video'); "
                           "return v && v.readyState >= 2 && v.videoWidth === 640; }", timeout=60_000)
    page.evaluate("""async () => { const v = document.querySelector('#rollout_video video');
        v.muted = true; await v.play(); }""")
    # a loaded machine (CI runs browser tests next to MuJoCo rollouts) decodes slowly, so the test asks that the
    # clock moves at all, then that a late frame decodes after a seek: both prove the episode plays, neither
    # depends on how fast this machine is
    page.wait_for_function("() => document.querySelector('#rollout_video video').currentTime > 0", timeout=60_000)
    target = page.evaluate("""async () => { const v = document.querySelector('#rollout_video video');
        v.pause();
        const target = v.duration * 0.8;
        await new Promise((ok) => { v.addEventListener('seeked', ok, {once: true}); v.currentTime = target; });
        return target; }""")
    # 'seeked' may fire before the frame there is decoded (readyState 1 on a loaded machine): wait for the frame
    page.wait_for_function("() => document.querySelector('#rollout_video video').readyState >= 2", timeout=60_000)
    state = page.evaluate("""() => { const v = document.querySelector('#rollout_video video');
        return {error: v.error ? v.error.code : null, length: v.duration, at: v.currentTime, ready: v.readyState}; }""")
    state["target"] = target
    assert state["error"] is None and state["length"] > 1.0, state  # the episode's length in the video, not a timing
    assert abs(state["at"] - state["target"]) < 0.1 and state["ready"] >= 2, state
    page.screenshot(path=str(ARTIFACTS / "tab_rollout.png"), full_page=True)
    page.close()


def _iou_in(text: str, oid: str) -> float | None:
    import re

    m = re.search(rf"\b{oid} ([0-9.]+)", text.split("mask IoU", 1)[-1]) if "mask IoU" in text else None
    return float(m.group(1)) if m else None


def test_slider_drag_updates_the_live_iou(policy_server, browser):
    """The Objects tab's note gives the cube's mask IoU; nudging its x slider (arrow keys, 0.5 mm a step) lowers it
    as the edit lands."""
    root, url = policy_server
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    page.wait_for_selector("#object_preview img", timeout=30_000)
    page.locator("#object_select input").click()
    page.get_by_role("option", name="cube").click()
    t0 = time.time()
    while _iou_in(page.locator("#object_note").inner_text(), "cube") is None and time.time() - t0 < 30:
        time.sleep(0.2)
    before = _iou_in(page.locator("#object_note").inner_text(), "cube")
    assert before is not None and before > 0.99, page.locator("#object_note").inner_text()
    x0 = float(page.locator("#pose_x input[type=number]").input_value())
    applied_x = "Number(document.querySelector('#pose_text textarea').value.split(',')[0])"
    t0 = time.time()
    while time.time() - t0 < 90:
        # a loaded machine may still be answering the page load / the selection, whose late answer re-centres the
        # sliders: nudge again until an edit of >= 5 mm is applied (the exact-pose box shows the saved pose)
        page.locator("#pose_x input[type=range]").focus()
        for _ in range(16):  # 8 mm
            page.keyboard.press("ArrowRight")
        try:
            page.wait_for_function(f"() => Math.abs({applied_x} - {x0}) > 0.005", timeout=10_000)
            break
        except Exception:
            continue
    t0 = time.time()
    after = before
    while after > 0.95 and time.time() - t0 < 60:
        time.sleep(0.2)
        after = _iou_in(page.locator("#object_note").inner_text(), "cube") or after
    assert after < 0.95, (before, after, page.locator("#pose_x input[type=number]").input_value(),
                          page.locator("#pose_text textarea").input_value(), page.locator("#status").inner_text())
    page.screenshot(path=str(ARTIFACTS / "objects_live_iou.png"), full_page=True)
    # the Overview followed the edit without 'Refresh': the undo history lists it, the stages it made stale show
    goto_tab(page, "Overview")
    t0 = time.time()
    while "object cube" not in page.locator("#history").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert "object cube" in page.locator("#history").inner_text()
    assert "(no edits yet)" not in page.locator("#history").inner_text()
    assert "stale" in page.locator("#stages").inner_text()
    page.close()


def test_auth_required_when_set(tmp_path):
    from real2sim.apps.review.app import launch
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    root = tmp_path / "scene"
    bundle_from_recipe(builtin_recipe("tabletop"), root)
    app, url = launch(root, port=_free_port(), auth="alice:s3cret", block=False, quiet=True)
    try:
        url = url.rstrip("/")
        assert fetch(f"{url}/config")[0] == 401
        import http.cookiejar

        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        data = urllib.parse.urlencode({"username": "alice", "password": "wrong"}).encode()
        with pytest.raises(urllib.error.HTTPError):
            opener.open(f"{url}/login", data=data, timeout=10)
        data = urllib.parse.urlencode({"username": "alice", "password": "s3cret"}).encode()
        assert opener.open(f"{url}/login", data=data, timeout=10).status == 200
        assert opener.open(f"{url}/config", timeout=10).status == 200
    finally:
        app.close()
        app.review_server.close()


@pytest.fixture(scope="module")
def scan_server(tmp_path_factory):
    """A tabletop bundle with an object from `real2sim scan` (a synthetic can, 12 views; add-object --scan)."""
    pytest.importorskip("open3d")
    pytest.importorskip("skimage")
    from conftest import give_simple_collision

    from real2sim.apps.review.app import launch
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe
    from real2sim.pipeline.scan import ScanConfig, add_scanned_object, scan_object
    from real2sim.scan.synthetic import SyntheticScanConfig, write_synthetic_scan

    tmp = tmp_path_factory.mktemp("scanned")
    write_synthetic_scan(tmp / "cap", SyntheticScanConfig(shape="can", views=12, width=320, height=240, heldout=0,
                                                          supersample=1))
    scan_object(tmp / "cap", tmp / "can_obj", ScanConfig(resolution=48, face_budget=3000, texture_size=128,
                                                         collision=False,
                                                         reference=str(tmp / "cap" / "truth" / "reference.obj")))
    root = tmp / "scene"
    b = bundle_from_recipe(builtin_recipe("tabletop"), root)
    add_scanned_object(b, "scanned_can", tmp / "can_obj", position=[0.12, 0.1, 0.0])
    export_bundle(give_simple_collision(b), engines=("mjcf",))
    app, url = launch(root, port=_free_port(), block=False, quiet=True)
    yield root, url.rstrip("/")
    app.close()
    app.review_server.close()


def test_scanned_object_shows_its_turntable_next_to_its_frames(scan_server, browser):
    """Issue 18 item 5: selecting a scanned object on the Objects tab shows the scan's panel (turntable of the mesh,
    capture frames with their masks, frames used and mask confidence, Chamfer against the reference); selecting an
    object that was not scanned hides it."""
    from PIL import Image

    root, url = scan_server
    report = json.loads((root / "objects" / "scanned_can" / "scan" / "report.json").read_text())
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    panel = page.locator("#scan_panel")
    assert not panel.is_visible()  # the first object (the cube) was not scanned
    page.locator("#object_select input").first.click()
    page.get_by_role("option", name="scanned_can").click()
    page.wait_for_selector("#scan_note", state="visible", timeout=30_000)
    t0 = time.time()
    while "frames used" not in page.locator("#scan_note").inner_text() and time.time() - t0 < 60:
        time.sleep(0.2)
    note = page.locator("#scan_note").inner_text()
    assert f"{len(report['frames_used'])} of 12 frames used" in note
    assert f"Chamfer {report['grade']['chamfer_mm']:.2f} mm" in note and "confidence" in note
    for sel, name in (("#scan_turntable", "turntable.png"), ("#scan_frames", "frames.png")):
        t0 = time.time()
        while not page.locator(f"{sel} img").count() and time.time() - t0 < 60:
            time.sleep(0.2)
        _, px = img_pixels(page, url, sel)
        want = np.asarray(Image.open(root / "objects" / "scanned_can" / "scan" / name).convert("RGB")).astype(int)
        assert px.shape == want.shape and np.abs(px - want).max() <= 2, sel  # the scan's own picture, served
    page.screenshot(path=str(ARTIFACTS / "objects_scanned.png"), full_page=True)
    page.locator("#object_select input").first.click()
    page.get_by_role("option", name="cube").click()
    t0 = time.time()
    while panel.is_visible() and time.time() - t0 < 60:
        time.sleep(0.2)
    assert not panel.is_visible()
    page.close()


@pytest.fixture(scope="module")
def joints_server(tmp_path_factory):
    """A two-link arm with a camera on its hand, and a drawer box in front of it (tests/articulated.py)."""
    from articulated import robot_and_drawer_bundle

    from real2sim.apps.review.app import launch

    root = robot_and_drawer_bundle(tmp_path_factory.mktemp("joints")).root
    app, url = launch(root, port=_free_port(), block=False, quiet=True)
    yield root, url.rstrip("/")
    app.close()
    app.review_server.close()


def test_drawer_slider_and_mounted_camera_view(joints_server, browser):
    """The drawer's slider (m, its limits) moves the drawer in the live overlay and saves it to scene.json; undo
    brings it back; the arm's mounted camera shows its render (no plate)."""
    root, url = joints_server
    drawer = lambda: json.loads((root / "scene.json").read_text())["objects"]["cabinet"]["articulation"]["joint_positions"]["drawer_joint"]  # noqa: E731
    page = open_page(browser, url)
    goto_tab(page, "Objects")
    page.wait_for_selector("#object_preview img", timeout=30_000)
    assert "drawer_joint (m, prismatic, 0 to 0.15 m)" in page.locator("#joint_cabinet__drawer_joint").inner_text()
    src0, img0 = img_pixels(page, url, "#object_preview")
    enter_number(page, "#joint_cabinet__drawer_joint input[type=number]", "0.12")
    status_text(page, "object cabinet joint drawer_joint = 0.12 m")
    wait_new_src(page, "#object_preview", src0)
    _, img1 = img_pixels(page, url, "#object_preview")
    assert (np.abs(img1 - img0).max(-1) > 30).sum() > 300, "the drawer did not move in the preview"
    assert drawer() == pytest.approx(0.12)
    page.screenshot(path=str(ARTIFACTS / "objects_joints.png"), full_page=True)
    # typed beyond the limits: refused naming the joint and its limits, nothing saved, the slider back at 0.12
    box = page.locator("#joint_cabinet__drawer_joint input[type=number]")
    box.fill("0.3")
    box.press("Enter")
    status_text(page, "joint 'drawer_joint' = 0.3 m is outside its limits [0, 0.15] m")
    assert drawer() == pytest.approx(0.12)
    t0 = time.time()
    while box.input_value() != "0.12" and time.time() - t0 < 60:
        time.sleep(0.1)
    assert box.input_value() == "0.12"
    page.locator("#undo").click()
    status_text(page, "undid: object cabinet joints")
    assert drawer() == pytest.approx(0.02)
    goto_tab(page, "Camera & robot")
    page.wait_for_selector("#mounted_view img", timeout=30_000)
    _, wrist = img_pixels(page, url, "#mounted_view")
    assert wrist.shape == (120, 160, 3) and wrist.std() > 10, "the mounted camera's view is blank"
    assert "render only" in page.locator("#mounted_note").inner_text()
    assert "waist (deg, revolute" in page.locator("#joint_robot__waist").inner_text()
    page.screenshot(path=str(ARTIFACTS / "camera_robot_joints.png"), full_page=True)
    page.close()
