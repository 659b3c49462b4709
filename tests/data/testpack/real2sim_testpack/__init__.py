"""A lab's pack for real2sim: its arm (a WidowX 250s under the lab's own name), a one-block scene and a
segmentation backend, each advertised through an entry point (see pyproject.toml)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from real2sim.robots.widowx250s import ROBOT as WIDOWX

ROBOT = dataclasses.replace(WIDOWX, name="testpack_arm", aliases=("lab_arm",),
                            description="the lab's WidowX, registered by real2sim-testpack")
MINI_SCENE = Path(__file__).resolve().parent / "mini"


def threshold_segmenter(image, prompt, plate=None):
    """Pixels darker than the clicked one plus 10 levels (a backend a lab might plug in)."""
    grey = np.asarray(image, float).mean(-1)
    x, y = (int(round(v)) for v in prompt.points[0])
    return grey <= grey[y, x] + 10
