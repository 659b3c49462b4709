"""``real2sim review`` subcommand. Wire it with ``real2sim.apps.cli.review.add_parsers(subparsers)`` in ``real2sim/cli.py``.

Gradio is imported only when the command runs, so ``import real2sim`` stays light.
"""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from real2sim.core.bundle import Bundle
from real2sim.core.errors import DependencyMissing, Real2SimError

log = logging.getLogger(__name__)


def _auth(value: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise argparse.ArgumentTypeError("--auth must look like USER:PASSWORD")
    return user, password


AUTH_ENV = "REAL2SIM_REVIEW_AUTH"


def review_auth(args) -> tuple[str, str] | None:
    """USER:PASSWORD from ``--auth``, else ``--auth-file`` (its first line), else ``$REAL2SIM_REVIEW_AUTH``; the
    file and the variable keep the password out of the process list (``ps`` shows every argument)."""
    if args.auth:
        log.warning("--auth puts the password in the process list; use --auth-file FILE or $%s", AUTH_ENV)
        return args.auth
    if args.auth_file:
        path = Path(args.auth_file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise Real2SimError(f"--auth-file {path}: cannot read it ({exc}); it holds one line USER:PASSWORD") from exc
        lines = text.splitlines()
        return _parse_auth(lines[0].strip() if lines else "", f"--auth-file {path}")
    if os.environ.get(AUTH_ENV):
        return _parse_auth(os.environ[AUTH_ENV].strip(), f"${AUTH_ENV}")
    return None


def _parse_auth(value: str, where: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise Real2SimError(f"{where} must hold USER:PASSWORD (one line)")
    return user, password


def cmd_review(args) -> int:

    Bundle.load(Path(args.dir))  # a clear bundle error before the web server starts
    auth = review_auth(args)
    try:
        from real2sim.apps.review.app import launch
    except ImportError as exc:
        raise DependencyMissing(f"the review page needs gradio ({exc}); install it with: pip install 'real2sim[review]'") from exc
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving the review page on %s: anyone who can reach this address can edit the bundle%s",
                    args.host, "" if auth else " (no --auth-file or $REAL2SIM_REVIEW_AUTH given)")
    try:
        launch(Path(args.dir), host=args.host, port=args.port, auth=auth, block=True)
    except OSError as exc:  # Gradio's own message names GRADIO_SERVER_PORT, which this command does not read
        if "port" not in str(exc).lower():
            raise
        raise Real2SimError(f"cannot serve on {args.host}:{args.port or 7860}: the port is in use (or not allowed); "
                            "choose another with --port N, e.g. --port 7861") from None
    return 0


def add_parsers(subparsers) -> None:
    """Register ``review DIR [--port N] [--host 127.0.0.1] [--auth user:pass]``."""
    p = subparsers.add_parser("review", help="open the scene bundle in a browser review page (Gradio)")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--port", type=int, default=None, help="port (default: first free from 7860)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--auth", type=_auth, default=None, metavar="USER:PASS",
                   help="require this username and password (visible in 'ps': prefer --auth-file or $REAL2SIM_REVIEW_AUTH)")
    p.add_argument("--auth-file", default=None, metavar="FILE", help="file whose first line is USER:PASSWORD")
    p.set_defaults(fn=cmd_review)
