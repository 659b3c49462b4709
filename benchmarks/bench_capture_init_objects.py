"""The one-command capture on the synthetic robot clips over the real plates that hold hand-outlined objects, with a
click on each object as well as the box on the robot (``bench_capture_init_clips.py --objects``), here so that
``make bench`` prints it: the plate against the true background and the plain median, leaving out the objects
(the command takes them out of the plate by design), with the camera's pose and with its intrinsics only.

    PYTHONPATH=$PWD MUJOCO_GL=egl .venv/bin/python benchmarks/bench_capture_init_objects.py [--pose pose|none|both]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capture_init_clips import main  # noqa: E402  (this folder)

if __name__ == "__main__":
    main(["--objects", *sys.argv[1:]])
