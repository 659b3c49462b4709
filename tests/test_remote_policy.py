"""The remote policy protocol over a real localhost HTTP server: round trips, timeouts, retries, reconnects."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from real2sim.evaluation.policies import PolicyServer, RemotePolicy, RemotePolicyError


def obs():
    return {"rgb": np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3), "qpos": np.linspace(0, 1, 7), "step": 3}


def test_round_trip_preserves_arrays_and_returns_chunks():
    seen = {}

    def act(o, instruction):
        seen.update(o, instruction=instruction)
        return np.tile(o["qpos"][:3], (4, 1))  # a chunk of 4 actions

    resets = []
    with PolicyServer(act, reset=lambda ep, ins: resets.append((ep, ins)), name="tiler") as srv:
        client = RemotePolicy(srv.url, timeout_s=5)
        assert client.health()["name"] == "tiler"
        client.reset("ep0", "pick the can")
        a = client.act(obs(), "pick the can", "ep0", 0)
    assert a.shape == (4, 3)
    np.testing.assert_allclose(a[0], np.linspace(0, 1, 7)[:3])
    assert seen["rgb"].dtype == np.uint8 and seen["rgb"].shape == (2, 3, 3)
    assert seen["instruction"] == "pick the can" and resets == [("ep0", "pick the can")]


def test_policy_exceptions_are_reported_not_hidden():
    def broken(o, instruction):
        raise RuntimeError("CUDA out of memory")

    with PolicyServer(broken) as srv:
        client = RemotePolicy(srv.url, retries=1, backoff_s=0.01)
        with pytest.raises(RemotePolicyError, match="CUDA out of memory"):
            client.act(obs())


def test_bad_action_shape_is_a_client_error_without_retries():
    calls = []

    def bad(o, instruction):
        calls.append(1)
        return np.zeros((2, 2, 2))

    with PolicyServer(bad) as srv:
        with pytest.raises(RemotePolicyError, match="HTTP 400"):
            RemotePolicy(srv.url, retries=3, backoff_s=0.01).act(obs())
    assert len(calls) == 1


def test_timeout_then_retry_succeeds():
    gate = threading.Event()
    calls = []

    def slow_first(o, instruction):
        calls.append(1)
        if len(calls) == 1:
            gate.wait(2.0)  # first call hangs past the client's timeout
        return np.ones(3)

    with PolicyServer(slow_first) as srv:
        a = RemotePolicy(srv.url, timeout_s=0.3, retries=2, backoff_s=0.01).act(obs())
        gate.set()
    assert a.shape == (1, 3) and len(calls) == 2


def test_reconnects_to_a_restarted_server():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    client = RemotePolicy(f"http://127.0.0.1:{port}", timeout_s=1, retries=0)
    with pytest.raises(RemotePolicyError, match="no answer after 1 attempts"):
        client.act(obs())
    with PolicyServer(lambda o, i: np.zeros(2), port=port):
        assert client.act(obs()).shape == (1, 2)


def test_url_must_be_http():
    with pytest.raises(RemotePolicyError, match="http://"):
        RemotePolicy("localhost:8000")
