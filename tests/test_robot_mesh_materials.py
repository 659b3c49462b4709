"""A robot's own mesh materials reach every engine: a two-link robot written here whose upper arm is a textured OBJ
(red lower half, blue upper half, one texture) and whose forearm is an OBJ with two untextured materials (green and
yellow halves: two MJCF geoms); exported to MJCF, SAPIEN and USD, reloaded, rendered unlit, each half shows its
colour. And the Google Robot's textured meshes (skipped without ../shared/data)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from robotfiles import two_link_urdf, write_two_link_robot  # noqa: E402

RED, BLUE, GREEN, YELLOW = (0.9, 0.1, 0.1), (0.1, 0.2, 0.9), (0.1, 0.8, 0.2), (0.9, 0.85, 0.1)


def _boxes_obj(halves, uvs=None, materials=None) -> str:
    """OBJ text of boxes ``halves`` [(lo (3,), hi (3,))]; each box's vertices get one UV (``uvs``) or the box its own
    ``usemtl`` (``materials``)."""
    import trimesh

    lines, n = [], 0
    if materials:
        lines.append("mtllib parts.mtl")
    for k, (lo, hi) in enumerate(halves):
        b = trimesh.creation.box(bounds=[lo, hi])
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in b.vertices]
        if uvs:
            lines += [f"vt {uvs[k][0]} {uvs[k][1]}"] * len(b.vertices)
        if materials:
            lines.append(f"usemtl {materials[k]}")
        for f in b.faces + 1 + n:
            lines.append("f " + " ".join(f"{i}/{i}" if uvs else str(i) for i in f))
        n += len(b.vertices)
    return "\n".join(lines) + "\n"


@pytest.fixture
def painted_robot(tmp_path, monkeypatch):
    """The two-link robot (definition file) with a textured upper arm and a two-material forearm."""
    from PIL import Image

    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "robot"
    urdf = two_link_urdf()
    # the upper arm's and forearm's box visuals become the painted meshes (same shapes, in the link frame)
    urdf = urdf.replace('<visual><origin xyz="0 0 0.15"/><geometry><mesh filename="package://twolink/meshes/box.obj" '
                        'scale="0.05 0.05 0.3"/></geometry></visual>',
                        '<visual><geometry><mesh filename="package://twolink/meshes/upper.obj"/></geometry></visual>')
    urdf = urdf.replace('<visual><origin xyz="0 0 0.125"/><geometry><mesh filename="package://twolink/meshes/box.obj" '
                        'scale="0.04 0.04 0.25"/></geometry></visual>',
                        '<visual><geometry><mesh filename="package://twolink/meshes/forearm.obj"/></geometry></visual>')
    assert urdf.count("upper.obj") == 1 and urdf.count("forearm.obj") == 1
    definition = write_two_link_robot(folder, fmt="json", urdf_text=urdf,
                                      appearance_default=[0.5, 0.5, 0.5, 1.0], appearance={})
    meshes = folder / "meshes"
    tex = np.zeros((32, 32, 3), np.uint8)
    tex[:, :16] = np.round(np.array(RED) * 255)
    tex[:, 16:] = np.round(np.array(BLUE) * 255)
    Image.fromarray(tex).save(meshes / "upper_diffuse.png")
    (meshes / "upper.mtl").write_text("newmtl paint\nKd 1 1 1\nmap_Kd upper_diffuse.png\n")
    upper = _boxes_obj([((-0.025, -0.025, 0.0), (0.025, 0.025, 0.15)), ((-0.025, -0.025, 0.15), (0.025, 0.025, 0.3))],
                       uvs=[(0.25, 0.5), (0.75, 0.5)])
    (meshes / "upper.obj").write_text("mtllib upper.mtl\nusemtl paint\n" + upper)
    (meshes / "parts.mtl").write_text(f"newmtl green\nKd {' '.join(map(str, GREEN))}\n\n"
                                      f"newmtl yellow\nKd {' '.join(map(str, YELLOW))}\n")
    (meshes / "forearm.obj").write_text(_boxes_obj([((-0.02, -0.02, 0.0), (0.02, 0.02, 0.125)),
                                                    ((-0.02, -0.02, 0.125), (0.02, 0.02, 0.25))],
                                                   materials=["green", "yellow"]))
    return definition


# (link, point in the link frame, expected colour)
PROBES = [("upper", (0.0, 0.0, 0.07), RED), ("upper", (0.0, 0.0, 0.23), BLUE),
          ("forearm", (0.0, 0.0, 0.06), GREEN), ("forearm", (0.0, 0.0, 0.19), YELLOW)]


def _bundle(definition, tmp_path):
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import CameraSpec
    from real2sim.engines.sandbox import robot_only_bundle

    b = robot_only_bundle(str(definition), tmp_path / "b")
    K = np.array([[400.0, 0, 159.5], [0, 400, 119.5], [0, 0, 1]])
    # the robot faces +x at its default pose (elbow and wrist bent about y): seen from the side (-y)
    cam = Camera(320, 240, K, look_at_opencv([0.25, -1.0, 0.45], [0.15, 0.0, 0.4]))
    b.manifest.cameras["main"] = CameraSpec.from_camera(cam)
    b.save()
    return b, cam


def _probe_pixels(link_pose, cam):
    """Pixel (x, y) of each probe point (link -> world pose function)."""
    out = []
    for link, p, rgb in PROBES:
        w = link_pose(link) @ np.array([*p, 1.0])
        uv = cam.project(w[None, :3])[0]
        out.append((int(round(uv[0])), int(round(uv[1])), rgb))
    return out


def _assert_colours(img, probes, what):
    img = np.asarray(img, np.float32)
    img = img / 255.0 if img.max() > 1.5 else img
    refs = np.array([RED, BLUE, GREEN, YELLOW, (0.5, 0.5, 0.5)])  # (grey: the flat colour the meshes used to get)
    for x, y, rgb in probes:
        c = np.median(img[y - 1:y + 2, x - 1:x + 2].reshape(-1, 3), 0)
        nearest = refs[np.argmin(np.linalg.norm(refs - c, axis=1))]
        assert np.allclose(nearest, rgb), f"{what}: pixel ({x}, {y}) is {np.round(c, 2)}, expected {rgb}"


def test_own_materials_split_per_part_and_drawn_by_the_stage_renderer(painted_robot, tmp_path):
    """The resolved URDF holds one visual per material (texture for the upper arm, two colours for the forearm); the
    toolkit's renderer (robot fitting, the appearance stage) draws them."""
    from real2sim.core.bundle import Bundle
    from real2sim.render.robot import load_robot_model, render_appearance
    from real2sim.robots.scene import link_poses, parse_urdf, robot_setup

    b, cam = _bundle(painted_robot, tmp_path)
    b = Bundle.load(b.root)
    rs = robot_setup(b.manifest.robot, b.root)
    links, joints, root = parse_urdf(rs.urdf)
    assert [t is not None for _, t in links["upper"].visual_materials] == [True]
    fore = links["forearm"].visual_materials
    assert len(fore) == 2 and all(t is None for _, t in fore)
    assert sorted(tuple(np.round(r[:3], 2)) for r, _ in fore) == sorted([GREEN, YELLOW])
    model = load_robot_model(b.manifest.robot, b.root)
    img, sil = render_appearance(model, cam, model.default_q, {})
    poses = link_poses(joints, root, dict(zip(model.joint_names, model.default_q)))
    _assert_colours(img, _probe_pixels(lambda n: model.base @ poses[n], cam), "stage renderer")
    # the hand (an STL: no material) keeps its flat colour
    assert sil.sum() > 500


@pytest.mark.render
@pytest.mark.parametrize("engine", ["mjcf", pytest.param("sapien", marks=pytest.mark.slow)])
def test_own_materials_render_in_the_engines(painted_robot, tmp_path, engine):
    """Export, reload, render unlit: each half of each painted link shows its colour (MJCF: the two-material forearm
    is two geoms with one material each)."""
    from real2sim.engines import get_exporter

    b, cam = _bundle(painted_robot, tmp_path)
    ex = get_exporter(engine)
    res = ex.export(b)
    if engine == "mjcf":
        root = ET.parse(res.main_file).getroot()
        body = [x for x in root.iter("body") if x.get("name") == "robot/forearm"][0]
        vis = [g for g in body.findall("geom") if g.get("class") == "robot_visual"]
        assert len(vis) == 2 and len({g.get("material") for g in vis}) == 2
        upper = [x for x in root.iter("body") if x.get("name") == "robot/upper"][0]
        (g,) = [g for g in upper.findall("geom") if g.get("class") == "robot_visual"]
        mat = [m for m in root.iter("material") if m.get("name") == g.get("material")][0]
        tfile = [t for t in root.iter("texture") if t.get("name") == mat.get("texture")][0].get("file")
        assert (res.main_file.parent / "textures" / tfile).is_file()
    else:
        scene = json.loads(res.main_file.read_text())
        urdf = res.main_file.parent / scene["robot"]["urdf"]
        link = [x for x in ET.parse(urdf).getroot().findall("link") if x.get("name") == "upper"][0]
        (mesh,) = [m for v in link.findall("visual") for m in v.iter("mesh")]
        obj = urdf.parent / mesh.get("filename")
        mtl = obj.parent / obj.read_text().splitlines()[0].split()[1]
        assert any(ln.startswith("map_Kd") for ln in mtl.read_text().splitlines())
    sc = ex.load(res.main_file.parent)
    try:
        sc.set_lighting(1.0, unlit=True)
        img = sc.render("main")
        _assert_colours(img, _probe_pixels(sc.link_pose, cam), engine)
    finally:
        sc.close()


def test_own_materials_in_usd_and_back_projected_textures_win(painted_robot, tmp_path):
    """USD: the upper arm's visual is bound to a UsdUVTexture of the mesh's texture (face-varying st), the forearm's
    two visuals carry the two colours; and a texture back-projected from frames (robot.textures) replaces the mesh's
    own in the export (precedence)."""
    pxr = pytest.importorskip("pxr")
    from PIL import Image

    from real2sim.core.bundle import Bundle
    from real2sim.core.objio import write_obj
    from real2sim.engines import get_exporter

    b, cam = _bundle(painted_robot, tmp_path)
    usd = get_exporter("usd").export(b).main_file
    get_exporter("usd").load(usd.parent).close()  # reloads
    stage = pxr.Usd.Stage.Open(str(usd))
    prims = {p.GetCustomDataByKey("real2sim:id"): p for p in stage.Traverse() if p.GetCustomDataByKey("real2sim:id")}
    vis = stage.GetPrimAtPath(prims["upper"].GetPath().AppendChild("Visual_0"))
    assert pxr.UsdGeom.PrimvarsAPI(vis).GetPrimvar("st").HasValue()
    mat = pxr.UsdShade.MaterialBindingAPI(vis).ComputeBoundMaterial()[0]
    shader = pxr.UsdShade.Shader(stage.GetPrimAtPath(mat.GetPath().AppendChild("DiffuseTexture")))
    tex = np.asarray(Image.open(usd.parent / shader.GetInput("file").Get().path).convert("RGB"), float) / 255
    assert np.allclose(tex[:, :16].mean((0, 1)), RED, atol=0.01) and np.allclose(tex[:, 16:].mean((0, 1)), BLUE, atol=0.01)
    cols = sorted(tuple(np.round(np.array(pxr.UsdGeom.Mesh(stage.GetPrimAtPath(
        prims["forearm"].GetPath().AppendChild(f"Visual_{i}"))).GetDisplayColorAttr().Get()[0]), 2)) for i in range(2))
    assert cols == sorted([GREEN, YELLOW])

    # a back-projected texture for the upper arm: it replaces the mesh's own (one plain white texture)
    d = b.root / "robot" / "textures"
    d.mkdir(parents=True)
    Image.fromarray(np.full((8, 8, 3), 255, np.uint8)).save(d / "upper_white.png")
    write_obj(d / "upper.obj", [[0, 0, 0], [0.05, 0, 0], [0, 0.05, 0], [0, 0, 0.3]],
              [[0, 2, 1], [0, 1, 3], [1, 2, 3], [2, 0, 3]], [[0, 0], [1, 0], [0, 1], [1, 1]])
    b.manifest.robot.textures = {"upper": {"mesh": "robot/textures/upper.obj", "texture": "robot/textures/upper_white.png"}}
    b.save()
    b = Bundle.load(b.root)
    mj = get_exporter("mjcf").export(b).main_file
    root = ET.parse(mj).getroot()
    upper = [x for x in root.iter("body") if x.get("name") == "robot/upper"][0]
    (g,) = [g for g in upper.findall("geom") if g.get("class") == "robot_visual"]
    assert g.get("material") == "robot/mat_upper"
    m = [x for x in root.iter("material") if x.get("name") == "robot/mat_upper"][0]
    tfile = [t for t in root.iter("texture") if t.get("name") == m.get("texture")][0].get("file")
    assert (mj.parent / "textures" / tfile).read_bytes() == (d / "upper_white.png").read_bytes()


@pytest.fixture
def google(google_robot_description):
    return "google_robot"


@pytest.mark.render
def test_google_robot_exports_carry_its_textures(google, tmp_path):
    """MJCF, SAPIEN and USD exports of the Google Robot reference its diffuse textures, and MuJoCo draws them: the
    robot region rendered unlit has many distinct colours (flat colours: one per link)."""
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.imaging import psnr
    from real2sim.core.manifest import CameraSpec
    from real2sim.engines import get_exporter
    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.render.robot import load_robot_model, render_appearance, render_links
    from real2sim.robots.scene import robot_setup

    b = robot_only_bundle(google, tmp_path / "g")
    K = np.array([[250.0, 0, 159.5], [0, 250, 119.5], [0, 0, 1]])
    cam = Camera(320, 240, K, look_at_opencv([1.3, -0.9, 1.3], [0.1, 0, 0.75]))
    b.manifest.cameras["main"] = CameraSpec.from_camera(cam)
    b.save()
    # the toolkit's own renders: the meshes' materials, and the flat colours they replace
    model = load_robot_model(b.manifest.robot, b.root)
    rs = robot_setup(b.manifest.robot, b.root)
    own, sil = render_appearance(model, cam, model.default_q, {})
    flat, _ = render_links(model, cam, model.default_q, {n: rs.robot.link_rgba(n, rs.appearance) for n in model.links})
    mj = get_exporter("mjcf").export(b).main_file
    root = ET.parse(mj).getroot()
    textures = {t.get("name") for t in root.iter("texture") if t.get("name", "").startswith("robot/")}
    textured_geoms = [g for g in root.iter("geom") if g.get("class") == "robot_visual" and
                      any(m.get("name") == g.get("material") and m.get("texture") in textures
                          for m in root.iter("material"))]
    assert len(textures) >= 4 and len(textured_geoms) >= 15, (len(textures), len(textured_geoms))
    sc = get_exporter("mjcf").load(mj.parent)
    try:
        sc.set_lighting(1.0, unlit=True)
        img, mask = sc.render("main"), sc.robot_mask("main")
    finally:
        sc.close()
    distinct = len(np.unique(img[mask] // 8, axis=0))
    u = img.astype(np.float32) / 255
    region = mask & sil
    p_own, p_flat = psnr(own, u, region), psnr(flat, u, region)
    print(f"Google Robot, MuJoCo unlit: {distinct} distinct colours over {int(mask.sum())} robot pixels; robot-region "
          f"PSNR against the toolkit's render with the meshes' materials {p_own:.1f} dB, with flat colours {p_flat:.1f} dB")
    assert mask.sum() > 2000 and distinct > 60
    assert p_own > p_flat + 3.0  # MuJoCo draws the meshes' textures (measured 22.6 vs 18.0 dB here)

    sp = get_exporter("sapien").export(b).main_file
    urdf = sp.parent / json.loads(sp.read_text())["robot"]["urdf"]
    maps = set()
    for mesh in ET.parse(urdf).getroot().iter("mesh"):
        obj = urdf.parent / mesh.get("filename")
        first = obj.read_text(errors="replace").splitlines()[:1]
        if first and first[0].startswith("mtllib"):
            mtl = (obj.parent / first[0].split()[1]).read_text()
            maps |= {ln.split()[1] for ln in mtl.splitlines() if ln.startswith("map_Kd")}
    assert len(maps) >= 4 and all((urdf.parent / "meshes" / t).is_file() for t in maps)

    pxr = pytest.importorskip("pxr")
    usd = get_exporter("usd").export(b).main_file
    stage = pxr.Usd.Stage.Open(str(usd))
    files = {pxr.UsdShade.Shader(p).GetInput("file").Get().path for p in stage.Traverse()
             if p.GetName() == "DiffuseTexture"}
    assert len(files) >= 4 and all((usd.parent / f).is_file() for f in files)


def test_mesh_materials_false_keeps_flat_colours(painted_robot, tmp_path):
    """A definition with ``mesh_materials = false``: no material parts, every link in its flat colour (the MJCF has
    no robot texture, the forearm one geom); a non-boolean value is refused naming the field."""
    from real2sim.core.errors import RobotError
    from real2sim.engines import get_exporter
    from real2sim.robots.robotfile import load_robot_file
    from real2sim.robots.scene import parse_urdf, robot_setup

    d = json.loads(painted_robot.read_text())
    painted_robot.write_text(json.dumps({**d, "mesh_materials": "no"}))
    with pytest.raises(RobotError, match="mesh_materials"):
        load_robot_file(painted_robot)
    painted_robot.write_text(json.dumps({**d, "mesh_materials": False}))
    b, cam = _bundle(painted_robot, tmp_path)
    links, _, _ = parse_urdf(robot_setup(b.manifest.robot, b.root).urdf)
    assert all(rgba is None for link in links.values() for rgba, _ in link.visual_materials)
    root = ET.parse(get_exporter("mjcf").export(b).main_file).getroot()
    assert not [t for t in root.iter("texture") if t.get("name", "").startswith("robot/")]
    body = [x for x in root.iter("body") if x.get("name") == "robot/forearm"][0]
    assert len([g for g in body.findall("geom") if g.get("class") == "robot_visual"]) == 1
