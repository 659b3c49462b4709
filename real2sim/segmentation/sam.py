"""segment-anything (SAM) through its own ``SamPredictor``, with a checkpoint the user supplies.

No weights ship with real2sim and none can be downloaded here: give ``checkpoint=`` (vit_b / vit_l / vit_h
``.pth`` from the segment-anything release) or set ``REAL2SIM_SAM_CHECKPOINT``. ``SamBackend(model=...)``
also accepts an already-built ``Sam`` module (the tests build a tiny random one).
The image embedding is cached: several prompts on one image cost one ``set_image``.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np

from real2sim.core.errors import DependencyMissing, UnknownNameError, require
from real2sim.segmentation.core import Prompt, SegmentationError

log = logging.getLogger(__name__)
MODEL_TYPES = ("vit_b", "vit_l", "vit_h")


class SamBackend:
    """Callable backend ``(image, prompt, plate=None) -> mask`` around ``segment_anything.SamPredictor``."""

    def __init__(self, checkpoint: str | Path | None = None, model_type: str = "vit_b", device: str = "cpu",
                 model=None, multimask: bool = True):
        self.checkpoint = checkpoint or os.environ.get("REAL2SIM_SAM_CHECKPOINT")
        self.model_type = model_type
        self.device = device
        self.multimask = multimask
        self._model = model
        self._predictor = None
        self._image_key = None

    def predictor(self):
        if self._predictor is None:
            require("torch", "sam", "torch")
            sa = require("segment_anything", "sam", "segment-anything")
            model = self._model
            if model is None:
                if not self.checkpoint:
                    raise DependencyMissing("the 'sam' backend needs model weights: download a SAM checkpoint "
                                            "(e.g. sam_vit_b_01ec64.pth) and pass checkpoint=PATH, or set "
                                            "REAL2SIM_SAM_CHECKPOINT; without weights use --backend grabcut")
                ck = Path(self.checkpoint)
                if not ck.is_file():
                    raise SegmentationError(f"{ck}: SAM checkpoint not found; check REAL2SIM_SAM_CHECKPOINT / --sam-checkpoint")
                if self.model_type not in MODEL_TYPES:

                    raise UnknownNameError("SAM model type", self.model_type, MODEL_TYPES)
                model = sa.sam_model_registry[self.model_type](checkpoint=str(ck))
            model.to(self.device).eval()
            self._predictor = sa.SamPredictor(model)
        return self._predictor

    def __call__(self, image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None) -> np.ndarray:
        import torch

        pred = self.predictor()
        key = hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest() + str(image.shape)
        with torch.no_grad():
            if key != self._image_key:
                pred.set_image(np.ascontiguousarray(image), image_format="RGB")
                self._image_key = key
            coords = np.array(prompt.points, np.float32) if prompt.points else None
            labels = np.array(prompt.labels, np.int32) if prompt.points else None
            box = np.array(prompt.box, np.float32) if prompt.box is not None else None
            multi = self.multimask and (len(prompt.points) <= 1 and box is None)
            masks, scores, _ = pred.predict(point_coords=coords, point_labels=labels, box=box, multimask_output=multi)
        return np.asarray(masks[int(np.argmax(scores))], bool)


_default: SamBackend | None = None


def sam(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None) -> np.ndarray:
    """Registry entry: a process-wide :class:`SamBackend` configured from ``REAL2SIM_SAM_CHECKPOINT``."""
    global _default
    if _default is None or _default.checkpoint != os.environ.get("REAL2SIM_SAM_CHECKPOINT"):
        _default = SamBackend(model_type=os.environ.get("REAL2SIM_SAM_MODEL", "vit_b"))
    return _default(image, prompt, plate)
