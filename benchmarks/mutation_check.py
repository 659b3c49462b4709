"""Mutation check: break the code on purpose and see whether the tests notice.

Two kinds of mutants, each applied to a scratch copy of the repository (never to this checkout), each followed by
the tests that should catch it (``pytest -x``); a mutant whose tests still pass *survived*: the suite does not
check that behaviour.

- **Named mutants**, the bugs that once passed the suite: the plate is frame 0, inpainting does nothing, IoU is
  precision, the cube moved 2 cm before texturing, SAM's prompt ignored. Each is a redefinition appended to its
  module (so it holds whatever the function's body looks like today).
- **Operator mutants** over small core functions (IoU, PSNR, MMRV, Pearson r, Wilson interval, pose error):
  every arithmetic operator and comparison in the function swapped for its neighbour (+ -, * /, < <=, > >=,
  == !=), one mutant per site.

    .venv/bin/python benchmarks/mutation_check.py [--named-only] [--limit N] [--only TEXT]

Prints one line per mutant and the survivors at the end; the exit status is the number of named mutants that
survived (operator survivors are reported, not failed on: some are equivalent mutants, e.g. ``>`` vs ``>=`` on
the real rates in MMRV, where a tie costs ``|real_i - real_j| = 0`` either way). Real-data tests skip when ../shared/data is absent; their mutants then read "skipped".
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Mutant:
    name: str
    path: str
    """File (relative to the repository) the mutant changes."""
    tests: list[str]
    """pytest node ids / files that should fail on it."""
    append: str = ""
    """Code appended to the module (named mutants)."""
    function: str = ""
    """Function whose ``site``-th operator is swapped (operator mutants)."""
    site: int = -1
    label: str = ""


NAMED = [
    Mutant("plate is frame 0", "real2sim/capture/plate.py",
           ["tests/test_bundle_commands.py::test_bridge_clip_to_plate_with_two_commands",
            "tests/test_plate.py::test_plate_removes_moving_occluder"],
           append="""
_mutant_full = make_plate_full
def make_plate_full(frames, *args, **kwargs):
    res = _mutant_full(frames, *args, **kwargs)
    res.plate = np.array(stack_frames(frames)[0], copy=True)
    return res
"""),
    Mutant("inpainting is a no-op", "real2sim/capture/inpaint.py",
           ["tests/test_plate.py::test_plate_with_masks_and_unseen_pixels_are_inpainted"],
           append="""
def inpaint(image, hole, *args, **kwargs):
    return np.array(image, copy=True)
"""),
    Mutant("IoU is precision", "real2sim/core/imaging.py",
           ["tests/test_suite_rules.py::test_the_librarys_measures_agree_with_the_tests_references"],
           append="""
def iou(a, b):
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    return float((a & b).sum() / a.sum()) if a.any() else 1.0
"""),
    Mutant("cube moved 2 cm before texturing", "real2sim/texture/backproject.py",
           ["tests/test_texture.py::test_bridge_cubes_align_and_texture"],
           append="""
_mutant_backproject = backproject
def backproject(mesh, pose, views, *args, **kwargs):
    pose = np.array(pose, float, copy=True)
    pose[0, 3] += 0.02
    return _mutant_backproject(mesh, pose, views, *args, **kwargs)
"""),
    Mutant("SAM prompt ignored (always the image centre)", "real2sim/segmentation/sam.py",
           ["tests/test_segmentation.py::test_sam_backend_gives_sams_own_mask_for_each_prompt"],
           append="""
_mutant_call = SamBackend.__call__
def _centre_call(self, image, prompt, plate=None):
    h, w = image.shape[:2]
    return _mutant_call(self, image, Prompt([((w - 1) / 2, (h - 1) / 2)]), plate)
SamBackend.__call__ = _centre_call
"""),
    Mutant("collision hulls in the repaired mesh's centred frame", "real2sim/collision/decomposition.py",
           ["tests/test_collision.py::test_l_shape_coacd"],
           append="""
_mutant_repair = repair_mesh
def repair_mesh(mesh, *args, **kwargs):
    solid, notes = _mutant_repair(mesh, *args, **kwargs)
    solid = solid.copy()
    solid.apply_translation(-solid.centroid)
    return solid, notes
"""),
    Mutant("mesh objects' mass from water's density, not theirs", "real2sim/collision/inertia.py",
           ["tests/test_bundle.py::test_inertia_from_density_matches_closed_form"],
           append="""
_mutant_mass_properties = mass_properties
def mass_properties(mesh, density, mass=None):
    return _mutant_mass_properties(mesh, 1000.0, mass)
"""),
    Mutant("init stores the first frame for every frame", "real2sim/capture/init.py",
           ["tests/test_capture.py::test_init_from_image_folder_and_camera",
            "tests/test_capture.py::test_init_from_video_and_lerobot"],
           append="""
_mutant_read_frames = read_frames
def read_frames(*args, **kwargs):
    src = _mutant_read_frames(*args, **kwargs)
    src.frames = np.repeat(src.frames[:1], len(src.frames), 0)
    return src
"""),
    Mutant("masks command copies the prompt mask to every frame", "real2sim/segmentation/stage.py",
           ["tests/test_bundle_commands.py::test_masks_command_keeps_earlier_entities"],
           append="""
_mutant_propagate_many = propagate_many
def propagate_many(frames, masks, start=0, config=None):
    out = _mutant_propagate_many(frames, masks, start, config)
    for ent, p in out.items():
        p.masks = [np.array(masks[ent], copy=True) for _ in p.masks]
    return out
"""),
    Mutant("the worker pool runs every episode in-process", "real2sim/evaluation/envs/runner.py",
           ["tests/test_evaluate.py::test_local_pool_two_workers"],
           append="""
def _run_pool(cfg, seeds, workers, record):
    for s in seeds:
        record(run_episode(cfg, s))
"""),
]

OPERATOR_TARGETS = [
    ("real2sim/core/imaging.py", "iou", ["tests/test_suite_rules.py", "tests/test_segmentation.py"]),
    ("real2sim/core/imaging.py", "psnr", ["tests/test_suite_rules.py", "tests/test_plate.py"]),
    ("real2sim/evaluation/metrics.py", "mmrv", ["tests/test_metrics.py"]),
    ("real2sim/evaluation/metrics.py", "pearson", ["tests/test_metrics.py"]),
    ("real2sim/evaluation/metrics.py", "wilson_interval", ["tests/test_metrics.py"]),
    ("real2sim/render/align.py", "pose_error", ["tests/test_texture.py", "tests/test_pipeline.py"]),
]

SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
        ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


def _sites(fn: ast.FunctionDef) -> list[tuple[ast.AST, int | None]]:
    """Every swappable operator in ``fn``: (BinOp node, None) or (Compare node, index of the op)."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and type(node.op) in SWAP:
            out.append((node, None))
        elif isinstance(node, ast.Compare):
            out += [(node, i) for i, op in enumerate(node.ops) if type(op) in SWAP]
    return out


def _find(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SystemExit(f"mutation_check: no function {name}")


def operator_mutants() -> list[Mutant]:
    out = []
    for path, fn, tests in OPERATOR_TARGETS:
        tree = ast.parse((ROOT / path).read_text())
        for k, (node, i) in enumerate(_sites(_find(tree, fn))):
            op = node.op if i is None else node.ops[i]
            label = f"{type(op).__name__} -> {SWAP[type(op)].__name__} at line {node.lineno}"
            out.append(Mutant(f"{fn}: {label}", path, tests, function=fn, site=k, label=label))
    return out


def _mutated_source(m: Mutant, original: str) -> str:
    if m.append:
        return original + "\n\n# --- mutant: " + m.name + "\n" + m.append
    tree = ast.parse(original)
    node, i = _sites(_find(tree, m.function))[m.site]
    if i is None:
        node.op = SWAP[type(node.op)]()
    else:
        node.ops[i] = SWAP[type(node.ops[i])]()
    return ast.unparse(tree)


def _scratch_copy() -> Path:
    """The tracked files (plus untracked, not ignored ones) in a temporary folder beside this checkout, so that
    ``../shared/data`` resolves the same way."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    dst = Path(tempfile.mkdtemp(prefix=".mutants-", dir=ROOT.parent))
    for rel in files:
        if (ROOT / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dst / rel)
    return dst


def run(m: Mutant, work: Path) -> tuple[str, float]:
    """'killed' (a test failed; for a named mutant, a test's assertion), 'survived', 'skipped' (every selected test
    skipped) or 'broken' (a named mutant made the tests error instead of asserting: the mutant is wrong), and the
    seconds it took."""
    target = work / m.path
    original = target.read_text()
    target.write_text(_mutated_source(m, original))
    t0 = time.perf_counter()
    try:
        env = {**os.environ, "PYTHONPATH": str(work), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o",
                               "addopts=", *m.tests], cwd=work, env=env, capture_output=True, text=True)
    finally:
        target.write_text(original)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode == 0:
        verdict = "skipped" if ("skipped" in tail and "passed" not in tail) else "survived"
    elif proc.returncode == 5:  # no tests collected
        verdict = "skipped"
    elif not m.append or "AssertionError" in proc.stdout or "Failed: DID NOT RAISE" in proc.stdout:
        verdict = "killed"  # a named mutant counts only when a test's assertion caught it
    else:  # an import error, a crash: the mutant broke the code rather than the behaviour under test
        verdict = "broken"
    return verdict, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--named-only", action="store_true", help="only the named mutants (the bugs that once passed)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many operator mutants (0: all)")
    ap.add_argument("--only", default="", help="only the mutants whose name contains this text")
    args = ap.parse_args()
    mutants = list(NAMED)
    if not args.named_only:
        ops = operator_mutants()
        mutants += ops[:args.limit] if args.limit else ops
    if args.only:
        mutants = [m for m in mutants if args.only in m.name]
    work = _scratch_copy()
    results = []
    try:
        for m in mutants:
            verdict, secs = run(m, work)
            results.append((m, verdict))
            print(f"{verdict:9s} {secs:6.1f} s  {m.name}  [{', '.join(t.split('::')[-1] for t in m.tests)}]", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    named_survived = [m.name for m, v in results if v == "survived" and m.append]
    op_survived = [m.name for m, v in results if v == "survived" and not m.append]
    n_killed = sum(v == "killed" for _, v in results)
    print(f"\n{n_killed}/{len(results)} mutants killed; named survivors: {named_survived or 'none'}; "
          f"operator survivors ({len(op_survived)}): {op_survived or 'none'}")
    return len(named_survived)


if __name__ == "__main__":
    sys.exit(main())
