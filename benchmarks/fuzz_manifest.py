"""Fuzz the manifest loader and ``real2sim check`` with seeded mutations of two valid scene.json files.

    PYTHONPATH=. .venv/bin/python benchmarks/fuzz_manifest.py [--n 10000] [--seed 0]

Mutations (tests/manifest_fuzz.py): about half of kinds known to be invalid (huge/NaN/inf numbers in float fields,
JSON nested 200-5000 deep, invalid UTF-8, NUL bytes and over-long names in paths, wrong container types, paths
leaving the bundle or missing, bad task predicates, impossible cameras, non-ASCII object ids, ...), half random
(type swaps, deleted/added keys, bad strings, huge numbers). Prints the counts: crashes (an exception that is not
a Real2SimError, from Bundle.load or check), silently accepted (a known-invalid mutation that loads and checks
clean), rejected, accepted; and the time per mutation against a bare ``json.loads`` of the same bytes.
Exit status 1 when there is any crash or silent acceptance.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from manifest_fuzz import fuzz, make_bases, mutations

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--examples", type=int, default=5)
    args = ap.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = fuzz(Path(tmp), args.n, args.seed)
        dt = time.perf_counter() - t0
        bases = make_bases(Path(tmp) / "naive")
        t1 = time.perf_counter()
        for _, _, _, raw in mutations(bases, args.n, args.seed):
            try:
                json.loads(raw)
            except (ValueError, RecursionError):
                pass
        naive = time.perf_counter() - t1
    c = res["counts"]
    print(f"{args.n} mutations (seed {args.seed}) in {dt:.1f} s ({1e3 * dt / args.n:.2f} ms each; "
          f"{dt / max(naive, 1e-9):.0f}x a bare json.loads of the same bytes, {naive:.2f} s)")
    print(f"crashes {c.get('crash', 0)}  silently accepted {c.get('silent', 0)}  "
          f"rejected {c.get('rejected', 0)}  accepted valid {c.get('accepted', 0)}")
    for (outcome, kind), k in sorted(res["by_kind"].items()):
        print(f"  {outcome:6s} {kind:22s} {k}")
    for outcome in ("crash", "silent"):
        for name, kind, detail in res["examples"][outcome][:args.examples]:
            last = detail.strip().splitlines()[-1] if detail.strip() else ""
            print(f"  e.g. {outcome} [{name}] {kind}: {last[:160]}")
    return 1 if c.get("crash", 0) or c.get("silent", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
