"""Rules the test suite itself keeps: real data only through the ``shared_data`` fixture (so ``realdata`` marks
every test that reads it), and no wall-clock assertions (speed is measured in ``benchmarks/``)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent
TIME_WORDS = re.compile(r"(^|_)(seconds|secs|elapsed|duration|wall|wall_s|time_s)($|_)")


def _test_modules():
    return sorted(p for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name)


def _code_only(path: Path) -> str:
    """The module's source without docstrings and comments (a docstring may name ``../shared/data``)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def test_real_data_is_read_only_through_the_shared_data_fixture():
    offenders = []
    for path in _test_modules():
        code = _code_only(path)
        if "SHARED_DATA" in code or re.search(r"['\"]shared['\"]\s*\)?\s*/\s*['\"]data['\"]", code) \
                or "../shared" in code:
            offenders.append(path.name)
    assert not offenders, f"read ../shared/data through the shared_data fixture (it marks realdata): {offenders}"


def test_tests_using_shared_data_are_marked_realdata(request):
    """The conftest hook marks them; checked on this session's collected items."""
    items = request.session.items
    using = [i for i in items if "shared_data" in getattr(i, "fixturenames", ())]
    if not using:
        pytest.skip("no test using shared_data was collected in this run")
    unmarked = [i.nodeid for i in using if i.get_closest_marker("realdata") is None]
    assert not unmarked, unmarked


def _time_names(node: ast.AST) -> list[str]:
    """Identifiers and string subscript keys in ``node`` that name a duration."""
    found = []
    for n in ast.walk(node):
        name = None
        if isinstance(n, ast.Name):
            name = n.id
        elif isinstance(n, ast.Attribute):
            name = n.attr
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            name = n.slice.value
        if name and TIME_WORDS.search(name.lower()):
            found.append(name)
    return found


def test_no_assertion_on_wall_clock_time():
    offenders = []
    for path in _test_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                if any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in cmp.ops) and _time_names(cmp):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"time in benchmarks/, not in tests: {offenders}"


def test_the_librarys_measures_agree_with_the_tests_references():
    """The suite grades with tests/reference.py; the library's IoU and PSNR must give the same numbers (IoU turned
    into precision, or a PSNR on the wrong scale, fails here as well as in the graded tests)."""
    from reference import ref_iou, ref_psnr

    from real2sim.core.imaging import iou, psnr

    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.random((40, 50)) < rng.random(), rng.random((40, 50)) < rng.random()
        assert iou(a, b) == pytest.approx(ref_iou(a, b))
        x, y = rng.integers(0, 256, (2, 40, 50, 3), dtype=np.uint8)
        assert psnr(x, y, a) == pytest.approx(ref_psnr(x, y, a))
    assert iou(np.zeros((4, 4), bool), np.zeros((4, 4), bool)) == ref_iou(np.zeros((4, 4)), np.zeros((4, 4))) == 1.0
