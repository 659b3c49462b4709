"""Bundle stage ``segment``: prompts -> ``masks/<frame>/<entity>.png`` (+ propagation), reports, contact sheet."""
from __future__ import annotations

import logging

import numpy as np

from real2sim.core.bundle import atomic_write_json, hash_jsonable
from real2sim.core.imaging import read_gray, read_rgb, write_mask, write_rgb
from real2sim.core.stages import StageRun, files_hash, run_stage
from real2sim.segmentation.core import (
    LOW_CONFIDENCE,
    Prompt,
    SegmentationError,
    check_exposure,
    resolve_backend,
    segment_result,
)
from real2sim.segmentation.propagate import (
    AT_PROMPTED_POSE,
    STATES,
    PropagateConfig,
    propagate_many,
)
from real2sim.segmentation.robot_fit import can_track, check_robot_prompt, robot_fit_stage

log = logging.getLogger(__name__)


def contact_sheet(frames, masks_by_entity: dict[str, list[np.ndarray]], count: int = 8, tile_width: int = 240,
                  legend: dict[str, str] | None = None) -> np.ndarray:
    """Evenly spaced frames with every entity's mask tinted and outlined (uint8 RGB grid, 4 columns) under a legend
    strip; ``legend`` adds text after an entity's name (its confidence), drawn red when it starts with ``"LOW"``."""
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
    return np.vstack([legend_strip(list(masks_by_entity), palette, legend or {}, sheet.shape[1]), sheet])


def legend_strip(entities: list[str], palette, legend: dict[str, str], width: int) -> np.ndarray:
    """A dark strip above the frames naming each entity in its colour, with its legend text (red when it starts
    with ``"LOW"``), laid out left to right and wrapped: it never covers a frame or its label."""
    import cv2

    font, row_h = cv2.FONT_HERSHEY_SIMPLEX, 20
    items = []
    for k, ent in enumerate(entities):
        text = legend.get(ent, "")
        w = cv2.getTextSize(ent, font, 0.5, 1)[0][0] + (cv2.getTextSize(text, font, 0.45, 1)[0][0] + 6 if text else 0)
        items.append((ent, text, palette[k % len(palette)], w + 18))
    rows, x = [[]], 6
    for it in items:
        if rows[-1] and x + it[3] > width:
            rows.append([])
            x = 6
        rows[-1].append((x, it))
        x += it[3]
    strip = np.full((row_h * len(rows) + 4, width, 3), 24, np.uint8)
    for r, row in enumerate(rows):
        y = row_h * r + 16
        for x, (ent, text, colour, _) in row:
            cv2.putText(strip, ent, (x, y), font, 0.5, colour, 1, cv2.LINE_AA)
            if text:
                tx = x + cv2.getTextSize(ent, font, 0.5, 1)[0][0] + 6
                col = (255, 40, 40) if text.startswith("LOW") else (255, 255, 255)
                cv2.putText(strip, text, (tx, y), font, 0.45, col, 1, cv2.LINE_AA)
    return strip


def bundle_plate(bundle) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The bundle's plate ``(h, w, 3) uint8`` (None without one) and where some frame showed it, ``(h, w) bool``
    from ``plate_confidence.png`` (> 0: not inpainted; None without a confidence map, e.g. a person-made plate)."""
    cap = bundle.manifest.capture
    if not cap.plate or not bundle.path(cap.plate).is_file():
        return None, None
    plate = read_rgb(bundle.path(cap.plate))
    conf = cap.plate_confidence
    if not conf or not bundle.path(conf).is_file():
        return plate, None
    known = read_gray(bundle.path(conf)) > 0
    return plate, (known if known.shape == plate.shape[:2] else None)


def segment_stage(bundle, prompts: dict[str, dict], backend: str = "auto", propagate_masks: bool = True,
                  propagate_config: PropagateConfig | None = None, force: bool = False) -> StageRun:
    """Segment entities in a bundle's frames.

    ``prompts``: ``{entity: {"frame": 0, "prompt": Prompt | dict, "propagate": bool}}`` (``propagate`` optional,
    default ``propagate_masks``). The mask on the prompted frame comes from :func:`segment` (with the bundle plate
    when there is one); propagated, it is carried to every frame (:mod:`segmentation.propagate`), with each
    frame's state recorded in ``manifest.capture.mask_states``. Writes ``masks/<frame>/<entity>.png``, records them in ``manifest.capture.masks``, writes
    ``masks/prompts.json``, ``reports/segment.json`` (mask areas, each prompted mask's confidence and whether it
    is low, the backend's numbers) and ``reports/segment.png`` (contact sheet, confidences in the legend). The cast
    shadow of an entity on its prompted frame, where the backend tells it apart, goes to
    ``masks/<frame>/<entity>_shadow.png`` (named in the report, not an entity mask).

    An entity named ``robot`` (or the bundle robot's name or alias) is the articulated robot, not a rigid object:
    it goes to the ``robot_fit`` stage (:mod:`segmentation.robot_fit`: joints fitted frame to frame, or rendered
    at recorded joints, or motion where the camera pose is unknown), after the objects, whose masks it leaves
    out (a one-frame bundle without a plate gets the prompt's mask, like an object's, until 'real2sim build' fits
    the robot against the plate). A robot prompt in a bundle without a robot is an error naming the entity. Returns the ``segment``
    stage run (:class:`StageRun`: record, ran; the ``robot_fit`` one when only the robot was prompted).
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
    robot = [e for e in norm if check_robot_prompt(bundle, e)]  # a robot prompt without a robot is refused here
    if len(robot) > 1:
        raise SegmentationError(f"prompts {robot} all name the robot; give one robot prompt")
    robot_prompt = norm.pop(robot[0]) if robot else None
    if robot_prompt is not None and not can_track(bundle):  # one frame, no plate: nothing to tell robot from table
        log.info("segment: one frame and no plate: the robot's mask is the prompt's for now; its joints are fitted "
                 "when the bundle has a plate ('real2sim build')")
        norm[robot[0]], carry[robot[0]] = robot_prompt, False
        robot_prompt = None
    rec = None
    if norm:
        rec = _segment_objects(bundle, norm, carry, backend, propagate_masks, propagate_config, force)
    if robot_prompt is not None:  # after the objects: their masks are left out of the robot's evidence
        rec = robot_fit_stage(bundle, None, force, prompt=robot_prompt)
    return rec


def _segment_objects(bundle, norm: dict, carry: dict, backend: str, propagate_masks: bool,
                     propagate_config: PropagateConfig | None, force: bool):
    """The objects' part of :func:`segment_stage` (the ``segment`` stage record)."""
    cap = bundle.manifest.capture
    pcfg = propagate_config or PropagateConfig()
    rels = [fr.image for fr in cap.frames] + [r for r in (cap.plate, cap.plate_confidence) if r]  # both shape masks
    config = {"prompts": {e: {"frame": f, "prompt": p.to_dict(), "propagate": carry[e]} for e, (f, p) in norm.items()},
              "backend": backend,
              "propagate": propagate_masks, "propagate_config": pcfg.__dict__}
    input_hash = hash_jsonable([files_hash(bundle, rels), config])

    def run():
        frames = _read_frames(bundle, cap)
        plate, known = bundle_plate(bundle)
        if plate is not None and plate.shape != frames.shape[1:]:
            raise SegmentationError(f"{bundle.path(cap.plate)}: the plate is {plate.shape[1]}x{plate.shape[0]} but the "
                                    f"frames are {frames.shape[2]}x{frames.shape[1]}; make the plate again from these "
                                    "frames ('real2sim plate')")
        used = resolve_backend(backend, plate)
        if backend == "auto" and plate is not None:
            used = "auto (difference, grabcut where the object is part of the plate)"
        outputs, areas, flags, per_entity, states = [], {}, {}, {}, {}
        prompted, results = {}, {}
        cut_from = {}
        for ent, (f, p) in norm.items():
            others = {e: q for e, (g, q) in norm.items() if e != ent and g == f}
            p = with_others_as_negatives(p, list(others.values()))
            res = segment_result(frames[f], p, plate=plate, backend=backend, moved_clicks=True,
                                 name=f"frame {f} ({cap.frames[f].image}), entity '{ent}'", plate_known=known)
            if not res.mask.any():
                raise SegmentationError(f"the prompt for '{ent}' on frame {f} ({cap.frames[f].image}) gave an empty mask; "
                                        "click inside the object or give a box")
            prompted[ent], results[ent] = res.mask, res
            if res.details.get("negatives_cut") and others:
                cut_from[ent] = sorted(e for e, q in others.items() if q.positives)
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
        shadows = _write_shadows(bundle, norm, results)
        outputs += [v for v in shadows.values() if v]
        atomic_write_json(bundle.path("masks/prompts.json"), config["prompts"])
        outputs.append("masks/prompts.json")
        pic = bundle.reports_dir() / "segment.png"
        legend = {e: ("LOW " if r.confidence < LOW_CONFIDENCE else "") + f"conf {r.confidence:.2f}" for e, r in results.items()}
        write_rgb(pic, contact_sheet(frames, per_entity, legend=legend))
        h, w = frames.shape[1:3]
        summary = {e: {"frames": sum(a is not None for a in v), "area_px_min": min(a for a in v if a is not None),
                       "area_px_max": max(a for a in v if a is not None),
                       "area_frac_prompt_frame": round(v[norm[e][0]] / (h * w), 6), "flagged_frames": flags[e],
                       "states": {k: states[e].count(k) for k in STATES if k in states[e]},
                       "frames_at_prompted_pose": sum(st in AT_PROMPTED_POSE for st in states[e]),
                       "confidence": round(results[e].confidence, 3),
                       "low_confidence": results[e].confidence < LOW_CONFIDENCE,
                       "mask_backend": results[e].backend, "mask_details": results[e].details,
                       "shadow_mask": shadows.get(e), "cut_from": cut_from.get(e, [])}
                   for e, v in areas.items()}
        for e, s in summary.items():
            if s["flagged_frames"]:
                log.warning("segment: '%s' is lost by propagation in frames %s; prompt it again on one of them",
                            e, s["flagged_frames"])
            if s["area_frac_prompt_frame"] > 0.9:
                log.warning("segment: the mask of '%s' covers %.0f%% of the frame", e, 100 * s["area_frac_prompt_frame"])
        low = sorted(e for e, r in results.items() if r.confidence < LOW_CONFIDENCE)
        rep = bundle.write_report("segment", {"backend": used, "entities": summary, "areas_px": areas,
                                              "low_confidence": low, "low_confidence_below": LOW_CONFIDENCE,
                                              "picture": bundle.rel(pic)})
        outputs += [rep, bundle.rel(pic)]
        metrics = {"backend": used, "entities": len(per_entity), "low_confidence": len(low),
                   "min_confidence": round(min(r.confidence for r in results.values()), 3),
                   "masks": sum(a is not None for v in areas.values() for a in v), "flagged_frames": sum(len(v) for v in flags.values())}
        return outputs, metrics, f"{len(per_entity)} entities segmented with {used}"

    return run_stage(bundle, "segment", input_hash, config, run, force=force)


def with_others_as_negatives(prompt: Prompt, others: list[Prompt]) -> Prompt:
    """``prompt`` with the positive clicks of the other entities prompted on the same frame added as negative
    clicks: those pixels are another object, so two objects that touch (a can in a bowl, a carrot on a dish) are
    cut apart instead of one mask holding both. The prompt as given is what ``masks/prompts.json`` records. A prompt
    without a positive click (a box alone) is left as it is: the cut needs a click on each side, and a negative
    click on the change a box holds removes that change whole."""
    extra = [pt for q in others for pt in q.positives if pt not in prompt.points]
    if not extra or not prompt.positives:
        return prompt
    return Prompt(prompt.points + extra, prompt.labels + [0] * len(extra), prompt.box)


def stored_prompts_on_frame(bundle, frame: int, leave_out: str) -> list[Prompt]:
    """The prompts ``masks/prompts.json`` records on ``frame`` for every entity but ``leave_out`` (for
    :func:`with_others_as_negatives` when one entity is prompted again, as on the review page)."""
    import json

    path = bundle.root / "masks" / "prompts.json"
    try:
        stored = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError as exc:
        raise SegmentationError(f"{path}: invalid JSON ({exc.msg}); fix it or delete it and prompt the entities again") from exc
    return [Prompt.from_dict(spec.get("prompt", spec)) for e, spec in stored.items()
            if e != leave_out and isinstance(spec, dict) and int(spec.get("frame", 0)) == frame]


def _read_frames(bundle, cap) -> np.ndarray:
    """``(n, h, w, 3) uint8`` frames; frames of another size are an error naming them, black or saturated frames
    a warning naming them (propagation will mark the entities there lost)."""
    frames, shape0 = [], None
    for i, fr in enumerate(cap.frames):
        img = read_rgb(bundle.path(fr.image))
        if shape0 is None:
            shape0 = img.shape
        elif img.shape != shape0:
            raise SegmentationError(f"{bundle.path(fr.image)} (frame {i}) is {img.shape[1]}x{img.shape[0]} but frame 0 "
                                    f"is {shape0[1]}x{shape0[0]}: every frame of one camera must have the same size; "
                                    "re-export the clip at one resolution")
        try:
            check_exposure(img, f"frame {i} ({fr.image})")
        except SegmentationError as exc:
            log.warning("segment: %s", exc)
        frames.append(img)
    return np.stack(frames)


def _write_shadows(bundle, norm: dict, results: dict) -> dict[str, str | None]:
    """Write each entity's cast shadow on its prompted frame as ``masks/<frame>/<entity>_shadow.png`` (where the
    backend told it apart; old ones of the entity removed). Not recorded as an entity mask: the report names it."""
    out = {}
    for ent, (f, _) in norm.items():
        for old in bundle.path("masks").glob(f"*/{ent}_shadow.png"):
            old.unlink()
        sh = results[ent].shadow
        if sh is not None and sh.any():
            path = bundle.path(f"masks/{f:06d}/{ent}_shadow.png")
            write_mask(path, sh)
            out[ent] = bundle.rel(path)
        else:
            out[ent] = None
    return out
