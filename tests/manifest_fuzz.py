"""Seeded mutations of valid ``scene.json`` files, shared by tests/test_manifest_fuzz.py and
benchmarks/fuzz_manifest.py.

Each mutation is ``(kind, must_reject, bytes)``. ``must_reject`` marks mutations of a kind known to be invalid
(a huge or non-finite number where a float is expected, a path leaving the bundle, a non-ASCII object id, ...):
``Bundle.load`` must raise, or ``check`` must report an error. The other kinds (random type swaps, deleted or
added keys) may be valid or not; they only must not crash. The verdict of a run: ``crash`` (an exception that is
not a :class:`Real2SimError`), ``silent`` (a must-reject mutation that loaded and checked clean), ``rejected``
and ``accepted``.
"""
from __future__ import annotations

import copy
import json
import random
import shutil
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image

from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError
from real2sim.pipeline.check import check_bundle

# Subtrees whose content is free-form (recorded, not interpreted): a number there is not a "float field".
FREE_FORM = ("provenance", "conventions", "units", "config", "metrics", "init")
BAD_STRINGS = ["a\x00b", "x" * 5000, "\u00e9\u6f22\u5b57", "../../../../etc/passwd", "/etc/passwd", "", " ",
               "\ud800", "a/../../b"]
SWAPS = [0, -1, 1.5, 2**64, float("nan"), float("inf"), "str", "", None, True, False, [], [1, 2, 3], {}, {"a": 1}]


def _png(path: Path, shape, value=128) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full(shape, value, np.uint8)).save(path)


def make_bases(root: Path) -> dict[str, tuple[Path, dict]]:
    """Two valid bundles under ``root``: the tabletop recipe and a Bridge-like capture bundle
    (frames, plate, confidence, masks and mask states, a box-collision object with inertials, stage outputs).
    Returns ``{name: (bundle dir, manifest dict)}``; both load and check without errors."""
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    tab = bundle_from_recipe(builtin_recipe("tabletop"), root / "tabletop")
    bridge = bundle_from_recipe(builtin_recipe("tabletop"), root / "bridge")
    d = bridge.manifest.to_dict()
    frames = []
    for i in range(3):
        rel = f"capture/frames/{i:06d}.png"
        _png(bridge.root / rel, (8, 8, 3))
        frames.append({"image": rel, "timestamp": i / 5.0, "camera": "main",
                       "joint_positions": [0.0, 0.1, 0.2, 0.0, 1.3, 0.0, 0.037, -0.037]})
    _png(bridge.root / "background/plate.png", (8, 8, 3))
    _png(bridge.root / "background/plate_confidence.png", (8, 8))
    _png(bridge.root / "masks/000000/cube.png", (8, 8), 255)
    _png(bridge.root / "masks/000001/robot.png", (8, 8), 255)
    d["capture"] = {"source": "bridge_real_1.mp4", "frames": frames, "plate": "background/plate.png",
                    "plate_confidence": "background/plate_confidence.png",
                    "masks": {"000000": {"cube": "masks/000000/cube.png"}, "000001": {"robot": "masks/000001/robot.png"}},
                    "mask_states": {"000000": {"cube": "prompt"}, "000001": {"robot": "rest"}}}
    cube = d["objects"]["cube"]
    cube["collision"] = {"kind": "box", "hulls": [], "size": [0.0225] * 3,
                         "pose": {"position": [0.0, 0.0, 0.0], "quaternion_wxyz": [1.0, 0.0, 0.0, 0.0]}}
    cube["inertial"] = {"mass": 0.05, "com": [0.0, 0.0, 0.0], "inertia": [[1e-5, 0, 0], [0, 1e-5, 0], [0, 0, 1e-5]]}
    d["robot"]["stiffness"] = [100.0] * 8
    d["stages"] = {"capture": {"status": "done", "input_hash": "abc", "config": {"fps": 5}, "metrics": {"frames": 3},
                               "outputs": [f["image"] for f in frames], "message": ""},
                   "plate": {"status": "stale", "input_hash": "def", "config": {}, "metrics": {"psnr": 30.5},
                             "outputs": ["background/plate.png"], "message": ""}}
    d["tasks"]["stack"] = {"instruction": "put the cube on the domino", "time_limit_s": 10.0, "init": {},
                           "success": {"type": "all_of", "terms": [
                               {"type": "on_top", "object": "cube", "support": "domino", "z_tol": 0.02},
                               {"type": "near", "object": "cube", "target": "domino", "distance": 0.1}]}}
    (bridge.root / "scene.json").write_text(json.dumps(d, indent=2))
    return {"tabletop": (tab.root, tab.manifest.to_dict()), "bridge": (bridge.root, d)}


def _walk(node, path=()):
    """Every (path, value) in a JSON tree, the root included."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


def _set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def _float_fields(doc):
    return [p for p, v in _walk(doc) if isinstance(v, float) and not any(k in FREE_FORM for k in p)]


def _deep(n: int):
    v: object = 0
    for _ in range(n):
        v = [v]
    return v


def targeted(doc: dict, rng: random.Random) -> tuple[str, dict | bytes]:
    """One mutation of a kind known to be invalid (the issue's list); returns (kind, new doc or raw bytes)."""
    d = copy.deepcopy(doc)
    kinds = ["huge_int", "nan", "inf", "deep", "bad_utf8", "nul_path", "long_name", "container", "escaping_path",
             "missing_file", "predicate", "camera", "object_id", "schema_version", "light_zero", "robot_zero",
             "huge_path_component"]
    kind = rng.choice(kinds)
    paths = ["capture.plate", "capture.plate_confidence", "objects.cube.visual.mesh", "objects.mug.visual.texture"]
    if d["capture"]["frames"]:
        paths.append("capture.frames.0.image")
    if d["capture"]["masks"]:
        paths.append("capture.masks.000000.cube")

    def at(dotted, value):
        _set(d, tuple(int(k) if k.isdigit() and len(k) < 3 else k for k in dotted.split(".")), value)

    if kind in ("huge_int", "nan", "inf"):
        p = rng.choice(_float_fields(d))
        _set(d, p, {"huge_int": rng.choice([2**64, -(2**64), 10**400]), "nan": float("nan"),
                    "inf": rng.choice([float("inf"), float("-inf")])}[kind])
        return f"{kind}:{'.'.join(map(str, p))}", d
    if kind == "deep":
        target = rng.choice([("provenance", "x"), ("tasks", "lift_cube", "init", "deep"), ("objects", "cube", "pose"),
                             ("stages",), ("name",)])
        _set(d, target, _deep(rng.choice([200, 1000, 5000])))
        return f"deep:{'.'.join(target)}", d
    if kind == "bad_utf8":
        raw = json.dumps(d).encode()
        i = rng.randrange(len(raw))
        return "bad_utf8", raw[:i] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"]) + raw[i:]
    if kind == "nul_path":
        p = rng.choice(paths)
        at(p, "objects/cube/vis\x00ual.obj")
        return f"nul_path:{p}", d
    if kind == "long_name":
        which = rng.choice(["name", "object", "task", "camera", "stage", "path"])
        long = "n" * rng.choice([300, 5000, 100000])
        if which == "name":
            d["name"] = long
        elif which == "object":
            d["objects"][long] = d["objects"].pop("mug")
        elif which == "task":
            d["tasks"][long] = d["tasks"].pop("lift_cube")
        elif which == "camera":
            d["cameras"][long] = d["cameras"].pop("main")
        elif which == "stage":
            d["stages"][long] = {"status": "done", "outputs": ["objects/cube/visual.obj"]}
        else:
            at(rng.choice(paths), long)
        return f"long_name:{which}", d
    if kind == "container":
        target = rng.choice(["collision.size", "stages.outputs", "tasks.init", "capture.masks", "objects", "stages",
                             "provenance", "tasks", "capture.frames", "cameras", "lights", "robot.appearance",
                             "capture.mask_states", "success.terms"])
        bad = rng.choice([1, "abc", 2.5, True] + ([[1, 2]] if target not in ("lights", "stages.outputs",
                                                                             "capture.frames") else [{"a": 1}]))
        if target == "collision.size":
            d["objects"]["cube"]["collision"] = {"kind": "box", "size": bad}
        elif target == "stages.outputs":
            d["stages"]["s"] = {"status": "done", "outputs": bad}
        elif target == "tasks.init":
            d["tasks"]["lift_cube"]["init"] = bad
        elif target == "capture.masks":
            d["capture"]["masks"] = bad if rng.random() < 0.5 else {"000000": bad}
        elif target == "robot.appearance":
            d["robot"]["appearance"] = bad
        elif target == "capture.mask_states":
            d["capture"]["mask_states"] = bad
        elif target == "success.terms":
            d["tasks"]["lift_cube"]["success"] = {"type": "all_of", "terms": bad}
        elif "." in target:
            a, b = target.split(".")
            d[a][b] = bad
        else:
            d[target] = bad
        return f"container:{target}", d
    if kind == "escaping_path":
        p = rng.choice(paths)
        at(p, rng.choice(["../outside.png", "/etc/passwd", "objects/../../x.png", "a/../../../b"]))
        return f"escaping_path:{p}", d
    if kind == "missing_file":
        p = rng.choice(paths)
        at(p, "background/nosuch.png")
        return f"missing_file:{p}", d
    if kind == "predicate":
        bad = rng.choice([{"type": "lifted", "object": "nosuch"}, {"type": "lifted", "object": "cube", "height": float("inf")},
                          {"type": "lifted", "object": "cube", "height": "high"}, {"type": "near", "object": "cube",
                                                                                  "position": [0, "x", 0]},
                          {"type": "near", "object": "cube", "target": "ghost"}, {"type": "on_top", "object": "cube",
                                                                                 "support": 5},
                          {"type": "lifted", "object": ["cube"]}, {"type": "any_of", "terms": [{"type": "inside",
                                                                                                "object": "cube"}]},
                          {"type": "near", "object": "cube", "position": [0, 0, 0], "distance": float("nan")}])
        d["tasks"]["lift_cube"]["success"] = bad
        return "predicate", d
    if kind == "camera":
        cam = d["cameras"]["main"]
        which = rng.choice(["third_row", "fx", "width", "height"])
        if which == "third_row":
            cam["K"][2] = rng.choice([[0.0, 0.0, 2.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
        elif which == "fx":
            cam["K"][0][0] = 1e300
        else:
            cam[which] = 10**30
        return f"camera:{which}", d
    if kind == "object_id":
        d["objects"][rng.choice(["caf\u00e9", "\u6f22\u5b57", "a b", "x.y", "../up", ""])] = d["objects"].pop("mug")
        return "object_id", d
    if kind == "schema_version":
        d["schema_version"] = rng.choice([True, 1.0, "1"])
        return "schema_version", d
    if kind == "light_zero":
        d["lights"][0]["direction"] = [0.0, 0.0, 0.0]
        return "light_zero", d
    if kind == "robot_zero":
        d["robot"] = rng.choice([0, False, "", [], {}])
        return "robot_zero", d
    p = rng.choice(paths)
    at(p, "objects/" + "x" * 300 + ".png")
    return f"huge_path_component:{p}", d


def random_mutation(doc: dict, rng: random.Random) -> tuple[str, dict]:
    """A random structural mutation (may be valid): type swap, deleted key, added key, bad string, huge number."""
    d = copy.deepcopy(doc)
    nodes = list(_walk(d))[1:]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        path, _value = rng.choice(nodes)
        op = rng.choice(["swap", "delete", "add", "string", "number"])
        parent = d
        try:
            for k in path[:-1]:
                parent = parent[k]
            if op == "swap":
                parent[path[-1]] = copy.deepcopy(rng.choice(SWAPS))
            elif op == "delete":
                del parent[path[-1]]
            elif op == "add":
                tgt = parent[path[-1]]
                if isinstance(tgt, dict):
                    tgt[rng.choice(["extra", "position", "kind", "\x00", "x" * 400])] = rng.choice(SWAPS)
                elif isinstance(tgt, list):
                    tgt.append(rng.choice(SWAPS))
            elif op == "string":
                parent[path[-1]] = rng.choice(BAD_STRINGS)
            else:
                parent[path[-1]] = rng.choice([1e300, -1e300, 10**30, 2**63, -1, 0, 1e-320])
        except (KeyError, IndexError, TypeError):
            continue
    return "random", d


def mutations(bases: dict, n: int, seed: int = 0):
    """``n`` seeded mutations ``(base name, kind, must_reject, bytes)``; about half are of known-invalid kinds."""
    rng = random.Random(seed)
    names = sorted(bases)
    for _ in range(n):
        name = rng.choice(names)
        doc = bases[name][1]
        if rng.random() < 0.5:
            kind, new = targeted(doc, rng)
            must = True
        else:
            kind, new = random_mutation(doc, rng)
            must = False
        if isinstance(new, bytes):
            raw = new
        else:
            try:
                raw = json.dumps(new, indent=None).encode("utf-8", "surrogatepass")
            except (RecursionError, ValueError):
                # json.dumps refuses this deep a tree; write the nesting by hand (the file is what a user could write)
                raw = dump_deep(new).encode("utf-8", "surrogatepass")
        yield name, kind, must, raw


def dump_deep(node) -> str:
    parts: list[str] = []
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, str) and x.startswith("\x01RAW"):
            parts.append(x[4:])
        elif isinstance(x, list):
            stack.append("\x01RAW]")
            for i, v in enumerate(reversed(x)):
                stack.append(v)
                if i < len(x) - 1:
                    stack.append("\x01RAW,")
            stack.append("\x01RAW[")
        elif isinstance(x, dict):
            items = list(x.items())
            stack.append("\x01RAW}")
            for i, (k, v) in enumerate(reversed(items)):
                stack.append(v)
                stack.append("\x01RAW" + json.dumps(k) + ":")
                if i < len(items) - 1:
                    stack.append("\x01RAW,")
            stack.append("\x01RAW{")
        else:
            parts.append(json.dumps(x))
    return "".join(parts)


def run_one(root: Path, raw: bytes) -> tuple[str, str]:
    """Write ``raw`` as ``root/scene.json``; load and check it. Returns (outcome, detail) with outcome one of
    'crash', 'rejected', 'accepted'."""
    (root / "scene.json").write_bytes(raw)
    try:
        Bundle.load(root)
        loaded = True
    except Real2SimError as exc:
        loaded, detail = False, str(exc)[:200]
    except Exception:  # noqa: BLE001 - the point: anything else is a crash
        return "crash", "load: " + traceback.format_exc(limit=-3)
    try:
        findings = check_bundle(root, load_meshes=False)
    except Exception:  # noqa: BLE001
        return "crash", "check: " + traceback.format_exc(limit=-3)
    errors = [f for f in findings if f.level == "error"]
    if not loaded:
        if not errors:
            return "crash", "check passed a manifest the loader refused: " + detail
        return "rejected", detail
    return ("rejected", str(errors[0])[:200]) if errors else ("accepted", "")


def fuzz(workdir: Path, n: int, seed: int = 0) -> dict:
    """Run ``n`` mutations; returns counts and up to 20 examples of each failure class."""
    bases = make_bases(workdir)
    backups = {name: (root, (root / "scene.json").read_bytes()) for name, (root, _) in bases.items()}
    counts: Counter = Counter()
    examples: dict[str, list] = {"crash": [], "silent": []}
    by_kind: Counter = Counter()
    for name, kind, must, raw in mutations(bases, n, seed):
        root = bases[name][0]
        outcome, detail = run_one(root, raw)
        if outcome == "accepted" and must:
            outcome = "silent"
        counts[outcome] += 1
        if outcome in examples:
            by_kind[(outcome, kind.split(":")[0])] += 1
            if len(examples[outcome]) < 20:
                examples[outcome].append((name, kind, detail))
    for root, data in backups.values():
        (root / "scene.json").write_bytes(data)
    for sub in ("tabletop", "bridge"):
        shutil.rmtree(workdir / sub, ignore_errors=True)
    return {"counts": dict(counts), "examples": examples, "by_kind": dict(by_kind)}
