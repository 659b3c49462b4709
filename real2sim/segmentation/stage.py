"""Bundle stage ``segment``: prompts -> ``masks/<frame>/<entity>.png`` (+ propagation), reports, contact sheet."""
from __future__ import annotations

import logging

import numpy as np

from real2sim.core.bundle import atomic_write_json, hash_jsonable
from real2sim.core.imaging import read_rgb, write_mask, write_rgb
from real2sim.core.stages import files_hash, run_stage
from real2sim.segmentation.core import (
    Prompt,
    SegmentationError,
    resolve_backend,
    segment,
)
from real2sim.segmentation.propagate import (
    AT_PROMPTED_POSE,
    STATES,
    PropagateConfig,
    propagate_many,
)

log = logging.getLogger(__name__)


def contact_sheet(frames, masks_by_entity: dict[str, list[np.ndarray]], count: int = 8, tile_width: int = 240) -> np.ndarray:
    """Evenly spaced frames with every entity's mask tinted and outlined (uint8 RGB grid, 4 columns)."""
    import cv2

    palette = [(255, 0, 255), (0, 255, 255), (255, 255, 0), (255, 64, 64), (64, 255, 64), (64, 64, 255)]
    n = len(frames)
    idx = np.unique(np.linspace(0, n - 1, min(count, n)).round().astype(int))
    tiles = []
    for i in idx:
        img = frames[i].astype(np.float32)
        out = img.copy()
        outlines = []
        for k, (ent, ms) in enumerate(masks_by_entity.items()):
            m = ms[i]
            if m is None or not m.any():
                continue
            c = np.array(palette[k % len(palette)], np.float32)
            out[m] = img[m] * 0.55 + c * 0.45
            outlines.append((m, palette[k % len(palette)]))
        out = out.astype(np.uint8)
        for m, c in outlines:
            cnts, _ = cv2.findContours(m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
            cv2.drawContours(out, cnts, -1, c, 2)
        th = int(round(tile_width * out.shape[0] / out.shape[1]))
        t = cv2.resize(out, (tile_width, th), interpolation=cv2.INTER_AREA)
        cv2.putText(t, f"frame {i}", (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(t)
    cols = min(4, len(tiles))
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    sheet = np.vstack([np.hstack(tiles[r:r + cols]) for r in range(0, len(tiles), cols)])
    y = 4
    for k, ent in enumerate(masks_by_entity):  # legend
        cv2.putText(sheet, ent, (sheet.shape[1] - 160, y + 14), cv2.FONT_HERSHEY_SIMPLEX, 0.5, palette[k % len(palette)], 1, cv2.LINE_AA)
        y += 18
    return sheet


def segment_stage(bundle, prompts: dict[str, dict], backend: str = "auto", propagate_masks: bool = True,
                  propagate_config: PropagateConfig | None = None, force: bool = False):
    """Segment entities in a bundle's frames.

    ``prompts``: ``{entity: {"frame": 0, "prompt": Prompt | dict, "propagate": bool}}`` (``propagate`` optional,
    default ``propagate_masks``). The mask on the prompted frame comes from :func:`segment` (with the bundle plate
    when there is one); propagated, it is carried to every frame (:mod:`segmentation.propagate`), with each
    frame's state recorded in ``manifest.capture.mask_states``. Writes ``masks/<frame>/<entity>.png``, records them in ``manifest.capture.masks``, writes
    ``masks/prompts.json``, ``reports/segment.json`` (mask areas) and ``reports/segment.png`` (contact sheet).
    """
    cap = bundle.manifest.capture
    if not cap.frames:
        raise SegmentationError(f"{bundle.root}: no frames in the bundle; run 'real2sim init DIR --frames PATH' first")
    norm: dict[str, tuple[int, Prompt]] = {}
    carry: dict[str, bool] = {}
    for ent, spec in prompts.items():
        if not ent.replace("_", "").replace("-", "").isalnum():
            raise SegmentationError(f"entity id '{ent}' must be [A-Za-z0-9_-] (it becomes a file name)")
        p = spec["prompt"] if isinstance(spec.get("prompt"), Prompt) else Prompt.from_dict(spec.get("prompt", spec))
        f = int(spec.get("frame", 0))
        if not 0 <= f < len(cap.frames):
            raise SegmentationError(f"prompt for '{ent}' is on frame {f}; the bundle has frames 0..{len(cap.frames) - 1}")
        norm[ent] = (f, p)
        carry[ent] = bool(spec.get("propagate", propagate_masks))
    pcfg = propagate_config or PropagateConfig()
    rels = [fr.image for fr in cap.frames] + ([cap.plate] if cap.plate else [])
    config = {"prompts": {e: {"frame": f, "prompt": p.to_dict(), "propagate": carry[e]} for e, (f, p) in norm.items()},
              "backend": backend,
              "propagate": propagate_masks, "propagate_config": pcfg.__dict__}
    input_hash = hash_jsonable([files_hash(bundle, rels), config])

    def run():
        frames = np.stack([read_rgb(bundle.path(fr.image)) for fr in cap.frames])
        plate = read_rgb(bundle.path(cap.plate)) if cap.plate and bundle.path(cap.plate).is_file() else None
        used = resolve_backend(backend, plate)
        if backend == "auto" and plate is not None:
            used = "auto (difference, grabcut where the object is part of the plate)"
        outputs, areas, flags, per_entity, states = [], {}, {}, {}, {}
        prompted = {}
        for ent, (f, p) in norm.items():
            m0 = segment(frames[f], p, plate=plate, backend=backend)
            if not m0.any():
                raise SegmentationError(f"the prompt for '{ent}' on frame {f} gave an empty mask; click inside the object "
                                        "or give a box")
            prompted[ent] = m0
        moving = [e for e in norm if carry[e] and len(frames) > 1]
        if moving:
            tracks = propagate_many(frames, {e: prompted[e] for e in moving}, {e: norm[e][0] for e in moving}, pcfg)
            for ent, tr in tracks.items():
                per_entity[ent], states[ent] = tr.masks, tr.states()
        for ent, (f, _) in norm.items():
            if ent not in per_entity:
                per_entity[ent] = [prompted[ent] if i == f else None for i in range(len(frames))]
                states[ent] = ["prompt" if i == f else None for i in range(len(frames))]
        for ent, ms in per_entity.items():
            areas[ent] = [None if m is None else int(m.sum()) for m in ms]
            flags[ent] = [i for i, st in enumerate(states[ent]) if st == "lost"]
        for table in (cap.masks, cap.mask_states):  # an entity segmented again loses its old frames' masks
            for key in list(table):
                for ent in per_entity:
                    table[key].pop(ent, None)
                if not table[key]:
                    del table[key]
        for ent, ms in per_entity.items():
            for i, m in enumerate(ms):
                if m is None:
                    continue
                key = f"{i:06d}"
                path = bundle.path(f"masks/{key}/{ent}.png")
                write_mask(path, m)
                cap.masks.setdefault(key, {})[ent] = bundle.rel(path)
                cap.mask_states.setdefault(key, {})[ent] = states[ent][i]
                outputs.append(bundle.rel(path))
        atomic_write_json(bundle.path("masks/prompts.json"), config["prompts"])
        outputs.append("masks/prompts.json")
        pic = bundle.reports_dir() / "segment.png"
        write_rgb(pic, contact_sheet(frames, per_entity))
        h, w = frames.shape[1:3]
        summary = {e: {"frames": sum(a is not None for a in v), "area_px_min": min(a for a in v if a is not None),
                       "area_px_max": max(a for a in v if a is not None),
                       "area_frac_prompt_frame": round(v[norm[e][0]] / (h * w), 6), "flagged_frames": flags[e],
                       "states": {k: states[e].count(k) for k in STATES if k in states[e]},
                       "frames_at_prompted_pose": sum(st in AT_PROMPTED_POSE for st in states[e])}
                   for e, v in areas.items()}
        for e, s in summary.items():
            if s["flagged_frames"]:
                log.warning("segment: '%s' is lost by propagation in frames %s; prompt it again on one of them",
                            e, s["flagged_frames"])
            if s["area_frac_prompt_frame"] > 0.9:
                log.warning("segment: the mask of '%s' covers %.0f%% of the frame", e, 100 * s["area_frac_prompt_frame"])
        rep = bundle.write_report("segment", {"backend": used, "entities": summary, "areas_px": areas,
                                              "picture": bundle.rel(pic)})
        outputs += [rep, bundle.rel(pic)]
        metrics = {"backend": used, "entities": len(per_entity),
                   "masks": sum(a is not None for v in areas.values() for a in v), "flagged_frames": sum(len(v) for v in flags.values())}
        return outputs, metrics, f"{len(per_entity)} entities segmented with {used}"

    return run_stage(bundle, "segment", input_hash, config, run, force=force)[0]
