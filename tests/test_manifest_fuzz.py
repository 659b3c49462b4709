"""The loader and ``real2sim check`` never crash and never let a known-invalid value through (issue 16, items 4-5).

One validation pass per field type (real2sim.core.manifest.FieldReader) is shared by ``Bundle.load``, ``check``
and the editors; these tests hold it to the project's own errors (Real2SimError) on hostile files."""
from __future__ import annotations

import json

import pytest
from manifest_fuzz import dump_deep, fuzz, make_bases

from real2sim.core.bundle import Bundle
from real2sim.core.errors import ManifestError
from real2sim.pipeline.check import check_bundle


def test_fuzzed_manifests_never_crash_and_never_pass_invalid_values(tmp_path):
    """2,000 seeded mutations of the tabletop recipe and a Bridge-like capture bundle (benchmarks/fuzz_manifest.py
    runs 10,000): every one loads or raises a Real2SimError, and every known-invalid one is refused by the loader
    or reported by check."""
    res = fuzz(tmp_path, 2000, seed=16)
    c = res["counts"]
    assert c.get("crash", 0) == 0, res["examples"]["crash"][:5]
    assert c.get("silent", 0) == 0, res["examples"]["silent"][:5]
    # the fuzzer is not toothless: both outcomes happen, and most known-invalid mutations are refused at load
    assert c.get("rejected", 0) > 900 and c.get("accepted", 0) > 100


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    return make_bases(tmp_path_factory.mktemp("bases"))


def _deep(n):
    v = 0
    for _ in range(n):
        v = [v]
    return v


def _set(d, dotted, value):
    keys = dotted.split(".")
    node = d
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value


def _cases():
    def setter(dotted, value):
        return lambda d: _set(d, dotted, value)

    def rename_object(new):
        return lambda d: d["objects"].__setitem__(new, d["objects"].pop("mug"))

    return [
        ("int_2_64", setter("objects.cube.friction", 2**64), "objects.cube.friction"),
        ("int_2_64_in_vector", setter("objects.cube.pose.position.0", 2**64), "objects.cube.pose.position[0]"),
        ("deep_provenance", setter("provenance.x", _deep(1000)), "<line 1 col "),  # past the parser's stack
        ("deep_init", setter("tasks.lift_cube.init.objects", _deep(100)), "tasks.lift_cube.init.objects"),
        ("nul_in_path", setter("objects.cube.visual.mesh", "objects/cube/vis\x00ual.obj"), "objects.cube.visual.mesh"),
        ("long_stage_name", lambda d: d["stages"].__setitem__("s" * 5000, {"status": "done"}), "stages."),
        ("long_path_component", setter("objects.cube.visual.texture", "x" * 300 + ".png"), "objects.cube.visual.texture"),
        ("collision_size_int", setter("objects.cube.collision", {"kind": "box", "size": 3}), "objects.cube.collision.size"),
        ("stage_outputs_int", lambda d: d["stages"].__setitem__("s", {"status": "done", "outputs": 7}), "stages.s.outputs"),
        ("task_init_list", setter("tasks.lift_cube.init", [1, 2]), "tasks.lift_cube.init"),
        ("capture_masks_str", setter("capture.masks", "abc"), "capture.masks"),
        ("objects_list", setter("objects", [1]), "objects"),
        ("stages_int", setter("stages", 5), "stages"),
        ("provenance_str", setter("provenance", "me"), "provenance"),
        ("tasks_bool", setter("tasks", True), "tasks"),
        ("plate_escapes", setter("capture.plate", "../../etc/passwd"), "capture.plate"),
        ("frame_absolute", setter("capture.frames.0.image", "/etc/passwd"), "capture.frames[0].image"),
        ("success_unknown_object", setter("tasks.lift_cube.success.object", "nosuch"), "tasks.lift_cube.success.object"),
        ("success_inf", setter("tasks.lift_cube.success.height", float("inf")), "tasks.lift_cube.success.height"),
        ("success_string", setter("tasks.lift_cube.success.height", "high"), "tasks.lift_cube.success.height"),
        ("K_third_row", setter("cameras.main.K.2", [0.0, 0.0, 2.0]), "cameras.main.K"),
        ("fx_1e300", setter("cameras.main.K.0.0", 1e300), "cameras.main.K"),
        ("width_1e30", setter("cameras.main.width", 10**30), "cameras.main.width"),
        ("object_id_cafe", rename_object("caf\u00e9"), "objects.caf"),
        ("object_id_kanji", rename_object("\u6f22\u5b57"), "objects."),
        ("schema_version_true", setter("schema_version", True), "schema_version"),
        ("light_zero", setter("lights.0.direction", [0.0, 0.0, 0.0]), "lights[0].direction"),
        ("robot_zero", setter("robot", 0), "robot"),
    ]


@pytest.mark.parametrize("name,mutate,field", _cases(), ids=[c[0] for c in _cases()])
def test_invalid_value_is_refused_naming_the_field(bases, name, mutate, field):
    root, base = bases["bridge"]
    d = json.loads(json.dumps(base))
    mutate(d)
    (root / "scene.json").write_text(dump_deep(d))  # json.dumps itself refuses 1000 levels
    try:
        with pytest.raises(ManifestError) as exc:
            Bundle.load(root)
        assert exc.value.field.startswith(field), (exc.value.field, str(exc.value))
        assert "Fix:" in str(exc.value) or "must" in str(exc.value)
        findings = check_bundle(root)
        assert [f.level for f in findings] == ["error"] and field in findings[0].message
    finally:
        (root / "scene.json").write_text(json.dumps(base))


@pytest.mark.parametrize("raw,where", [(b'{"schema_version": 1, "name": "\xff"}', "<byte 31, line 1>"),
                                       (b"[" * 100000 + b"]" * 100000, "<line 1 col 33>"),
                                       (b'{"schema_version": 1, "name": "a", "table_height": ' + b"9" * 5000 + b"}",
                                        "<root>")])
def test_unreadable_bytes_are_manifest_errors(tmp_path, raw, where):
    (tmp_path / "scene.json").write_bytes(raw)
    with pytest.raises(ManifestError) as exc:
        Bundle.load(tmp_path)
    assert exc.value.field == where
    assert [f.level for f in check_bundle(tmp_path)] == ["error"]


@pytest.mark.parametrize("key", ["plate", "plate_confidence", "frames"])
def test_check_reports_missing_capture_files(bases, key):
    root, base = bases["bridge"]
    d = json.loads(json.dumps(base))
    if key == "frames":
        d["capture"]["frames"][1]["image"] = "capture/frames/nosuch.png"
        where = "capture.frames[1].image"
    else:
        d["capture"][key] = "background/nosuch.png"
        where = f"capture.{key}"
    (root / "scene.json").write_text(json.dumps(d))
    try:
        Bundle.load(root)  # a missing file is not a malformed manifest: check finds it
        errors = [f for f in check_bundle(root, load_meshes=False) if f.level == "error"]
        assert [f.where for f in errors] == [where] and "nosuch.png" in errors[0].message
    finally:
        (root / "scene.json").write_text(json.dumps(base))


def test_the_valid_bases_load_and_check_clean(bases):
    for root, _ in bases.values():
        Bundle.load(root)
        assert [f for f in check_bundle(root) if f.level == "error"] == []
