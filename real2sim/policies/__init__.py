"""Policies that act in real2sim envs: scripted, replay, random, and remote (over HTTP + msgpack)."""
from __future__ import annotations

from .remote import PolicyServer, RemotePolicy, RemotePolicyError, serve

__all__ = ["PolicyServer", "RemotePolicy", "RemotePolicyError", "serve"]
