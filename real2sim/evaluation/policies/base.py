"""The policy protocol, the simple policies (random, replay), and policy specs (names or URLs).

A policy has::

    reset(instruction: str, info: dict | None = None, seed: int | None = None) -> None
    act(observation: dict) -> (k, d) float array   # an action chunk, k >= 1, executed in order

``info`` is the env's reset info (task predicate, object ids); a policy that needs privileged
object poses sets ``privileged = True`` and the runner builds the env with ``privileged=True``.

Policy specs (``make_policy``): ``NAME[:key=value,key=value]`` for the registered policies
(``scripted``, ``random``, ``replay``; e.g. ``scripted:noise=0.03``, ``replay:path=actions.npy``),
``package.module.Class[:key=value,...]`` for a policy class of your own (built with those keyword arguments in each
worker), or an ``http(s)://`` URL of a :class:`~real2sim.evaluation.policies.remote.PolicyServer`.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from real2sim.core.errors import Real2SimError, UnknownNameError
from real2sim.evaluation.envs.env import MAX_ROTATION, MAX_TRANSLATION
from real2sim.evaluation.policies.remote import RemotePolicy
from real2sim.evaluation.policies.scripted import ScriptedPolicy

log = logging.getLogger(__name__)


@runtime_checkable
class Policy(Protocol):
    name: str
    privileged: bool

    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None: ...

    def act(self, observation: dict) -> np.ndarray: ...


class PolicySpecError(Real2SimError):
    """A policy spec string cannot be understood."""


class RandomPolicy:
    """Uniform random actions in the env's ee_delta box (seeded per episode)."""

    privileged = False

    def __init__(self, scale: float = 1.0, low=None, high=None):

        self.name = "random"
        self.low = np.asarray(low if low is not None else [-MAX_TRANSLATION] * 3 + [-MAX_ROTATION] * 3 + [0.0], float)
        self.high = np.asarray(high if high is not None else [MAX_TRANSLATION] * 3 + [MAX_ROTATION] * 3 + [1.0], float)
        self.scale = float(scale)
        self.rng = np.random.default_rng(0)

    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation: dict) -> np.ndarray:
        mid = (self.low + self.high) / 2
        a = mid + self.scale * (self.rng.uniform(self.low, self.high) - mid)
        return a[None]


class ReplayPolicy:
    """Replays recorded actions from a ``.npy`` (T, d) or ``.json`` ([[...], ...]) file, open loop.

    After the last action it repeats a hold action (zero motion, last gripper value).
    """

    privileged = False

    def __init__(self, path=None, actions=None, chunk: int = 1):
        if actions is None:
            if path is None:
                raise PolicySpecError("replay needs recorded actions: 'replay:path=actions.npy' (or .json)")
            p = Path(path)
            if not p.is_file():
                raise PolicySpecError(f"{p}: recorded actions not found (replay:path=...)")
            try:
                actions = (np.load(p, allow_pickle=False) if p.suffix == ".npy"
                           else json.loads(p.read_text(encoding="utf-8")))
            except (ValueError, OSError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
                raise PolicySpecError(f"{p}: cannot read recorded actions ({' '.join(str(exc).split())[:160]}); "
                                      "give a .npy (T, d) array or a .json list of lists") from exc
        try:
            self.actions = np.asarray(actions, float)
        except (TypeError, ValueError) as exc:
            raise PolicySpecError(f"{path}: recorded actions are not a (T, d) array of numbers ({exc})") from exc
        if self.actions.ndim != 2 or not np.isfinite(self.actions).all():
            raise PolicySpecError(f"recorded actions must be a finite (T, d) array, got shape {self.actions.shape}")
        self.name = "replay"
        self.chunk = max(1, int(chunk))
        self.t = 0

    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None:
        self.t = 0

    def act(self, observation: dict) -> np.ndarray:
        if self.t >= len(self.actions):
            hold = np.zeros(self.actions.shape[1])
            hold[-1] = self.actions[-1, -1]
            return hold[None]
        out = self.actions[self.t:self.t + self.chunk]
        self.t += len(out)
        return out


class RemotePolicyAdapter:
    """A :class:`RemotePolicy` behind the policy protocol (episode ids and step counts kept here)."""

    privileged = False

    def __init__(self, url: str, timeout_s: float = 10.0, retries: int = 3):

        self.client = RemotePolicy(url, timeout_s=timeout_s, retries=retries)
        self.name = url
        self.instruction = ""
        self.episode_id = ""
        self.step = 0

    def check(self) -> dict:
        return self.client.health()

    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None:
        self.instruction, self.step = instruction, 0
        self.episode_id = f"{(info or {}).get('task_id', 'task')}-{seed}"
        self.client.reset(self.episode_id, instruction)

    def act(self, observation: dict) -> np.ndarray:
        a = self.client.act(observation, self.instruction, self.episode_id, self.step)
        self.step += 1
        return a


PAGE_POLICIES = ("scripted", "random")
"""Policies that read no file and reach no server: the only ones a web page may start (``replay:path=`` would
probe the server's files, a URL would make it send requests anywhere)."""


def check_page_policy(spec: str) -> str:
    """``spec`` if it names one of :data:`PAGE_POLICIES` (with options), else a :class:`PolicySpecError` that says
    where to run the others (the command line)."""
    spec = str(spec or "").strip()
    name, kwargs = ("", {}) if "://" in spec else parse_spec(spec)
    if name not in PAGE_POLICIES:
        raise PolicySpecError(f"policy '{spec[:80]}' cannot be run from the review page; choose {' or '.join(PAGE_POLICIES)} "
                              "(options like 'scripted:noise=0.02' allowed). Run replay files and policy servers with "
                              "'real2sim eval DIR --policy ...' on the command line")
    bad = [k for k, v in kwargs.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if bad:
        raise PolicySpecError(f"policy '{spec[:80]}': option(s) {', '.join(bad)} must be numbers on the review page")
    return spec


def _registry():

    return {"scripted": ScriptedPolicy, "random": RandomPolicy, "replay": ReplayPolicy}


def parse_spec(spec: str) -> tuple[str, dict]:
    """``"name:k=v,k=v"`` -> (name, {k: v}) with numbers parsed."""
    name, _, rest = spec.partition(":")
    kwargs = {}
    for part in filter(None, rest.split(",")):
        k, eq, v = part.partition("=")
        if not eq:
            raise PolicySpecError(f"policy spec '{spec}': '{part}' is not key=value")
        try:
            kwargs[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            kwargs[k.strip()] = v
    return name.strip(), kwargs


def _imported_policy(path: str, spec: str):
    """The class or factory ``package.module.Name`` (a user's own in-process policy, e.g. a model that loads once per
    worker); it must be importable in every worker (installed, or on PYTHONPATH)."""
    import importlib

    module, _, attr = path.rpartition(".")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise PolicySpecError(f"policy spec '{spec}': cannot import '{path}' ({exc}). Fix: install the package that "
                              "defines it or add its folder to PYTHONPATH (on Ray: runtime_env's PYTHONPATH or "
                              "py_modules)") from exc
    if not callable(factory):
        raise PolicySpecError(f"policy spec '{spec}': '{path}' is not a class or function")
    return factory


def make_policy(spec: str, remote_timeout_s: float = 10.0, remote_retries: int = 3):
    """A policy from a spec (see the module docstring); unknown names suggest close ones."""
    if spec.startswith(("http://", "https://")):
        return RemotePolicyAdapter(spec, remote_timeout_s, remote_retries)
    name, kwargs = parse_spec(spec)
    reg = _registry()
    if name not in reg and "." in name:
        factory = _imported_policy(name, spec)
    elif name not in reg:
        raise UnknownNameError("policy", name, list(reg) + ["http://HOST:PORT", "package.module.Class"])
    else:
        factory = reg[name]
    try:
        pol = factory(**kwargs)
    except (TypeError, ValueError) as exc:  # unknown keys, values of the wrong kind ('noise=abc')
        raise PolicySpecError(f"policy spec '{spec}': {exc}") from exc
    pol.name = spec
    return pol


__all__ = ["PAGE_POLICIES", "Policy", "PolicySpecError", "check_page_policy", "RandomPolicy", "RemotePolicyAdapter", "ReplayPolicy", "make_policy", "parse_spec"]
