"""quality.png: top / front / side silhouettes of the mesh (grey) with the collision pieces over it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

PANEL = 256
MARGIN = 12
TEXT_H = 64
VIEWS = (("top (x, y)", 0, 1), ("front (x, z)", 0, 2), ("side (y, z)", 1, 2))
COLOURS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
           (240, 50, 230), (210, 245, 60), (0, 128, 128), (170, 110, 40), (128, 0, 0), (0, 0, 128)]


def _outline(points2d: np.ndarray) -> np.ndarray:
    from scipy.spatial import ConvexHull

    try:
        return points2d[ConvexHull(points2d).vertices]
    except Exception:  # flat in this view: nothing to fill
        return points2d[:0]


def quality_picture(mesh, pieces: list, report: dict, path: Path) -> Path:
    """Draw ``mesh`` (may be None) and convex ``pieces`` (trimesh meshes) in three orthographic views."""
    from PIL import Image, ImageDraw

    all_pts = [np.asarray(p.vertices) for p in pieces] + ([np.asarray(mesh.vertices)] if mesh is not None else [])
    pts = np.concatenate(all_pts)
    lo, hi = pts.min(0), pts.max(0)
    span = float(np.ptp(pts, axis=0).max()) or 1.0
    s = (PANEL - 2 * MARGIN) / span
    width, height = 3 * PANEL, PANEL + TEXT_H
    img = Image.new("RGB", (width, height), (255, 255, 255))
    for vi, (title, a, b) in enumerate(VIEWS):
        ox = vi * PANEL
        centre = (lo + hi) / 2.0

        def to_px(p, a=a, b=b, ox=ox, centre=centre):
            x = ox + PANEL / 2 + (p[:, a] - centre[a]) * s
            y = PANEL / 2 - (p[:, b] - centre[b]) * s  # image y points down
            return np.column_stack([x, y])

        base = Image.new("RGB", (PANEL, PANEL), (255, 255, 255))
        img.paste(base, (ox, 0))
        draw = ImageDraw.Draw(img)
        if mesh is not None:
            tri = to_px(np.asarray(mesh.vertices, float))[np.asarray(mesh.faces)]
            for t in tri:
                draw.polygon([tuple(q) for q in t], fill=(170, 170, 170))
        overlay = Image.new("RGBA", img.size, (0, 0, 0, 0))
        od = ImageDraw.Draw(overlay)
        for i, p in enumerate(pieces):
            ring = _outline(to_px(np.asarray(p.vertices, float)))
            if len(ring) >= 3:
                col = COLOURS[i % len(COLOURS)]
                od.polygon([tuple(q) for q in ring], fill=col + (60,), outline=col + (255,))
        img = Image.alpha_composite(img.convert("RGBA"), overlay).convert("RGB")
        draw = ImageDraw.Draw(img)
        draw.text((ox + 4, 2), title, fill=(0, 0, 0))
        draw.line([(ox + PANEL - 1, 0), (ox + PANEL - 1, PANEL)], fill=(200, 200, 200))
    draw = ImageDraw.Draw(img)
    lines = [
        f"{report.get('name', '')}  kind={report.get('kind', '?')}  method={report.get('method', '?')}  "
        f"pieces={report.get('hull_count', len(pieces))}",  # no timings: same inputs, same bytes
        f"occupancy IoU {report.get('occupancy_iou', float('nan')):.3f}   volume ratio {report.get('volume_ratio', float('nan')):.3f}"
        f"   Hausdorff / diag {report.get('hausdorff_rel', float('nan')):.4f}",
        "grey: mesh   coloured: collision pieces   repair: " + "; ".join(report.get("repair", []))[:80],
    ]
    for i, line in enumerate(lines):
        draw.text((6, PANEL + 6 + 18 * i), line, fill=(0, 0, 0))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path
