"""Quality gates: the acceptance rule of every fitting stage, stated in one place.

A fitting stage (robot fit, camera refinement, table, alignment, texture) reports a number that says how good its
result is. Below the stage's bar the result is *not applied* (the bundle keeps what it had) unless the user passes
``--accept-poor``; either way the stage is recorded with status ``'poor'`` and the number and the bar, so that
``real2sim check``, the review page and ``export``/``eval`` can say so. The command that ran it exits non-zero
unless the poor result was accepted.

A stage asks :func:`judge` with its metrics (``{name: value}``); the stage runner records the verdict
(:func:`real2sim.core.stages.run_stage`). Every bar below was set against what this project measured:

- ``robot_fit`` — mean silhouette IoU of the fitted robot against its pixels over the frames: 0.82-0.84 on the real
  Bridge frame and on the 37-frame Bridge clip (worst frame 0.67); the wrong robot (a Panda fitted to the WidowX
  frame) reaches 0.61. Bar 0.7.
- ``camera_refine`` — mean silhouette IoU of the robot rendered from the refined camera against its masks: 0.82 on
  the Bridge frame, 0.91 from a camera 4 cm / 4 deg off on a clean synthetic mask, 0.28 on a wrong robot fit. Bar 0.7.
- ``table`` — how far the objects' bottoms disagree on one flat table (``spread_mm``, objects method): a few mm on
  a well-calibrated camera, 23 mm on the Bridge frame with the config's camera (a sign the camera is off). Bar 10 mm.
  Board method: the board corners' reprojection RMS (``rms_px``), bar 2 px (a good board: < 1 px).
- ``alignment`` — objects that are not 'aligned' (``unaligned_objects``: poor, not converged or failed). Each
  object's own number is its silhouette IoU against its masks, 'aligned' at :data:`ALIGNED_IOU` (the alignment
  stage owns the per-object rule and may relax it for small masks; docs/texture.md): 0.94 on the Bridge cubes,
  0.99 on synthetic frames, 0.51 for a cube whose mask lost its bottom half. Bar 0: every object aligned.
- ``texture`` — the worst object's re-render PSNR over its masks (``min_psnr_db``): 34-40 dB on the Bridge cubes,
  > 25 dB on synthetic frames; a texture back-projected from a wrong pose lands below 20 dB. Bar 20 dB.
"""
from __future__ import annotations

from dataclasses import dataclass

from real2sim.core.errors import UnknownNameError


@dataclass(frozen=True)
class Gate:
    """One acceptance rule: ``metric`` (a key of the stage's metrics) must be ``>= bar`` (``higher_is_better``) or
    ``<= bar``."""

    stage: str
    metric: str
    bar: float
    higher_is_better: bool
    label: str
    """What the number is, for people: 'silhouette IoU', 'spread of the objects' bottoms'."""
    unit: str = ""

    def passes(self, value: float) -> bool:
        return value >= self.bar if self.higher_is_better else value <= self.bar

    def describe(self) -> str:
        """The rule in words: 'silhouette IoU >= 0.7'."""
        return f"{self.label} {'>=' if self.higher_is_better else '<='} {self.bar:g}{self.unit}"


GATES: tuple[Gate, ...] = (
    Gate("robot_fit", "iou_fitted", 0.7, True, "robot silhouette IoU (mean over frames)"),
    Gate("camera_refine", "mean_iou_after", 0.7, True, "robot silhouette IoU from the refined camera"),
    Gate("table", "spread_mm", 10.0, False, "spread of the objects' bottoms", " mm"),
    Gate("table", "rms_px", 2.0, False, "board corner reprojection RMS", " px"),
    Gate("alignment", "unaligned_objects", 0, False, "objects not aligned (each object's silhouette IoU against "
         "ALIGNED_IOU)"),
    Gate("texture", "min_psnr_db", 20.0, True, "worst object's re-render PSNR", " dB"),
    Gate("texture", "failed_objects", 0, False, "objects whose texturing failed"),
)
"""Every acceptance rule. A stage may have more than one (the table: one per method); a rule whose metric the stage
did not report (None or absent) does not apply."""

GATED_STAGES = tuple(dict.fromkeys(g.stage for g in GATES))

ALIGNED_IOU = 0.9
"""An object's alignment is 'aligned' at this mean silhouette IoU against its masks (else 'poor', pose kept)."""


@dataclass(frozen=True)
class Verdict:
    """A gate's judgement of one number."""

    gate: Gate
    value: float
    passed: bool

    def line(self) -> str:
        """One line naming the number and the bar: 'robot_fit: robot silhouette IoU 0.61 is below the bar 0.7'."""
        side = "meets" if self.passed else ("is below" if self.gate.higher_is_better else "is above")
        return (f"{self.gate.stage}: {self.gate.label} {self.value:.4g}{self.gate.unit} {side} the bar "
                f"{self.gate.bar:g}{self.gate.unit}")

    def to_dict(self) -> dict:
        return {"metric": self.gate.metric, "value": self.value, "bar": self.gate.bar,
                "rule": self.gate.describe(), "passed": self.passed}


def gates_of(stage: str) -> tuple[Gate, ...]:
    """The acceptance rules of ``stage`` (empty for a stage that fits nothing)."""
    return tuple(g for g in GATES if g.stage == stage)


def gate(stage: str, metric: str) -> Gate:
    """The rule of ``stage`` on ``metric``."""
    for g in GATES:
        if g.stage == stage and g.metric == metric:
            return g
    raise UnknownNameError("quality gate", f"{stage}.{metric}", [f"{g.stage}.{g.metric}" for g in GATES])


def judge(stage: str, metrics: dict) -> list[Verdict]:
    """The verdict of every rule of ``stage`` whose metric is in ``metrics`` (numbers only; None skips the rule)."""
    out = []
    for g in gates_of(stage):
        v = metrics.get(g.metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(Verdict(g, float(v), g.passes(float(v))))
    return out


def failing(stage: str, metrics: dict) -> list[Verdict]:
    """The verdicts of ``stage`` that did not pass."""
    return [v for v in judge(stage, metrics) if not v.passed]


def passes(stage: str, metric: str, value: float) -> bool:
    """Whether one number (an object's IoU, say) meets the rule of ``stage`` on ``metric``."""
    return gate(stage, metric).passes(float(value))


POOR_NOT_APPLIED = "not applied (the bundle keeps its previous result); rerun with --accept-poor to apply it anyway"
POOR_APPLIED = "applied anyway (--accept-poor)"
