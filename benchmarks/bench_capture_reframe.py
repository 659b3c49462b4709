"""The plate on the real Bridge clip through other framings (``plate_cases.REFRAMINGS``: 1.5x and 2x close-up crops,
portrait, 320x240, 1280x960, fresh sensor noise): ``bench_capture_plates.py --reframe``, here so that ``make bench``
prints it. Gain over the plain median where the clip confirms the person-made cleanup; time ratio as there.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_capture_reframe.py [--json out.json] [--markdown]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capture_plates import main  # noqa: E402  (this folder)

if __name__ == "__main__":
    sys.exit(main(["--reframe", *sys.argv[1:]]))
