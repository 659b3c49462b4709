"""open3d, imported safely: ``import coacd`` before ``import open3d`` makes open3d fail (std::bad_cast, DESIGN.md),
so this refuses with a clear message instead of crashing later."""
from __future__ import annotations

import sys

from real2sim.core.errors import DependencyMissing, require


def open3d():
    """The ``open3d`` module (``pip install 'real2sim[scan]'``: the ``open3d-cpu`` wheel)."""
    if "open3d" not in sys.modules and "coacd" in sys.modules:
        raise DependencyMissing("open3d cannot be imported after coacd in one process (open3d then fails with "
                                "std::bad_cast): import open3d first, or run CoACD in its subprocess "
                                "(real2sim.collision does)")
    return require("open3d", "scan", "open3d-cpu")
