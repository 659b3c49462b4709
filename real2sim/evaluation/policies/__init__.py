"""Policies that act in real2sim envs: scripted, replay, random, and remote (over HTTP + msgpack).

The protocol (``reset(instruction, info, seed)``, ``act(obs) -> (k, d) chunk``) and policy specs
(``make_policy("scripted:noise=0.02")``, a URL for a remote policy) are in :mod:`.base`.
"""
from __future__ import annotations

from real2sim.evaluation.policies.remote import (
    PolicyServer,
    RemotePolicy,
    RemotePolicyError,
    serve,
)
from real2sim.evaluation.policies.scripted import ScriptedPolicy

_LAZY = {"Policy", "PolicySpecError", "RandomPolicy", "RemotePolicyAdapter", "ReplayPolicy", "make_policy", "parse_spec"}


def __getattr__(name):
    if name in _LAZY:  # base needs gymnasium (optional) through the env's action limits
        from real2sim.evaluation.policies import base

        return getattr(base, name)
    raise AttributeError(name)


__all__ = ["PolicyServer", "RemotePolicy", "RemotePolicyError", "ScriptedPolicy", "make_policy", "serve", *sorted(_LAZY)]
