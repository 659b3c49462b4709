"""The ``real2sim`` command line: one entry point, one module per command group.

Errors are one line on stderr and a non-zero exit (2: bad input or a failed step, 3: a bug); ``--debug`` shows the
traceback. Each module has ``add_parsers(subparsers)``; commands whose behaviour a stage config describes take their flags,
defaults and help from that dataclass (:mod:`real2sim.apps.cli.options`). Results go to stdout, log lines and errors
to stderr (:mod:`real2sim.apps.cli.console`).
"""
from __future__ import annotations

import argparse
import re
import sys

from real2sim.apps.cli import (
    build,
    bundle,
    capture,
    demo,
    evaluate,
    review,
    robot,
    scan,
    segmentation,
    texture,
)
from real2sim.apps.cli.console import error, setup_logging
from real2sim.core.errors import Real2SimError
from real2sim.core.tempfiles import sweep_dead_scratch
from real2sim.core.version import __version__

NEGATIVE_NUMBERS = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?(,[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)*$")
"""A negative number or a comma-separated list starting with one (a coordinate option's value)."""

COMMAND_GROUPS = (demo, bundle, capture, scan, segmentation, robot, build, texture, review, evaluate)
"""In the order of the journey: ``real2sim --help`` lists the commands this way."""


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="real2sim", description="Real frames -> matched simulated scene -> evaluation.")
    ap.add_argument("--version", action="version", version=f"real2sim {__version__}")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="-v: progress of each stage; -vv: debug")
    ap.add_argument("--debug", action="store_true", help="on an error, show the traceback instead of one line")
    sub = ap.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_parsers(sub)
    for parser in (ap, *sub.choices.values()):
        # '--position -0.08,0,0' is a value, not an option: argparse only knows plain negative numbers as values
        parser._negative_number_matcher = NEGATIVE_NUMBERS
    return ap


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    setup_logging(args.verbose)
    sweep_dead_scratch()  # what a killed command left in the temp folder
    try:
        return args.fn(args)
    except Real2SimError as exc:
        if args.debug:
            raise
        error(" ".join(str(exc).split()))  # one line, whatever the message carries
        return 2
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except Exception as exc:  # a bug: still one line, and the way to the traceback
        if args.debug:
            raise
        error(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              "(a bug in real2sim; rerun with --debug for the traceback and report it)")
        return 3


if __name__ == "__main__":
    sys.exit(main())
