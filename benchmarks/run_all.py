"""Run every benchmark in this folder (each prints ratios measured in one run)."""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

for path in sorted(Path(__file__).parent.glob("bench_*.py")):
    if len(sys.argv) > 1 and not any(a in path.name for a in sys.argv[1:]):
        continue
    print(f"== {path.name}")
    runpy.run_path(str(path), run_name="__main__")
