"""The remote policy protocol over a real localhost HTTP server: round trips, timeouts, retries, reconnects."""
from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from hostile import HostileServer

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


def _arr(dtype, shape, data):
    return {"__ndarray__": 1, "dtype": dtype, "shape": shape, "data": data}


def _hostile_bodies():
    import msgpack

    from real2sim.evaluation.policies.remote import pack

    return {
        "garbage bytes": (b"\x93\x01\x02\x03trailing garbage", "not one msgpack message"),
        "not msgpack at all": (b"<html>502 Bad Gateway</html>", "msgpack"),
        "reply not a map": (pack([1, 2, 3]), "reply is a list, not a map"),
        "no actions field": (pack({"acts": [[0.0] * 7]}), "no field 'actions'"),
        "absurd header": (msgpack.packb({"actions": _arr("<f8", [100000, 100000], b"\0" * 24)}), "field 'data' has 24 bytes"),
        "negative shape": (msgpack.packb({"actions": _arr("<f8", [-1, 7], b"")}), "field 'shape'"),
        "bad dtype": (msgpack.packb({"actions": _arr("not-a-dtype", [1, 7], b"")}), "field 'dtype'"),
        "object dtype": (msgpack.packb({"actions": _arr("|O", [1], b"\0" * 8)}), "field 'dtype'"),
        "empty chunk": (pack({"actions": np.zeros((0, 7))}), "k >= 1"),
        "1-d actions": (pack({"actions": np.zeros(7)}), "shape (7,)"),
        "strings": (pack({"actions": [["a"] * 7]}), "dtype"),
        "nan": (pack({"actions": np.full((1, 7), np.nan)}), "NaN"),
    }


@pytest.mark.parametrize("case", list(_hostile_bodies()))
def test_hostile_replies_are_one_clear_error_naming_the_field(case):
    body, message = _hostile_bodies()[case]
    with HostileServer(body) as srv:
        client = RemotePolicy(srv.url, timeout_s=5, retries=2, backoff_s=0.01)
        with pytest.raises(RemotePolicyError) as err:
            client.act(obs())
    text = str(err.value)
    assert message in text and srv.url in text and "\n" not in text
    assert srv.calls == 1  # a malformed reply is not retried


def test_server_refuses_an_empty_chunk_from_the_wrapped_policy():
    with PolicyServer(lambda o, i: np.zeros((0, 7))) as srv:
        with pytest.raises(RemotePolicyError, match=r"HTTP 400.*k >= 1"):
            RemotePolicy(srv.url, retries=0).act(obs())
