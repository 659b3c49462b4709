"""Global pose search (every resting pose x yaw, or SO(3)) and the honest alignment status.

Truth is independent of the code under test: poses come from trimesh's resting poses, masks from the exact
CPU silhouette (real2sim.render.silhouette, no GL), IoU from tests/reference.py, ADD-S from scipy here."""
from __future__ import annotations

import numpy as np
import pytest

from real2sim.core.camera import Camera
from real2sim.core.geometry import look_at_opencv, transform_points
from real2sim.core.views import View


def _camera() -> Camera:
    """Bridge-like: 640x480, fx 624, 0.45 m from the table, looking down ~50 degrees."""
    K = np.array([[623.588, 0, 319.5], [0, 623.588, 239.5], [0, 0, 1]])
    return Camera(640, 480, K, look_at_opencv([-0.05, -0.32, 0.36], [0.0, 0.02, 0.0]))


def _resting(v, f):
    """trimesh's resting poses, most probable first: [(4x4, probability)]."""
    import trimesh

    Ts, p = trimesh.Trimesh(v, f).convex_hull.compute_stable_poses(n_samples=1, threshold=0.0)
    order = np.argsort(-np.asarray(p), kind="stable")
    return [(np.asarray(Ts[i], float), float(p[i])) for i in order]


def _placed(v, T_rest, yaw, xy=(0.02, 0.03)):
    """``T_rest`` turned by ``yaw`` and moved so the object rests on z = 0 with its box centre over ``xy``."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ T_rest[:3, :3]
    w = v @ R.T
    T = np.eye(4)
    T[:3, :3] = R
    mid = (w.min(0) + w.max(0)) / 2
    T[:3, 3] = [xy[0] - mid[0], xy[1] - mid[1], -w[:, 2].min()]
    return T


def _add_s(v, Ta, Tb) -> float:
    from scipy.spatial import cKDTree

    return float(cKDTree(transform_points(Tb, v)).query(transform_points(Ta, v))[0].mean())


def _mask(cam, v, f, T):
    from real2sim.render.silhouette import silhouette

    return silhouette(cam, transform_points(T, v), f)


def _off(T, dist=0.015, deg=15.0):
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    T0 = T.copy()
    T0[:3, 3] += dist * np.array([np.cos(1.0), np.sin(1.0), 0.0])
    T0[:3, :3] = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ T[:3, :3]
    return T0


def test_carrot_found_in_a_resting_pose_beyond_the_three_most_probable():
    """The issue's carrot: an elongated, bent root resting in its 5th most probable pose. Only three hypotheses
    (the old search) cannot reach it; the search over every resting pose finds it from no start at all."""
    from reference import ref_iou

    from real2sim.demos.shapes import carrot
    from real2sim.render.align import AlignConfig, align_pose

    v, f = carrot()
    rest = _resting(v, f)
    assert len(rest) >= 5
    T = _placed(v, rest[4][0], yaw=2.2)
    cam = _camera()
    mask = _mask(cam, v, f, T)
    res = align_pose(v, f, [View(cam, mask)], None, 0.0, AlignConfig(init="search"))
    sil = _mask(cam, v, f, res.pose)
    print(f"carrot (resting pose 5/{len(rest)}, p={rest[4][1]:.3f}): ADD-S {_add_s(v, res.pose, T) * 1e3:.2f} mm, "
          f"IoU {ref_iou(sil, mask):.4f}, search {res.search}")
    assert _add_s(v, res.pose, T) <= 0.003
    assert ref_iou(sil, mask) >= 0.9
    assert res.status == "aligned"
    assert len(res.search["resting_poses"]) >= 5
    # it rests on the side trimesh ranks 5th: the object-frame direction pointing up is rank 5's, none of the top 3's
    up = res.pose[2, :3]
    assert up @ rest[4][0][2, :3] > 0.999
    assert all(up @ R[2, :3] < 0.99 for R, _ in rest[:3])
    # and each of the three most probable resting poses, at its best turn, leaves the silhouette poor
    for R, _ in rest[:3]:
        best = max((align_pose(v, f, [View(cam, mask)], _placed(v, R, yaw, (0.02, 0.03)), 0.0,
                               AlignConfig(init="bundle", polish_yaw_deg=0)) for yaw in np.radians([0, 90, 180, 270])),
                   key=lambda r: r.mean_iou)
        assert best.status == "poor" or _add_s(v, best.pose, T) > 0.003


@pytest.mark.parametrize("shape", ["carrot", "plate", "can", "mug", "wedge"])
def test_every_shape_from_no_start_and_from_a_rough_start(shape):
    """Procedural shapes (elongated, flat, symmetric, with a handle, sponge-like) resting in their least probable
    pose above 1 %: from no start and from 1.5 cm / 15 deg off, ADD-S <= 3 mm and silhouette IoU >= 0.9."""
    from reference import ref_iou

    from real2sim.demos.shapes import make_shape
    from real2sim.render.align import AlignConfig, align_pose

    v, f = make_shape(shape)
    rest = [r for r in _resting(v, f) if r[1] >= 0.01]
    T = _placed(v, rest[-1][0], yaw=0.9, xy=(-0.01, 0.04))
    cam = _camera()
    mask = _mask(cam, v, f, T)
    for start in (None, _off(T)):
        res = align_pose(v, f, [View(cam, mask)], start, 0.0, AlignConfig())
        iou = ref_iou(_mask(cam, v, f, res.pose), mask)
        err = _add_s(v, res.pose, T)
        print(f"{shape} from {'no start' if start is None else '1.5 cm / 15 deg'}: ADD-S {err * 1e3:.2f} mm, IoU "
              f"{iou:.4f}, {res.status}, {res.seconds:.2f} s")
        assert err <= 0.003 and iou >= 0.9 and res.status == "aligned", (shape, start is None, err, iou, res.message)


def test_half_mask_is_reported_poor_with_its_number():
    """A deliberately wrong mask (the object's left half) is not 'aligned', whatever the start."""
    from real2sim.demos.shapes import wedge
    from real2sim.render.align import AlignConfig, align_pose

    v, f = wedge()
    T = _placed(v, _resting(v, f)[0][0], yaw=0.4)
    cam = _camera()
    mask = _mask(cam, v, f, T)
    xs = np.nonzero(mask)[1]
    half = mask.copy()
    half[:, int(np.median(xs)):] = False
    for start in (T, None):
        res = align_pose(v, f, [View(cam, half)], start, 0.0, AlignConfig())
        assert res.status == "poor", (res.status, res.mean_iou, res.contour_px)
        assert "IoU" in res.message and f"{res.mean_iou:.3f}" in res.message
    # the same object with its whole mask is aligned (the rule is not simply strict)
    assert align_pose(v, f, [View(cam, mask)], T, 0.0, AlignConfig()).status == "aligned"


def test_resting_poses_merge_by_symmetry():
    """Hypotheses scale with the shape's symmetry: a can's 48 side facets are one resting pose; an upright can
    needs one yaw (continuous symmetry), a cube a quarter turn, a mug (handle) the whole turn."""
    from real2sim.demos.shapes import can, carrot, mug
    from real2sim.render.pose_search import resting_poses, symmetry_order

    v, f = can()
    rest = resting_poses(v, f, 0.001, 48, 0.01)
    assert len(_resting(v, f)) > 40 and len(rest) == 2
    upright = next(r for r in rest if abs(r.rotation[2] @ [0, 0, 1.0]) > 0.99)
    assert upright.order == 0
    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (0, 2)], float) * 0.015
    assert symmetry_order(cube - [0, 0, 0], 1e-4) == 4
    vm, fm = mug()
    assert all(r.order == 1 for r in resting_poses(vm, fm, 0.001, 48, 0.01))
    vc, fc = carrot()
    assert len(resting_poses(vc, fc, 0.001, 48, 0.01)) >= 5


def test_off_table_search_over_so3():
    """An object held in the air at an arbitrary orientation: dof='full' searches SO(3) from no start."""
    from reference import ref_iou

    from real2sim.demos.shapes import wedge
    from real2sim.render.align import AlignConfig, align_pose
    from real2sim.render.pose_search import so3_samples

    v, f = wedge()
    R = so3_samples(97)[41]
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = [0.01, 0.02, 0.12] - R @ v.mean(0)
    cam = _camera()
    mask = _mask(cam, v, f, T)
    res = align_pose(v, f, [View(cam, mask)], None, 0.0, AlignConfig(dof="full"))
    iou = ref_iou(_mask(cam, v, f, res.pose), mask)
    print(f"so3: ADD-S {_add_s(v, res.pose, T) * 1e3:.2f} mm, IoU {iou:.4f}, {res.search}")
    assert res.search["space"] == "so3"
    assert iou >= 0.9 and _add_s(v, res.pose, T) <= 0.003


@pytest.mark.render
def test_colour_decides_the_turn_of_a_symmetric_textured_object():
    """A can is the same silhouette at every turn about its axis; its label (half red, half blue) is not. With the
    texture and the frame, the search lands within a few degrees of the true turn."""
    pytest.importorskip("torch")
    from real2sim.demos.shapes import can
    from real2sim.render.align import AlignConfig, align_pose
    from real2sim.render.mesh import TexMesh
    from real2sim.render.pose_search import Appearance
    from real2sim.texture.backproject import render_textured

    v, f = can()
    u = (np.arctan2(v[:, 1], v[:, 0]) / (2 * np.pi)) % 1.0
    uv = np.stack([u, v[:, 2] / v[:, 2].max()], 1)
    tex = np.zeros((32, 64, 3), np.float32)
    tex[:, :32] = (0.85, 0.1, 0.1)
    tex[:, 32:] = (0.1, 0.2, 0.85)
    T = np.eye(4)
    yaw = np.radians(130.0)
    T[:3, :3] = [[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]]
    T[:3, 3] = [0.02, 0.03, 0.0]
    cam = _camera()
    img, cov = render_textured(cam, TexMesh(v, f, uv, f.copy()), T, tex)
    img = np.where(cov[..., None], img * 0.8 + 0.05, 0.5).astype(np.float32)  # another exposure than the texture
    res = align_pose(v, f, [View(cam, cov, img)], None, 0.0, AlignConfig(),
                     appearance=Appearance(uv, f.copy(), tex))
    R = res.pose[:3, :3] @ T[:3, :3].T
    turn = abs(np.degrees(np.arctan2(R[1, 0], R[0, 0])))
    print(f"textured can: turn error {turn:.1f} deg, IoU {res.mean_iou:.4f}, {res.status}")
    assert res.status == "aligned" and turn < 6.0


def test_a_silhouette_that_cannot_tell_two_poses_apart_is_reported_ambiguous():
    """An upright mug with its handle toward the camera: the handle lies inside the body's silhouette, so many turns
    explain the mask. The result says so (the other candidates are in the report for a person or a second view)."""
    from real2sim.core.geometry import make_pose
    from real2sim.demos.shapes import mug
    from real2sim.render.align import AlignConfig, align_pose

    v, f = mug()
    upright = next(T for T, _ in _resting(v, f) if abs(T[2, 2]) > 0.99)
    T = _placed(v, upright, np.radians(261.6))  # the camera looks along ~81.6 deg: handle pointing at it
    cam = _camera()
    res = align_pose(v, f, [View(cam, _mask(cam, v, f, T))], None, 0.0, AlignConfig())
    poses = [res.pose] + [make_pose(a["position"], a["quaternion_wxyz"]) for a in res.search.get("ambiguous", [])]
    errors = [_add_s(v, P, T) for P in poses]
    print(f"mug handle toward the camera: {res.message}; ADD-S of the candidates {np.round(np.array(errors) * 1e3, 2)} mm")
    assert res.mean_iou >= 0.99  # every candidate explains the mask...
    assert errors[0] > 0.003  # ...but the handle hides in front of the body: this one is not the truth
    assert "ambiguous" in res.message and len(poses) > 1  # and the result says it cannot tell
    assert all(a["add_s_mm"] > 3 for a in res.search["ambiguous"])
    # seen from the side, the same mug is not ambiguous
    T2 = _placed(v, upright, np.radians(261.6 - 90))
    res2 = align_pose(v, f, [View(cam, _mask(cam, v, f, T2))], None, 0.0, AlignConfig())
    assert _add_s(v, res2.pose, T2) <= 0.003 and "ambiguous" not in res2.message
