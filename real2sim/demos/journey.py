"""docs/journey.md as a runnable script: the page's commands are run as written, its numbers come from that run.

The commands of every generated block of ``docs/journey.md`` live here, once: ``--write-doc`` writes them (and the
numbers a run measured) between the page's markers ``<!-- journey:begin NAME -->`` ... ``<!-- journey:end -->``;
``--check`` runs them and fails, naming the stale line, when the page's commands differ from what ran or a quoted
number drifts beyond its tolerance. Every command runs in a subprocess through ``bash`` with the installed
``real2sim`` entry point first on ``PATH`` (and this interpreter as ``python``), in a work folder where
``../shared/data`` is the data folder, exactly as a person pastes it.

Parts (``--part``, repeatable):

- ``fast``: camera file, table mesh, bundle, objects, both tasks, masks, the table gate (~2 min on 2 cores);
  what ``tests/test_journey_doc.py`` runs by default.
- ``slow``: build, robot appearance, check, export, both tasks x three policies x two engines, metrics,
  the all-at-once function and the one-command clip capture (10-20 min on 2 cores; the
  test runs it with ``REAL2SIM_JOURNEY_FULL=1``).
- ``demo``: ``real2sim demo`` on the bundled scene, the journey without any input (~1-5 min); run when the
  Bridge data folder is absent, or when asked for.

Tolerances: success rates, episode and pixel counts exactly (seeded; the bundled demo's rates to one episode in
six, its CoACD hulls being bounded in time); IoU 0.01; PSNR 0.3 dB; millimetres 0.5;
joint angles 0.005 rad; pixels 0.3 px; timings never (quoted as approximate, rewritten by ``--write-doc``).

``python -m real2sim.demos.journey --check`` (fast part), ``--part fast --part slow --write-doc`` (regenerate).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from real2sim.engines import simulator_names

log = logging.getLogger("real2sim.demos.journey")

BEGIN = re.compile(r"^<!-- journey:begin ([\w-]+) -->\s*$")
END = "<!-- journey:end -->"
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)|nan|\?"
TASKS = ("lift_green_cube", "put_green_on_yellow")
POLICIES = ("scripted", "scripted:noise=0.03", "random")
ENGINES = tuple(simulator_names())  # the page's eval loop and tables name them: MuJoCo, then SAPIEN
PARTS = ("fast", "slow", "demo")


class JourneyError(RuntimeError):
    """A command of the journey failed, or the page disagrees with the run."""


# -- the commands ------------------------------------------------------------------------------------------------
@dataclass
class Cmd:
    """One command as the page shows it (continuation lines and a trailing comment included)."""

    text: str
    expect_rc: int = 0
    key: str = ""
    """Name of its output and timing in the results (default: the first words)."""


@dataclass
class Block:
    """A fenced block of the page: shell commands, or a file the person writes (``file`` set)."""

    name: str
    part: str
    cmds: list[Cmd] = field(default_factory=list)
    lang: str = "bash"
    prelude: str = ""
    """Shell lines shown first and run before every command of the block (``D=../shared/data``)."""
    file: str = ""
    content: str = ""

    def text(self) -> str:
        if self.file:
            return self.content.rstrip("\n")
        lines = [self.prelude] if self.prelude else []
        return "\n".join(lines + [c.text for c in self.cmds])


CAMERA_JSON = """\
{"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545,
 "distortion": [0, 0, 0, 0, 0],
 "pose": {"position": [0.0, -0.16, 0.336],
          "quaternion_wxyz": [0.909182, -0.0819809, 0.347277, 0.214629], "convention": "sapien"}}
"""
PROMPTS_JSON = '{"can": {"points": [[240, 300]]}, "pot": {"points": [[300, 150]]}, "eggplant": {"points": [[410, 230]]}}\n'
D = "D=../shared/data"
LOOP = """\
for t in lift_green_cube put_green_on_yellow; do for b in mujoco sapien; do
  for p in scripted scripted:noise=0.03 random; do
    real2sim eval bridge --task $t --policy $p --episodes 6 --backend $b --obs-mode state --out bridge/results/$b
done; done; done"""

BLOCKS: list[Block] = [
    Block("camera", "fast", lang="json", file="camera.json", content=CAMERA_JSON),
    Block("table-mesh", "fast", [Cmd(
        'python -c "import trimesh; b = trimesh.creation.box((0.7, 0.9, 0.04)); '
        "b.apply_translation((0, 0, -0.02)); b.export('table.obj')\"", key="table.obj")]),
    Block("bundle", "fast", [
        Cmd("real2sim init bridge --frames $D/bridge/stack_cube_first_frame.png --camera camera.json "
            "--robot widowx250s", key="init"),
        Cmd("real2sim add-object bridge green_cube  --mesh $D/objects/green_cube_3cm/textured.dae  --density 1000",
            key="add-object green_cube"),
        Cmd("real2sim add-object bridge yellow_cube --mesh $D/objects/yellow_cube_3cm/textured.dae --density 1000",
            key="add-object yellow_cube"),
        Cmd("real2sim add-object bridge table --mesh table.obj --position 0.45,0,0 --fixed", key="add-object table"),
    ], prelude=D),
    Block("tasks", "fast", [
        Cmd("""real2sim add-task bridge lift_green_cube --instruction "pick up the green cube" --time-limit 8 \\
  --success '{"type": "lifted", "object": "green_cube", "height": 0.04}' \\
  --init '{"objects": {"green_cube": {"xy": [[0.24, 0.08], [0.28, 0.12]], "yaw": [-0.3, 0.3]}}}'""",
            key="add-task lift_green_cube"),
        Cmd("""real2sim add-task bridge put_green_on_yellow --instruction "put the green cube on the yellow cube" \\
  --time-limit 10 --success '{"type": "on_top", "object": "green_cube", "support": "yellow_cube"}' \\
  --init '{"objects": {"green_cube": {"xy": [[0.24, 0.08], [0.28, 0.12]], "yaw": [-0.3, 0.3]},
                       "yellow_cube": {"xy": [[0.40, -0.10], [0.44, -0.06]], "yaw": [-0.3, 0.3]}},
           "min_separation": 0.06}'""", key="add-task put_green_on_yellow"),
        Cmd("real2sim check bridge --quick", key="check --quick"),
    ]),
    Block("masks", "fast", [
        Cmd("real2sim masks bridge --entity green_cube  --point 170,242 --backend grabcut --no-propagate",
            key="masks green_cube"),
        Cmd("real2sim masks bridge --entity yellow_cube --point 464,195 --backend grabcut --no-propagate",
            key="masks yellow_cube"),
        Cmd("real2sim masks bridge --entity robot --box 285,0,465,195 --backend grabcut --no-propagate",
            key="masks robot"),
    ]),
    Block("table", "fast", [
        Cmd("real2sim table bridge                # refused by its quality gate: exit 2, table_height kept",
            expect_rc=2, key="table refused"),
        Cmd("real2sim table bridge --accept-poor  # applied knowingly; the stage stays 'poor'", key="table"),
    ]),
    Block("build", "slow", [
        Cmd("real2sim build bridge --method primitive   # plate -> robot joints -> plate again without the arm\n"
            "                                           # -> align -> texture -> collision -> inertial", key="build"),
        Cmd("real2sim robot-appearance bridge           # link colours under the robot mask",
            key="robot-appearance"),
        Cmd("real2sim check bridge", key="check"),
    ]),
    Block("eval", "slow", [
        Cmd("real2sim export bridge                     # MJCF + USD + SAPIEN, each loaded back", key="export"),
        Cmd(LOOP, key="eval"),
        Cmd("real2sim metrics --real bridge/results/mujoco/sim.csv --sim bridge/results/sapien/sim.csv \\\n"
            "  --plot engines.png --json engines.json", key="metrics"),
    ]),
    Block("all-at-once", "slow", [
        Cmd("python -m real2sim.demos.bridge ../shared/data out/ --episodes 6 \\\n"
            "  --task lift_green_cube --task put_green_on_yellow", key="bridge function"),
    ]),
    Block("clip-prompts", "slow", lang="json", file="prompts.json", content=PROMPTS_JSON),
    Block("clip", "slow", [
        Cmd("real2sim init clip --frames $D/bridge/bridge_real_1.mp4 --camera camera.json --robot widowx "
            "--prompts prompts.json", key="clip"),
    ], prelude=D),
    Block("demo", "demo", [Cmd("real2sim demo --out demo_out", key="demo")]),
]


def blocks(parts=PARTS) -> list[Block]:
    return [b for b in BLOCKS if b.part in parts]


# -- running ------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    """What a run did: per command its exit code, output and seconds; per block the bundle's reports after it."""

    work: Path
    parts: tuple
    data: Path | None
    commands: list[dict] = field(default_factory=list)
    snapshots: dict[str, Path] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def load(cls, out: Path, data: Path | None) -> "Run":
        """The run a previous ``run_journey(out, ...)`` left in ``out`` (to collect its numbers again)."""
        out = Path(out).resolve()
        cmds = json.loads((out / "commands.json").read_text())
        snaps = {p.name: p for p in (out / "snapshots").iterdir()} if (out / "snapshots").is_dir() else {}
        parts = tuple(sorted({b.part for b in BLOCKS if b.name in snaps}))
        return cls(out / "work", parts, data, cmds, snaps, {c["key"]: c["seconds"] for c in cmds})

    def output(self, key: str) -> str:
        for c in self.commands:
            if c["key"] == key:
                return c["stdout"] + c["stderr"]
        raise KeyError(key)


def _env(extra: dict | None = None) -> dict:
    exe_dir = str(Path(sys.executable).parent)
    # the commands run the real2sim this script imports (a checkout's, not another one the venv may point at)
    src = str(Path(__file__).resolve().parents[2])
    pp = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PATH": exe_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "200",
           "PYTHONPATH": src + (os.pathsep + pp if pp else ""),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONUNBUFFERED": "1"}
    env.update(extra or {})
    return env


def _python_shim(bin_dir: Path) -> None:
    """``python`` in the commands is this interpreter (the one whose ``real2sim`` is installed)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python"
    if shim.is_symlink() or shim.exists():
        shim.unlink()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # a symlink would lose the venv
    shim.chmod(0o755)


def run_journey(out: Path, data: Path | None, parts=("fast",), timeout: float = 1800.0,
                cache: Path | None = None) -> Run:
    """Run the blocks of ``parts`` in order in ``out/work`` (``out/shared/data`` links to ``data``)."""
    out = Path(out).resolve()
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if data is not None:
        link = out / "shared" / "data"
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path(data).resolve(), target_is_directory=True)
    bin_dir = out / "bin"
    _python_shim(bin_dir)
    env = _env({"REAL2SIM_CACHE": str(cache or out / "cache")})
    env["PATH"] = str(bin_dir) + os.pathsep + env["PATH"]
    run = Run(work, tuple(parts), data)
    for b in blocks(parts):
        if b.part != "demo" and data is None:
            raise JourneyError(f"block {b.name} needs the Bridge data folder (../shared/data)")
        if b.file:
            (work / b.file).write_text(b.content)
            continue
        for c in b.cmds:
            key = c.key or c.text.split("#")[0].strip()
            script = "set -e -o pipefail\n" + (b.prelude + "\n" if b.prelude else "") + c.text + "\n"
            t0 = time.perf_counter()
            proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            dt = time.perf_counter() - t0
            run.commands.append({"block": b.name, "key": key, "text": c.text, "rc": proc.returncode,
                                 "stdout": proc.stdout, "stderr": proc.stderr, "seconds": round(dt, 2)})
            run.seconds[key] = round(dt, 2)
            log.info("journey: %-28s rc %d  %.1f s", key, proc.returncode, dt)
            (out / "commands.json").write_text(json.dumps(run.commands, indent=1))
            if proc.returncode != c.expect_rc:
                tail = (proc.stdout + proc.stderr)[-3000:]
                raise JourneyError(f"block {b.name}: `{c.text.splitlines()[0]}` exited {proc.returncode} "
                                   f"(expected {c.expect_rc})\n{tail}")
        snap = out / "snapshots" / b.name
        if snap.exists():
            shutil.rmtree(snap)
        snap.mkdir(parents=True)
        bundle = work / "bridge"
        if bundle.is_dir():
            shutil.copy2(bundle / "scene.json", snap / "scene.json")
            if (bundle / "reports").is_dir():
                for f in (bundle / "reports").glob("*.json"):
                    shutil.copy2(f, snap / f.name)
            for f in (bundle / "masks" / "000000").glob("*.png"):
                shutil.copy2(f, snap / f"mask_{f.name}")
        run.snapshots[b.name] = snap
    return run


# -- the numbers ------------------------------------------------------------------------------------------------
def _json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def collect(run: Run) -> dict[str, float | int | str]:
    """The numbers the page quotes, from the bundles and reports the run left (flat: key -> value)."""
    v: dict = {}
    w, snaps = run.work, run.snapshots
    for key, s in run.seconds.items():
        v[f"s.{key}"] = s
    if "masks" in snaps:
        _masks(v, snaps["masks"], run.data)
    if "table" in snaps:
        t = _json(snaps["table"] / "table.json")
        v["table.height_mm"] = t["height_m"] * 1000
        v["table.spread_mm"] = t["spread_m"] * 1000
        for oid in ("green_cube", "yellow_cube"):
            v[f"table.bottom_mm.{oid}"] = t["sources"][oid]["bottom_m"] * 1000
            v[f"table.iou.{oid}"] = t["sources"][oid]["mean_iou"]
        msg = " ".join(run.output("table refused").split())
        m = re.search(r"spread_mm ([\d.]+) misses the bar", msg)
        if not m:
            raise JourneyError(f"`real2sim table bridge` did not name its number and bar: {msg[-500:]}")
        v["table.refused_spread_mm"] = float(m.group(1))
    if "build" in snaps:
        _build(v, snaps["build"], run)
    if "eval" in snaps:
        _eval(v, w)
    if "all-at-once" in snaps:
        _function(v, w / "out" / "scene" / "reports" / "bridge.json", w)
    if "clip" in snaps:
        _clip(v, w / "clip")
    if "demo" in snaps:
        _demo(v, w / "demo_out")
    return v


def _masks(v: dict, snap: Path, data: Path) -> None:
    """The click masks (as step 3 left them: build replaces the robot's) against a reference made with the
    person-made plate and the cubes' hues (ground truth only)."""
    from real2sim.core.imaging import iou, read_mask, read_rgb
    from real2sim.demos.bridge import FRAME, PERSON_PLATE, reference_cube_masks

    ref = reference_cube_masks(read_rgb(data / FRAME), read_rgb(data / PERSON_PLATE))
    for oid in ("green_cube", "yellow_cube", "robot"):
        m = read_mask(snap / f"mask_{oid}.png")
        v[f"mask.px.{oid}"] = int(m.sum())
        if oid in ref:
            v[f"mask.iou.{oid}"] = iou(m, ref[oid])


def _build(v: dict, snap: Path, run: Run) -> None:
    scene = _json(snap / "scene.json")
    plate = _json(snap / "plate.json")
    v["plate.inpainted_pct"] = plate["inpainted_fraction"] * 100
    fit = _json(snap / "robot_fit.json")
    v["fit.iou_start"], v["fit.iou_fitted"] = fit["iou_start"], fit["iou_fitted"]
    for i, q in enumerate(scene["robot"]["joint_positions"]):
        v[f"fit.q{i}"] = q
    al = _json(snap / "alignment.json")["objects"]
    tx = _json(snap / "texture.json")["objects"]
    for oid in ("green_cube", "yellow_cube"):
        v[f"align.iou.{oid}"] = al[oid]["mean_iou"]
        v[f"align.residual_px.{oid}"] = al[oid]["residual_px"]
        v[f"align.status.{oid}"] = al[oid]["status"]
        v[f"texture.psnr.{oid}"] = tx[oid]["psnr_db"]
        v[f"texture.coverage_pct.{oid}"] = tx[oid]["coverage"] * 100
        v[f"mass_g.{oid}"] = scene["objects"][oid]["inertial"]["mass"] * 1000
    ap = _json(snap / "robot_appearance.json")
    v["appearance.fitted"], v["appearance.not_seen"] = len(ap["fitted"]), len(ap["not_seen"])
    v["appearance.psnr"] = ap["psnr_db_flat_colours"]
    ins = ap["textures"]["robot_region_psnr_db"]["in_sample"]
    v["appearance.composite_flat"], v["appearance.composite_textured"] = (ins["composite_flat_db"],
                                                                          ins["composite_textured_db"])
    out = " ".join(run.output("check").split())
    m = re.search(r"(\d+) error\(s\), (\d+) warning\(s\)", out)
    v["check.errors"], v["check.warnings"] = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    v["check.stale"] = ", ".join(sorted(re.findall(r"stages\.(\w+): is stale", out))) or "none"
    v["check.poor"] = ", ".join(sorted(re.findall(r"stages\.(\w+): poor", out))) or "none"


def _eval(v: dict, w: Path) -> None:
    import csv

    for eng in ENGINES:
        with open(w / "bridge" / "results" / eng / "sim.csv") as f:
            for row in csv.DictReader(f):
                v[f"rate.{row['task']}.{row['policy']}.{eng}"] = int(row["successes"]) / int(row["trials"])
                v[f"trials.{row['task']}.{row['policy']}.{eng}"] = int(row["trials"])
    met = _json(w / "engines.json")["tasks"]
    for task, m in met.items():
        v[f"mmrv.{task}"] = m["mmrv"]
        v[f"pearson.{task}"] = m["pearson_r"] if m.get("pearson_r") is not None else float("nan")


def _function(v: dict, path: Path, w: Path) -> None:
    from real2sim.core.imaging import iou, read_mask

    rep = _json(path)
    p = rep["plate"]
    v["fn.person_vs_frame_db"] = p["person_plate_vs_frame_outside_masks_psnr_db"]
    v["fn.person_vs_frame_ssim"] = p["person_plate_vs_frame_outside_masks_ssim"]
    v["fn.single_vs_person_db"] = p["single_frame_vs_person_psnr_db"]
    v["fn.single_vs_person_db_masked"] = p["single_frame_vs_person_psnr_db_masked"]
    v["fn.table_mm"] = rep["table_height_m"] * 1000
    for oid in ("green_cube", "yellow_cube"):
        v[f"fn.align.iou.{oid}"] = rep["alignment"][oid]["mean_iou"]
        v[f"fn.texture.psnr.{oid}"] = rep["texture"][oid]["psnr_db"]
        px = rep["alignment_px"]["cubes"][oid]
        v[f"fn.centre_px.{oid}"] = px["mask_centroid_vs_projected_centre_px"]
    rob = rep["alignment_px"]["robot"]
    v["fn.robot.mean_px"] = rob["silhouette_vs_mask"]["mean_px"]
    v["fn.robot.p90_px"] = rob["silhouette_vs_mask"]["p90_px"]
    v["fn.robot.iou"] = rob["iou_render_vs_mask"]
    v["fn.fit.iou"] = rep["robot_fit"]["iou_fitted"]
    v["fn.appearance.psnr"] = rep["robot_appearance"].get("psnr_db", float("nan"))
    v["fn.appearance.composite_flat"] = rep["robot_appearance"].get("psnr_db_composite_flat", float("nan"))
    v["fn.appearance.composite_textured"] = rep["robot_appearance"].get("psnr_db_composite_textured", float("nan"))
    g = rep["visual_gap"]
    for plate in ("bundle_plate", "person_made_plate"):
        for step in ("plate_only", "plus_objects", "plus_robot", "plus_objects_unlit_raster"):
            for region in ("whole", "cubes", "union"):
                for k in ("psnr_db", "ssim"):
                    v[f"gap.{plate}.{step}.{region}.{k}"] = g[plate][step][region][k]
    for region, n in g["region_pixels"].items():
        v[f"gap.px.{region}"] = n
    for eng in ENGINES:
        for task in TASKS:
            for pol in POLICIES:
                v[f"fn.rate.{task}.{pol}.{eng}"] = rep["success"][eng][task][pol]["rate"]
    for task, m in rep["metrics"].items():
        v[f"fn.mmrv.{task}"] = m["mmrv"]
    v["fn.total_s"] = rep["total_seconds"]
    # the function's robot mask (plate difference near the fitted silhouette) vs the CLI's GrabCut box mask
    # (after build the CLI bundle's robot mask is the fitted one: the GrabCut box mask is in the masks snapshot)
    a = read_mask(w / "out" / "scene" / "masks" / "000000" / "robot.png")
    box = w.parent / "snapshots" / "masks" / "mask_robot.png"
    if box.is_file():
        v["fn.robot_mask_vs_box_iou"] = iou(a, read_mask(box))


def _clip(v: dict, root: Path) -> None:
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import psnr, read_mask, read_rgb

    s = _json(root / "reports" / "capture_summary.json")
    for ent in ("can", "pot", "eggplant"):
        for state in ("rest", "occluded", "moved"):
            v[f"clip.{ent}.{state}"] = int(s["masks"]["entities"][ent]["states"].get(state, 0))
    b = Bundle.load(root)
    cap = b.manifest.capture
    v["clip.frames"] = len(cap.frames)
    plate = read_rgb(b.path(cap.plate))
    can0 = read_mask(b.path(cap.masks["000000"]["can"]), plate.shape[:2])
    v["clip.plate_vs_last_db"] = psnr(plate, read_rgb(b.path(cap.frames[-1].image)), can0)
    v["clip.inpainted_pct"] = float(s["plate"]["inpainted_fraction"]) * 100


def _demo(v: dict, root: Path) -> None:
    rep = _json(root / "reports" / "demo.json")
    for eng, pols in rep["success"].items():
        for pol, rate in pols.items():
            v[f"demo.rate.{pol}.{eng}"] = rate
    v["demo.mmrv"], v["demo.pearson"] = rep["mmrv"], rep["pearson"]
    errs = rep["pose_error_mm"]
    v["demo.pose_before_mm"] = min(e["before"] for e in errs.values())
    v["demo.pose_before_max_mm"] = max(e["before"] for e in errs.values())
    v["demo.pose_after_mm"] = max(e["after"] for e in errs.values())
    v["demo.total_s"] = sum(rep["stage_seconds"].values())


# -- the page -----------------------------------------------------------------------------------------------------
IOU, DB, MM, PX, RAD, EXACT = 0.01, 0.3, 0.5, 0.3, 0.005, 0.0


class Values:
    """The numbers a section quotes: ``v(key, fmt, tol)`` formats one (``?`` when this run did not measure it)
    and records its format and tolerance (``None``: never checked, e.g. timings)."""

    def __init__(self, values: dict, annotate: bool = False):
        self.values, self.annotate = values, annotate
        self.spec: dict[str, tuple[str, float | None]] = {}

    def __call__(self, key: str, fmt: str = ".2f", tol: float | None = None) -> str:
        self.spec[key] = (fmt, tol)
        val = self.values.get(key)
        text = "?" if val is None else (str(val) if fmt == "s" else format(val, fmt))
        return f"\x01{key}\x02{text}\x03" if self.annotate else text

    def s(self, key: str) -> str:
        """An approximate timing in whole seconds (never checked)."""
        return "~" + self(key, ".0f", None) + " s"


def _fence(block: str) -> str:
    b = next(x for x in BLOCKS if x.name == block)
    return f"```{b.lang}\n{b.text()}\n```"


def _rates_table(v: Values, prefix: str) -> str:
    rows = ["| task | policy | MuJoCo | SAPIEN |", "|---|---|---|---|"]
    for task in TASKS:
        for i, pol in enumerate(POLICIES):
            rows.append(f"| {task if i == 0 else ''} | {pol} | " + " | ".join(
                v(f"{prefix}{task}.{pol}.{e}", ".2f", EXACT) for e in ENGINES) + " |")
    return "\n".join(rows)


def _sec_masks(v: Values) -> str:
    return (f"GrabCut from one click, no plate: {v('mask.px.green_cube', 'd', EXACT)} px (green), "
            f"{v('mask.px.yellow_cube', 'd', EXACT)} px (yellow), {v('mask.px.robot', 'd', EXACT)} px (robot box).\n"
            "Against a reference made from the person-made plate and the cube hues, IoU is "
            f"**{v('mask.iou.yellow_cube', '.2f', IOU)}** (yellow)\nand **{v('mask.iou.green_cube', '.2f', IOU)}** "
            "(green: the reference includes the cube's shadow, the click mask does not; the click mask is the\n"
            "better one).")


def _sec_table(v: Values) -> str:
    return (f"- The first command exits 2: \"table: spread_mm {v('table.refused_spread_mm', '.2f', MM)} misses the bar "
            "(spread of the objects' bottoms <= 10 mm)\",\n"
            "  and keeps `table_height`; `--accept-poor` applies it and the stage stays `poor` (`real2sim check`, the\n"
            "  review page's Overview, `export` and `eval` say so).\n"
            f"- Each cube aligned with a free height (IoU {v('table.iou.green_cube', '.2f', IOU)} green, "
            f"{v('table.iou.yellow_cube', '.2f', IOU)} yellow): bottoms at "
            f"{v('table.bottom_mm.green_cube', '+.1f', MM)} mm (green)\n  and "
            f"{v('table.bottom_mm.yellow_cube', '+.1f', MM)} mm (yellow), "
            f"{v('table.spread_mm', '.1f', MM)} mm apart; `table_height` = their median, "
            f"**{v('table.height_mm', '+.1f', MM)} mm** above `base_link`;\n  the table box follows.")


def _sec_build(v: Values) -> str:
    q = ", ".join(v(f"fit.q{i}", ".4f", RAD) for i in range(8))
    return (
        f"- **Plate**: one frame, so the pixels under the masks are inpainted ({v('plate.inpainted_pct', '.1f', 0.3)} % of "
        "the image, the robot's\n  box included).\n"
        f"- **Robot joints** (`robot_fit`): silhouette IoU {v('fit.iou_start', '.2f', IOU)} -> "
        f"**{v('fit.iou_fitted', '.2f', IOU)}** from the start pose; written to `scene.json`:\n"
        f"  `[{q}]`.\n"
        f"- **Alignment** (x, y, yaw on the table): IoU **{v('align.iou.green_cube', '.3f', IOU)}** (green), "
        f"**{v('align.iou.yellow_cube', '.3f', IOU)}** (yellow), both\n"
        f"  `{v('align.status.green_cube', 's', EXACT)}`; residual {v('align.residual_px.green_cube', '.2f', PX)} / "
        f"{v('align.residual_px.yellow_cube', '.2f', PX)} px.\n"
        f"- **Texture** (one view: {v('texture.coverage_pct.green_cube', '.0f', 1.0)} % of the surface seen, "
        f"the rest filled): re-render PSNR **{v('texture.psnr.green_cube', '.1f', DB)} dB**\n"
        f"  (green), **{v('texture.psnr.yellow_cube', '.1f', DB)} dB** (yellow) over the mask.\n"
        f"- **Collision**: a box per cube and for the table. **Mass** {v('mass_g.green_cube', '.1f', 0.1)} g per cube.\n"
        f"- **Robot appearance**: {v('appearance.fitted', 'd', EXACT)} links seen and fitted, "
        f"{v('appearance.not_seen', 'd', EXACT)} not seen; flat-colour PSNR\n"
        f"  **{v('appearance.psnr', '.1f', DB)} dB** under the robot mask; robot region of the composite "
        f"{v('appearance.composite_flat', '.1f', DB)} dB with the flat colours,\n"
        f"  **{v('appearance.composite_textured', '.1f', DB)} dB** with the link textures (in-sample: one frame; "
        "[texture.md](texture.md#robot-appearance)).\n"
        f"- **check**: {v('check.errors', 'd', EXACT)} errors, {v('check.warnings', 'd', EXACT)} warnings "
        f"(poor: {v('check.poor', 's', EXACT)}; stale: {v('check.stale', 's', EXACT)}).")


def _sec_eval(v: Values) -> str:
    return ("Success rates (6 episodes each, state observations, seeded):\n\n" + _rates_table(v, "rate.") + "\n\n"
            f"MuJoCo vs SAPIEN: MMRV **{v('mmrv.lift_green_cube', '.2f', 0.01)}** (lift) and "
            f"**{v('mmrv.put_green_on_yellow', '.2f', 0.01)}** (stack), Pearson r "
            f"**{v('pearson.lift_green_cube', '.2f', 0.01)}** (lift) and\n"
            f"**{v('pearson.put_green_on_yellow', '.2f', 0.01)}** (stack).")


TIMED = {"init": "`init`", "add-object green_cube": "`add-object` (a cube)", "masks robot": "`masks` (the robot box)",
         "table": "`table --accept-poor`", "build": "`build`", "robot-appearance": "`robot-appearance`",
         "export": "`export`", "eval": "the `eval` loop (2 tasks x 2 engines x 3 policies x 6 episodes)",
         "metrics": "`metrics`", "bridge function": "all at once (`python -m real2sim.demos.bridge`)",
         "clip": "`init clip` (37 frames)", "demo": "`real2sim demo`"}


def _sec_timings(v: Values) -> str:
    rows = ["| command | seconds |", "|---|---|"]
    for k, label in TIMED.items():
        rows.append(f"| {label} | {v.s('s.' + k)} |")
    return "\n".join(rows)


def _gap_table(v: Values, plate: str) -> str:
    rows = ["| step | PSNR whole | SSIM whole | PSNR cubes | SSIM cubes | PSNR union | SSIM union |",
            "|---|---|---|---|---|---|---|"]
    names = {"plate_only": "plate only", "plus_objects": "+ objects", "plus_robot": "+ robot",
             "plus_objects_unlit_raster": "+ objects, unlit textured raster instead of MuJoCo"}
    for step, label in names.items():
        cells = []
        for region in ("whole", "cubes", "union"):
            cells.append(v(f"gap.{plate}.{step}.{region}.psnr_db", ".1f", DB))
            cells.append(v(f"gap.{plate}.{step}.{region}.ssim", ".3f", 0.01))
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _sec_function(v: Values) -> str:
    return (
        f"Over the whole image, over the cubes (real cube masks + rendered ones, {v('gap.px.cubes', 'd', 50)} px) "
        f"and over the union of all\nmasks (cubes + robot, {v('gap.px.union', 'd', 200)} px). Bundle plate "
        "(single frame):\n\n" + _gap_table(v, "bundle_plate") + "\n\n"
        "With the person-made plate (not registered with the frame: it agrees with the frame where neither robot nor\n"
        f"cubes are at only {v('fn.person_vs_frame_db', '.1f', DB)} dB PSNR / SSIM "
        f"{v('fn.person_vs_frame_ssim', '.2f', 0.01)}, so the function keeps the single-frame plate):\n\n"
        + _gap_table(v, "person_made_plate") + "\n\n"
        f"Single-frame plate vs person-made plate: {v('fn.single_vs_person_db', '.1f', DB)} dB whole image, "
        f"{v('fn.single_vs_person_db_masked', '.1f', DB)} dB under the masks\n(indicative only, for that reason). "
        f"Table height {v('fn.table_mm', '+.1f', MM)} mm; alignment IoU {v('fn.align.iou.green_cube', '.3f', IOU)} "
        f"(green), {v('fn.align.iou.yellow_cube', '.3f', IOU)} (yellow);\ntexture PSNR "
        f"{v('fn.texture.psnr.green_cube', '.1f', DB)} / {v('fn.texture.psnr.yellow_cube', '.1f', DB)} dB; "
        f"robot fit IoU {v('fn.fit.iou', '.2f', IOU)}; robot appearance {v('fn.appearance.psnr', '.1f', DB)} dB under "
        f"its mask, robot region of the\ncomposite {v('fn.appearance.composite_flat', '.1f', DB)} dB flat -> "
        f"{v('fn.appearance.composite_textured', '.1f', DB)} dB with the link textures.\n\n"
        f"Alignment in pixels: cubes {v('fn.centre_px.green_cube', '.2f', PX)} px (green) and "
        f"{v('fn.centre_px.yellow_cube', '.2f', PX)} px (yellow) between mask centroid and\n"
        f"projected centre; robot silhouette vs robot mask: mean boundary distance **{v('fn.robot.mean_px', '.1f', PX)} px** "
        f"(90th percentile\n{v('fn.robot.p90_px', '.1f', 1.0)} px), IoU {v('fn.robot.iou', '.2f', IOU)}. "
        "The function's robot mask (the difference to the person-made plate, kept within 7 px\n"
        "of the silhouette at the fitted joints) agrees with the GrabCut box mask of step 3 at IoU "
        f"{v('fn.robot_mask_vs_box_iou', '.2f', IOU)}.\n\n"
        "Its success rates (6 episodes each; the same seeds as the commands, its own masks, plate and table):\n\n"
        + _rates_table(v, "fn.rate.") + "\n\n"
        f"MMRV {v('fn.mmrv.lift_green_cube', '.2f', 0.01)} (lift), {v('fn.mmrv.put_green_on_yellow', '.2f', 0.01)} "
        f"(stack). {v.s('fn.total_s')} in all.")


def _sec_clip(v: Values) -> str:
    def st(e):
        return ", ".join(f"`{s}` {v(f'clip.{e}.{s}', 'd', EXACT)}" for s in ("rest", "occluded", "moved"))
    return (f"{v.s('s.clip')} on 2 cores for {v('clip.frames', 'd', EXACT)} frames. Frames by state: the can "
            f"{st('can')};\nthe pot {st('pot')}; the eggplant {st('eggplant')}.\nThe plate where the can stood in "
            f"frame 0 agrees with the last frame (the can carried away) at {v('clip.plate_vs_last_db', '.1f', DB)} dB;"
            f"\n{v('clip.inpainted_pct', '.1f', 0.3)} % of the plate is inpainted (under the pot and the eggplant, "
            "which never moved).")


def _sec_demo(v: Values) -> str:
    eng = [e for e in ENGINES]
    # one episode in six: the demo's hulls come from CoACD, bounded in time, and two runs on a loaded machine
    # differed by one SAPIEN episode of the scripted policy (0.67 vs 0.83)
    rates = "; ".join(f"{p} " + " / ".join(v(f"demo.rate.{p}.{e}", ".2f", 0.17) for e in eng) for p in POLICIES)
    return (f"{v.s('demo.total_s')} of stages on 2 cores (empty collision cache). Five objects start 5-10 mm "
            f"off (ADD-S {v('demo.pose_before_mm', '.1f', MM)}-{v('demo.pose_before_max_mm', '.1f', MM)} mm);\n"
            f"after alignment the worst is {v('demo.pose_after_mm', '.1f', MM)} mm. Success on the scene's first task "
            f"(MuJoCo / SAPIEN):\n{rates};\n"
            f"MMRV {v('demo.mmrv', '.3f', 0.06)}, Pearson r {v('demo.pearson', '.2f', 0.1)}. The demo's rates are "
            "checked to one episode in six: its hulls come\nfrom CoACD, bounded in time, and two runs on a loaded "
            "machine differed by one SAPIEN episode.")


SECTIONS: dict[str, Callable[[Values], str]] = {
    "all-at-once": lambda v: _fence("all-at-once"),
    "camera": lambda v: _fence("camera"),
    "table-mesh": lambda v: _fence("table-mesh"),
    "bundle": lambda v: _fence("bundle"),
    "tasks": lambda v: _fence("tasks"),
    "masks": lambda v: _fence("masks"),
    "masks-numbers": _sec_masks,
    "table": lambda v: _fence("table"),
    "table-numbers": _sec_table,
    "build": lambda v: _fence("build"),
    "build-numbers": _sec_build,
    "eval": lambda v: _fence("eval"),
    "eval-numbers": _sec_eval,
    "timings": _sec_timings,
    "function-numbers": _sec_function,
    "clip-prompts": lambda v: _fence("clip-prompts"),
    "clip": lambda v: _fence("clip"),
    "clip-numbers": _sec_clip,
    "demo": lambda v: _fence("demo"),
    "demo-numbers": _sec_demo,
}


def render(name: str, values: dict, annotate: bool = False) -> tuple[str, dict]:
    v = Values(values, annotate)
    return SECTIONS[name](v), v.spec


@dataclass
class Section:
    name: str
    start: int
    """Line index (0-based) of the first line after the begin marker."""
    lines: list[str]


def parse_doc(text: str, doc: str = "docs/journey.md") -> list[Section]:
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j].strip() != END:
                if BEGIN.match(lines[j]):
                    raise JourneyError(f"{doc}:{j + 1}: a begin marker inside section {m.group(1)} (no {END})")
                j += 1
            if j == len(lines):
                raise JourneyError(f"{doc}:{i + 1}: section {m.group(1)} has no {END}")
            out.append(Section(m.group(1), i + 1, lines[i + 1:j]))
            i = j
        i += 1
    return out


ANNOT = re.compile("\x01([^\x02]*)\x02([^\x03]*)\x03")


def _line_pattern(annotated: str, spec: dict) -> tuple[re.Pattern, list[str]]:
    parts, keys, pos = [], [], 0
    for m in ANNOT.finditer(annotated):
        parts.append(re.escape(annotated[pos:m.start()]))
        key = m.group(1)
        parts.append("(.+?)" if spec[key][0] == "s" else f"({NUMBER})")
        keys.append(key)
        pos = m.end()
    parts.append(re.escape(annotated[pos:]))
    return re.compile("".join(parts)), keys


def _plain(annotated: str) -> str:
    return ANNOT.sub(lambda m: m.group(2), annotated)


def compare_section(sec: Section, values: dict, doc: str = "docs/journey.md") -> tuple[list[str], dict]:
    """Problems (each naming its line) between the page's section and the run; and the values the page quotes."""
    annotated, spec = render(sec.name, values, annotate=True)
    want = annotated.split("\n")
    problems, quoted = [], {}
    for i in range(max(len(want), len(sec.lines))):
        where = f"{doc}:{sec.start + i + 1}"
        if i >= len(want):
            problems.append(f"{where}: section {sec.name} has an extra line: {sec.lines[i]!r}")
            break
        if i >= len(sec.lines):
            problems.append(f"{where}: section {sec.name} ends early; expected {_plain(want[i])!r}")
            break
        pat, keys = _line_pattern(want[i], spec)
        m = pat.fullmatch(sec.lines[i])
        if not m:
            problems.append(f"{where}: stale line in section {sec.name}:\n    page: {sec.lines[i]!r}\n"
                            f"    run:  {_plain(want[i])!r}")
            continue
        for key, got in zip(keys, m.groups()):
            quoted[key] = got
            fmt, tol = spec[key]
            if tol is None or key not in values or got == "?":
                continue
            fresh = values[key]
            if fmt == "s":
                ok = got == str(fresh)
            else:
                try:
                    a, b = float(got), float(format(fresh, fmt))
                    ok = abs(a - b) <= tol + 1e-9 or (a != a and b != b)  # nan on both sides agrees
                except ValueError:
                    ok = False
            if not ok:
                fresh_txt = fresh if fmt == "s" else format(fresh, fmt)
                problems.append(f"{where}: {key} is quoted as {got}, the run measured {fresh_txt} "
                                f"(tolerance {tol}; section {sec.name})")
    return problems, quoted


def check_doc(doc_path: Path, values: dict, parts=PARTS) -> list[str]:
    """Every problem between the page and the run: missing or unknown sections, stale lines, drifted numbers."""
    doc = _doc_name(doc_path)
    secs = parse_doc(Path(doc_path).read_text(), doc)
    problems = []
    names = [s.name for s in secs]
    for name in SECTIONS:
        if name not in names:
            problems.append(f"{doc}: section {name} is missing (<!-- journey:begin {name} -->)")
    for s in secs:
        if s.name not in SECTIONS:
            problems.append(f"{doc}:{s.start}: unknown section {s.name}")
            continue
        problems += compare_section(s, values, doc)[0]
    return problems


def write_doc(doc_path: Path, values: dict) -> list[str]:
    """Rewrite the page's sections from ``values``; numbers this run did not measure keep the page's value.
    Returns the keys still unmeasured (``?`` on the page)."""
    doc_path = Path(doc_path)
    text = doc_path.read_text()
    lines = text.split("\n")
    secs = parse_doc(text, _doc_name(doc_path))
    missing = []
    for s in reversed(secs):
        if s.name not in SECTIONS:
            raise JourneyError(f"{doc_path}:{s.start}: unknown section {s.name}")
        _, quoted = compare_section(s, values)
        merged = dict(values)
        _, spec = render(s.name, values)
        for key, (fmt, _) in spec.items():
            if key not in merged and quoted.get(key, "?") != "?":
                got = quoted[key]
                merged[key] = got if fmt == "s" else int(got) if fmt == "d" else float(got)
            if key not in merged:
                missing.append(key)
        new, _ = render(s.name, merged)
        lines[s.start:s.start + len(s.lines)] = new.split("\n")
    tmp = doc_path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(doc_path)
    return missing


def _doc_name(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def default_doc() -> Path:
    return Path(__file__).resolve().parents[2] / "docs" / "journey.md"


def default_data() -> Path | None:
    d = Path(__file__).resolve().parents[3] / "shared" / "data"
    return d if d.is_dir() else None


def main(argv=None) -> int:
    """``python -m real2sim.demos.journey [--part fast|slow|demo] [--check | --write-doc]``: run docs/journey.md."""
    p = argparse.ArgumentParser(prog="python -m real2sim.demos.journey", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=None,
                   help="the Bridge data folder (default: ../shared/data next to the repository, when present)")
    p.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    p.add_argument("--part", action="append", choices=PARTS,
                   help="parts to run (repeatable; default: fast with the data, demo without)")
    p.add_argument("--doc", type=Path, default=None, help="the page (default: docs/journey.md of the repository)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail, naming the stale line, if the page disagrees")
    mode.add_argument("--write-doc", action="store_true", help="rewrite the page's generated sections")
    p.add_argument("--json", type=Path, default=None, help="write the measured numbers here")
    p.add_argument("--collect", action="store_true",
                   help="collect the numbers from the run already in --out instead of running again")
    p.add_argument("--values", type=Path, default=None,
                   help="use the numbers a run wrote with --json instead of running (to rewrite or check the page)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    data = a.data if a.data is not None else default_data()
    if data is not None and not (Path(data) / "bridge" / "stack_cube_first_frame.png").is_file():
        p.error(f"--data {data}: no bridge/stack_cube_first_frame.png there; point it at ../shared/data")
    parts = set(a.part or (("fast",) if data is not None else ("demo",)))
    if "slow" in parts:
        parts.add("fast")  # the slow part continues the bundle the fast part made
    parts = tuple(x for x in PARTS if x in parts)
    if data is None and set(parts) - {"demo"}:
        p.error("the fast and slow parts need the Bridge data folder (--data ../shared/data)")
    doc = a.doc or default_doc()
    if (a.check or a.write_doc) and not doc.is_file():
        p.error(f"--doc {doc} does not exist")
    tmp = None
    out = a.out
    if out is None:
        tmp = tempfile.mkdtemp(prefix="journey_")
        out = Path(tmp)
    try:
        if a.values:
            values = json.loads(a.values.read_text())
        elif a.collect:
            if a.out is None:
                p.error("--collect needs --out (the folder of an earlier run)")
            values = collect(Run.load(out, data))
        else:
            values = collect(run_journey(out, data, parts))
    except JourneyError as exc:
        log.error("%s", exc)
        return 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(values, indent=1, sort_keys=True))
    if a.write_doc:
        missing = write_doc(doc, values)
        log.info("wrote %s (%d numbers from this run; %d never measured, left as '?'%s)", doc, len(values),
                 len(missing), f": {', '.join(missing[:8])}..." if missing else "")
        return 0
    if a.check:
        problems = check_doc(doc, values)
        for pr in problems:
            log.error("%s", pr)
        what = "the numbers of --values" if a.values else f"the run ({', '.join(parts)})"
        log.info("%s: %s", doc, f"{len(problems)} problem(s)" if problems else f"agrees with {what}")
        return 1 if problems else 0
    for k in sorted(values):
        log.info("%s = %s", k, values[k])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
