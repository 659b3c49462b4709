"""The command line's one console: results on stdout, logging and errors on stderr, progress through one helper."""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Callable, Iterator


@functools.lru_cache(maxsize=None)
def console():
    """``rich`` console for results (stdout)."""
    from rich.console import Console

    return Console()


@functools.lru_cache(maxsize=None)
def err_console():
    """``rich`` console for log lines and errors (stderr), so scripts can read results and problems apart."""
    from rich.console import Console

    return Console(stderr=True)


def say(message: str, markup: bool = False) -> None:
    """Print a result line (paths stay whole: no wrapping inside words, no highlighting)."""
    console().print(message, highlight=False, markup=markup, soft_wrap=True)


def error(message: str) -> None:
    """Print an error line on stderr."""
    err_console().print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """Print a warning line on stderr (a result that needs a person's look, not a failure of the command)."""
    err_console().print(f"[yellow]warning:[/yellow] {message}", highlight=False, soft_wrap=True)


def setup_logging(verbosity: int) -> None:
    """WARNING by default; ``-v`` INFO, ``-vv`` DEBUG; rendered on stderr."""
    from rich.logging import RichHandler

    level = logging.WARNING - 10 * min(verbosity, 2)
    logging.basicConfig(level=level, format="%(message)s", force=True,
                        handlers=[RichHandler(console=err_console(), show_path=False, show_time=False)])


@contextlib.contextmanager
def progress(description: str, total: int, fields: dict | None = None) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr; yields ``update(completed, description=None, **fields)``.

    ``fields`` are extra named values shown after the bar (e.g. ``{"succ": 0}`` renders ``success 0``)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    columns += [TextColumn(f"{name} {{task.fields[{name}]}}") for name in (fields or {})]
    with Progress(*columns, TimeElapsedColumn(), console=err_console(), transient=True) as bar:
        task = bar.add_task(description, total=total, **(fields or {}))

        def update(completed: int, description: str | None = None, **values) -> None:
            kw = {"description": description} if description else {}
            bar.update(task, completed=completed, **kw, **values)

        yield update


ACCEPT_POOR_HELP = ("apply the result even when its quality number misses the stage's bar (docs/bundle.md, quality "
                    "gates); the stage is still marked poor")


def gate_exit(bundle, *stages: str) -> int:
    """After running ``stages``: one line per stage that is poor (its number and the bar) on stderr.

    Returns 2 when one of them was refused (not applied) or failed, else 0 (an accepted poor result warns)."""
    from real2sim.core.stages import poor_line

    code = 0
    for name in stages:
        rec = bundle.manifest.stages.get(name)
        if rec is None:
            continue
        line = poor_line(bundle, name)
        if line and rec.metrics.get("applied"):
            warn(line)
        elif line:
            error(line)
            code = 2
    return code
