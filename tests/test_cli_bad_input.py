"""Every CLI command answers bad input with one line on stderr naming the field or file, and a non-zero exit; no
traceback unless --debug (run in process through the CLI's own entry point, as the console script does)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from real2sim.apps.cli import main


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    from real2sim.core.imaging import write_rgb
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    d = tmp_path_factory.mktemp("bad")
    bundle = bundle_from_recipe(builtin_recipe("tabletop"), d / "scene").root
    rng = np.random.default_rng(0)
    img = d / "img.png"
    write_rgb(img, rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
    (d / "notes.txt").write_text("not json {")
    world = [[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0.1, 0.1, 0], [0.05, 0.05, 0.05], [0.1, 0, 0.05]]
    pixels = [[100, 100], [200, 100], [100, 200], [200, 200], [150, 140], [1e5, 50]]  # the last one: a typo
    (d / "far.json").write_text(json.dumps({"pixels": pixels, "world": world}))
    (d / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    assert main(["init", str(d / "frames"), "--frames", str(img), "--no-plate"]) == 0
    return {"B": str(bundle), "F": str(d / "frames"), "IMG": str(img), "TXT": str(d / "notes.txt"),
            "PNG": str(d / "bad.png"), "D": str(d)}


# (argv with {placeholders}, a piece the one error line must contain: the field, file or name at fault)
CASES = [
    ("add-object {B} thing --mesh {D}/missing.obj", "missing.obj"),
    ("add-object {B} bad!id --mesh {TXT}", "object id 'bad!id'"),
    ("add-object {B} thing --mesh {TXT}", "notes.txt"),
    ("add-object {B} thing --mesh {D}/../bad/x.obj --texture {PNG}", "x.obj"),
    ("add-task {B} t --instruction x --success {{bad", "--success"),
    ("add-task {B} t --instruction x --success [1]", "tasks.t.success"),
    ('add-task {B} t --instruction x --success {{"type":"lifted","object":"nosuch"}}', "nosuch"),
    ('add-task {B} t --instruction x --success {{"type":"lifted","object":"cube"}} --time-limit -1', "time_limit_s"),
    ("init {D}/i2 --frames {D}/missing", "missing"),
    ("init {D}/i3 --frames {TXT}", "notes.txt"),
    ("init {D}/i4 --frames {IMG} --camera {TXT}", "notes.txt"),
    ("init {D}/i5 --frames {IMG} --robot nosuch", "nosuch"),
    ("init {D}/i6 --frames {IMG} --prompts {TXT}", "notes.txt"),
    ("calibrate {B} --points {TXT}", "notes.txt"),
    ("calibrate {B} --checkerboard {D}/nosuchdir", "nosuchdir"),
    ("calibrate {B} --points {D}/far.json", "pixels[5]"),
    ("plate --frames {D}/missing --out {D}/p.png", "missing"),
    ("table {B} --board {PNG}", "bad.png"),
    ("segment --image {PNG} --point 1,1 --out {D}/m.png", "bad.png"),
    ("masks {F} --entity nosuch --point 5,5", "unknown entity 'nosuch'"),
    ("masks {B} --entity cube --point 5,5", "no frames"),
    ("fit-robot {B}", "no frames"),
    ("robot-masks {B}", "no frames"),
    ("refine-camera {B} --camera nosuch", "nosuch"),
    ("sysid --trajectories {TXT} --robot widowx", "notes.txt"),
    ("build {D}/nosuch", "nosuch"),
    ("check {D}/nosuch", "nosuch"),
    ("plan --rates 1.5 0.2", "1.5"),
    ("export {D}/nosuch", "nosuch"),
    ("collide {TXT} --out {D}/c", "notes.txt"),
    ("align {B} --object nosuch", "nosuch"),
    ("texture {B} --object nosuch", "nosuch"),
    ("texture {B} --size -5", "texture size -5"),
    ("robot-appearance {B}", "no frames"),
    ("review {D}/nosuch", "nosuch"),
    ("eval {B} --out {D}/res --policy scripted --obs-size big", "--obs-size"),
    ("eval {B} --out {D}/res --policy scripted --obs-size 0x0", "--obs-size"),
    ("eval {B} --out {D}/res --policy replay:path={TXT}", "notes.txt"),
    ("eval {B} --out {D}/res --policy scripted:noise=abc", "scripted:noise=abc"),
    ("eval {B} --out {D}/res --policy nosuch", "unknown policy 'nosuch'"),
    ("eval {B} --out {D}/res --policy scripted --variants [1", "--variants"),
    ("eval {B} --out {D}/res --policy scripted --episodes 0", "episodes"),
    ("eval {B} --out {D}/res --policy scripted --task nosuch", "nosuch"),
    ("eval {B} --out {D}/res --policy scripted --episode-timeout-s 0", "episode_timeout_s"),
    ("eval {B} --out {D}/res --policy scripted --record rlds {D}/ds", "rlds"),
    ("eval {B} --out {D}/res --policy scripted --record lerobot {F}", "--record-resume"),
    ("eval {B} --out {D}/res --policy scripted --record-resume", "--record"),
    ("replay {D}/nosuch", "nosuch"),
    ("replay {F}", "frames"),
    ("eval {B} --out {D}/res --policy scripted --hang-grace-s 0", "hang_grace_s"),
    ("eval {B} --out {D}/res --policy scripted --workers 0", "workers must be >= 1"),
    ("eval {B} --out {D}/res --policy no_such_pack.Policy", "PYTHONPATH"),
    ("metrics --real {D}/missing.csv --sim {TXT}", "missing.csv"),
    ("metrics --real {TXT} --sim {TXT}", "notes.txt"),
    ("demo --out {TXT}", "notes.txt"),
    ("robots check {D}/missing.toml", "missing.toml"),
    ("robots check {TXT}", "must be a .toml, .json or .yaml file"),
    ("robots check nosuch", "nosuch"),
    ("init {D}/i7 --frames {IMG} --robot {D}/missing.toml", "missing.toml"),
    ("scan {D}/nosuch --out {D}/obj", "nosuch"),
    ("scan {TXT} --out {D}/obj", "notes.txt"),
    ("scan {D} --out {D}/obj --board {{bad", "--board"),
    ("add-object {B} thing --scan {D}/nosuch", "nosuch"),
    ("add-object {B} thing --scan {D} --mesh {TXT}", "exactly one of --mesh"),
]


@pytest.mark.parametrize("argv,names", CASES, ids=[c[0].split()[0] + ":" + c[1] for c in CASES])
def test_bad_input_is_one_line_and_a_nonzero_exit(paths, capsys, argv, names):
    capsys.readouterr()
    rc = main([a.format(**paths) for a in argv.split()])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0] and "internal error" not in err and "Traceback" not in err


def test_debug_shows_the_traceback(paths):
    from real2sim.core.errors import Real2SimError

    with pytest.raises(Real2SimError, match="--obs-size"):
        main(["--debug", "eval", paths["B"], "--policy", "scripted", "--obs-size", "big"])


def test_an_unexpected_exception_is_one_line_naming_debug(paths, capsys, monkeypatch):
    from real2sim.apps.cli import build

    def boom(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(build, "build", lambda *a, **k: boom(None))
    rc = main(["build", paths["B"]])
    err = capsys.readouterr().err.strip()
    assert rc == 3 and len(err.splitlines()) == 1 and "ZeroDivisionError" in err and "--debug" in err
