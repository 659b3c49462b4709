"""The remote policy protocol: evaluate a model that runs in another process, machine or GPU.

Transport: HTTP/1.1, bodies in msgpack (``Content-Type: application/msgpack``).
numpy arrays travel as ``{"__ndarray__": 1, "dtype": str, "shape": [...], "data": bytes}``.

========  ===========  ==========================================================
method    path         body -> reply
========  ===========  ==========================================================
GET       /health      -> ``{"status": "ok", "protocol": 1, "name": str}``
POST      /reset       ``{"episode_id": str, "instruction": str}`` -> ``{"ok": true}``
POST      /act         ``{"episode_id": str, "step": int, "instruction": str,
                       "observation": {name: array | number | str}}``
                       -> ``{"actions": (k, d) array}`` (an action chunk, k >= 1, finite numbers)
========  ===========  ==========================================================

Errors come back as HTTP 4xx/5xx with ``{"error": str}``. The client retries
connection failures and 5xx replies with exponential backoff (``retries``), never a
4xx (a bad request will not get better), and raises :class:`RemotePolicyError` with
the URL and the server's message. Every request has a timeout. Replies are checked before use: one msgpack
map, arrays whose header matches their bytes, ``actions`` a finite numeric ``(k, d)`` array with k, d >= 1;
anything else is a :class:`RemotePolicyError` naming the URL and the field.
"""
from __future__ import annotations

import http.client
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import numpy as np

from real2sim.core.errors import Real2SimError, require

log = logging.getLogger(__name__)
PROTOCOL_VERSION = 1
CONTENT_TYPE = "application/msgpack"
MAX_REPLY_BYTES = 256 * 2**20
"""Replies larger than this are refused (an action chunk is a few hundred bytes)."""


class RemotePolicyError(Real2SimError):
    """The remote policy could not be reached or answered with an error."""


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": 1, "dtype": obj.dtype.str, "shape": list(obj.shape), "data": np.ascontiguousarray(obj).tobytes()}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    return obj


def _array(obj: dict) -> np.ndarray:
    """An encoded array, its header checked against its bytes before anything is allocated (ValueError if not)."""
    try:
        dtype = np.dtype(obj.get("dtype"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"array field 'dtype' {obj.get('dtype')!r} is not a numpy dtype") from exc
    if dtype.kind not in "biufcSU" or dtype.fields is not None:
        raise ValueError(f"array field 'dtype' {dtype.str!r}: only numbers, booleans and strings travel")
    shape, data = obj.get("shape"), obj.get("data")
    if (not isinstance(shape, (list, tuple)) or len(shape) > 32
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise ValueError(f"array field 'shape' {str(shape)[:80]} is not a list of non-negative integers")
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"array field 'data' is {type(data).__name__}, not bytes")
    n = 1
    for d in shape:
        n *= d
    if n * dtype.itemsize != len(data):
        raise ValueError(f"array header says shape {list(shape)} of {dtype.str} ({n * dtype.itemsize} bytes) "
                         f"but field 'data' has {len(data)} bytes")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if obj.get("__ndarray__") == 1:
            return _array(obj)
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def pack(obj: Any) -> bytes:
    msgpack = require("msgpack", "remote")
    return msgpack.packb(_encode(obj), use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Decode a msgpack body; ValueError (with what is wrong) for anything that is not one well-formed message."""
    msgpack = require("msgpack", "remote")
    try:
        obj = msgpack.unpackb(data, raw=False)
    except ValueError as exc:  # msgpack's ExtraData, FormatError, StackError, incomplete input are ValueErrors
        raise ValueError(f"body is not one msgpack message ({type(exc).__name__}: {str(exc)[:120]})") from exc
    except Exception as exc:  # msgpack raises TypeError/RecursionError-like errors on some garbage too
        raise ValueError(f"body is not msgpack ({type(exc).__name__}: {str(exc)[:120]})") from exc
    return _decode(obj)


def check_actions(actions: Any, where: str) -> np.ndarray:
    """A policy's action chunk as a finite float ``(k, d)`` array with k, d >= 1, or ValueError naming ``where``."""
    if isinstance(actions, np.ndarray):
        a = actions
    else:
        try:
            a = np.asarray(actions)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where} is not an array ({exc})") from exc
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{where} has dtype {a.dtype}; expected numbers")
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{where} has shape {a.shape}; expected a (k, d) chunk with k >= 1 actions")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{where} has NaN or inf")
    return a


# -- server -------------------------------------------------------------------------------
class PolicyServer:
    """Serve any callable ``act(observation: dict, instruction: str) -> (k, d) or (d,) array``.

    ``reset(episode_id, instruction)`` is optional. Run with :meth:`start` (background
    thread) or :func:`serve` (blocking). Binds to 127.0.0.1 unless told otherwise.
    """

    def __init__(self, act: Callable, reset: Callable | None = None, name: str = "policy",
                 host: str = "127.0.0.1", port: int = 0):
        self.act_fn, self.reset_fn, self.name = act, reset, name
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # route http.server's stderr lines to logging
                log.debug("%s " + fmt, self.address_string(), *args)

            def _reply(self, code: int, body: dict) -> None:
                data = pack(body)
                self.send_response(code)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    self._reply(200, {"status": "ok", "protocol": PROTOCOL_VERSION, "name": server.name})
                else:
                    self._reply(404, {"error": f"unknown path {self.path}; use /health, /reset or /act"})

            def do_POST(self):
                try:
                    body = unpack(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                except Exception as exc:  # malformed msgpack from a client: its fault
                    self._reply(400, {"error": f"body is not msgpack: {exc}"})
                    return
                try:
                    if self.path == "/act":
                        self._reply(200, server._act(body))
                    elif self.path == "/reset":
                        if server.reset_fn:
                            server.reset_fn(body.get("episode_id", ""), body.get("instruction", ""))
                        self._reply(200, {"ok": True})
                    else:
                        self._reply(404, {"error": f"unknown path {self.path}; use /health, /reset or /act"})
                except (KeyError, ValueError, TypeError) as exc:
                    self._reply(400, {"error": f"{type(exc).__name__}: {exc}"})
                except Exception as exc:  # the wrapped model failed: report it, keep serving
                    log.exception("policy raised")
                    self._reply(500, {"error": f"policy raised {type(exc).__name__}: {exc}"})

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    def _act(self, body: dict) -> dict:
        if not isinstance(body, dict) or not isinstance(body.get("observation"), dict):
            raise ValueError("body must be a map with an 'observation' map")
        actions = np.asarray(self.act_fn(body["observation"], body.get("instruction", "")))
        if actions.ndim == 1:
            actions = actions[None]
        return {"actions": check_actions(actions, "the policy's actions")}

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "PolicyServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="policy-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve(act: Callable, reset: Callable | None = None, host: str = "127.0.0.1", port: int = 8765, name: str = "policy") -> None:
    """Blocking: serve ``act`` until interrupted."""
    srv = PolicyServer(act, reset, name, host, port)
    log.info("serving policy '%s' at %s", name, srv.url)
    try:
        srv.httpd.serve_forever()
    finally:
        srv.httpd.server_close()


# -- client -------------------------------------------------------------------------------
@dataclass
class RemotePolicy:
    """Client for :class:`PolicyServer` (or any server speaking the protocol)."""

    url: str
    timeout_s: float = 10.0
    """Per-request timeout."""
    retries: int = 3
    """Extra attempts after a connection failure, timeout or 5xx reply."""
    backoff_s: float = 0.2
    """First retry delay; doubles each attempt."""

    def __post_init__(self):
        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise RemotePolicyError(f"policy URL '{self.url}' must start with http:// or https://")

    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else pack(body)
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read(MAX_REPLY_BYTES + 1)
            except urllib.error.HTTPError as exc:
                try:
                    msg = str(unpack(exc.read(64_000)).get("error", exc))[:500]
                except Exception:  # an error page that is not ours (a proxy's HTML): its status line says enough
                    msg = str(exc)
                if exc.code < 500:
                    raise RemotePolicyError(f"{self.url}{path}: HTTP {exc.code}: {msg}") from exc
                last = RemotePolicyError(f"{self.url}{path}: HTTP {exc.code}: {msg}")
            except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException, OSError) as exc:
                last = exc
            else:
                if len(raw) > MAX_REPLY_BYTES:
                    raise RemotePolicyError(f"{self.url}{path}: reply is larger than {MAX_REPLY_BYTES} bytes")
                try:
                    reply = unpack(raw)
                except ValueError as exc:
                    raise RemotePolicyError(f"{self.url}{path}: {exc}") from exc
                if not isinstance(reply, dict):
                    raise RemotePolicyError(f"{self.url}{path}: reply is a {type(reply).__name__}, not a map")
                return reply
            if attempt < self.retries:
                delay = self.backoff_s * 2**attempt
                log.warning("%s%s failed (%s); retry %d/%d in %.2f s", self.url, path, last, attempt + 1, self.retries, delay)
                time.sleep(delay)
        raise RemotePolicyError(f"{self.url}{path}: no answer after {self.retries + 1} attempts "
                                f"(timeout {self.timeout_s} s): {last}") from last

    def health(self) -> dict:
        reply = self._request("GET", "/health")
        if reply.get("protocol") != PROTOCOL_VERSION:
            raise RemotePolicyError(f"{self.url} speaks protocol {reply.get('protocol')!r}; this client speaks {PROTOCOL_VERSION}")
        return reply

    def reset(self, episode_id: str = "", instruction: str = "") -> None:
        self._request("POST", "/reset", {"episode_id": episode_id, "instruction": instruction})

    def act(self, observation: dict, instruction: str = "", episode_id: str = "", step: int = 0) -> np.ndarray:
        """``(k, d)`` action chunk for one observation."""
        reply = self._request("POST", "/act", {"observation": observation, "instruction": instruction,
                                               "episode_id": episode_id, "step": step})
        if "actions" not in reply:
            raise RemotePolicyError(f"{self.url}/act: reply has no field 'actions' (fields: {sorted(map(str, reply))[:10]})")
        try:
            return check_actions(reply["actions"], "field 'actions'")
        except ValueError as exc:
            raise RemotePolicyError(f"{self.url}/act: {exc}") from exc
