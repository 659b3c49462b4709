"""Evaluation envs over scene bundles (Gymnasium), tasks, and the episode runner.

``gymnasium.make("real2sim/Bundle-v0", bundle_dir=..., task=..., backend=...)`` works for any
bundle; :func:`register_bundle` registers ``real2sim/<scene name>-v0`` bound to one bundle.
Importing this package needs ``gymnasium``; the engines load only when an env is built.
"""
from __future__ import annotations

import logging
from pathlib import Path

from real2sim.core.bundle import Bundle

log = logging.getLogger(__name__)
ENTRY_POINT = "real2sim.evaluation.envs.env:Real2SimEnv"
GENERIC_ID = "real2sim/Bundle-v0"


def _register(env_id: str, **kwargs) -> str:
    import gymnasium

    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=ENTRY_POINT, kwargs=kwargs)  # env checker on (see docs/evaluation.md)
    return env_id


def register_bundle(bundle_dir, **defaults) -> str:
    """Register ``real2sim/<scene>-v0`` for the bundle at ``bundle_dir`` (idempotent); returns the id.

    ``defaults`` (task, backend, obs_mode, ...) become the id's default kwargs; ``gymnasium.make``
    kwargs override them.
    """
    import gymnasium

    name = Bundle.load(Path(bundle_dir)).manifest.name
    env_id = f"real2sim/{name}-v0"
    kwargs = {"bundle_dir": str(Path(bundle_dir).resolve()), **defaults}
    spec = gymnasium.registry.get(env_id)
    if spec is not None and spec.kwargs.get("bundle_dir") != kwargs["bundle_dir"]:
        log.info("re-registering %s for %s (was %s)", env_id, kwargs["bundle_dir"], spec.kwargs.get("bundle_dir"))
        del gymnasium.registry[env_id]
    return _register(env_id, **kwargs)


try:  # the generic id, for gymnasium.make(GENERIC_ID, bundle_dir=...)
    _register(GENERIC_ID)
except ImportError:  # pragma: no cover - gymnasium missing: envs raise DependencyMissing when built
    pass


def __getattr__(name):
    if name in ("Real2SimEnv", "load_backend", "resolve_task"):  # gymnasium (optional) only when asked for
        from real2sim.evaluation.envs import env

        return getattr(env, name)
    raise AttributeError(name)


__all__ = ["GENERIC_ID", "Real2SimEnv", "register_bundle"]
