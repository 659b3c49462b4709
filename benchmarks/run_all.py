"""Run every benchmark in this folder (each prints ratios measured in one run), then the mutation check
(``mutation_check.py``: does the suite notice deliberate bugs?). Arguments filter by file name."""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _wanted(name: str) -> bool:
    return len(sys.argv) <= 1 or any(a in name for a in sys.argv[1:])


failed = []
for path in sorted(HERE.glob("bench_*.py")):
    if _wanted(path.name):
        print(f"== {path.name}")
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as stop:  # a benchmark's own ``sys.exit(main())`` ends that benchmark, not the run
            if stop.code not in (None, 0):
                failed.append(f"{path.name}: {stop.code}")
if _wanted("mutation_check.py"):
    print("== mutation_check.py")
    sys.argv = [str(HERE / "mutation_check.py")]
    mutation = runpy.run_path(str(HERE / "mutation_check.py"))
    survived = mutation["main"]()
    if survived:
        failed.append(f"mutation check: {survived} named mutant(s) survived")
if failed:
    sys.exit("; ".join(failed))
