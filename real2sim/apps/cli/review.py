"""``real2sim review`` subcommand. Wire it with ``real2sim.apps.cli.review.add_parsers(subparsers)`` in ``real2sim/cli.py``.

Gradio is imported only when the command runs, so ``import real2sim`` stays light.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from real2sim.core.bundle import Bundle
from real2sim.core.errors import DependencyMissing

log = logging.getLogger(__name__)


def _auth(value: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise argparse.ArgumentTypeError("--auth must look like USER:PASSWORD")
    return user, password


def cmd_review(args) -> int:

    Bundle.load(Path(args.dir))  # a clear bundle error before the web server starts
    try:
        from real2sim.apps.review.app import launch
    except ImportError as exc:
        raise DependencyMissing(f"the review page needs gradio ({exc}); install it with: pip install 'real2sim[review]'") from exc
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving the review page on %s: anyone who can reach this address can edit the bundle%s",
                    args.host, "" if args.auth else " (no --auth given)")
    launch(Path(args.dir), host=args.host, port=args.port, auth=args.auth, block=True)
    return 0


def add_parsers(subparsers) -> None:
    """Register ``review DIR [--port N] [--host 127.0.0.1] [--auth user:pass]``."""
    p = subparsers.add_parser("review", help="open the scene bundle in a browser review page (Gradio)")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--port", type=int, default=None, help="port (default: first free from 7860)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--auth", type=_auth, default=None, metavar="USER:PASS", help="require this username and password")
    p.set_defaults(fn=cmd_review)
