"""Command-line flags made from config dataclasses: the dataclass is the one source of defaults and help.

A config's fields become ``--field-name`` flags; their help is the field's docstring (the string literal under the
field, as in nerfstudio's configs) and their default is the dataclass default, shown in ``--help`` but not passed
on: :func:`config_from_args` only overrides what the user typed, so a changed default changes everywhere at once.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
from typing import Any


@functools.lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of a dataclass, read from the string literal that follows each field in its source."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (built in C, or a frozen app): no help text
            continue
        body = tree.body[0].body
        for node, nxt in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _parser_for(annotation: str, default: Any):
    """argparse ``type`` for a field's annotation (postponed annotations are strings)."""
    ann = str(annotation).replace(" ", "")
    kinds = {"int": int, "float": float, "str": str}
    for name, kind in kinds.items():
        if ann in (name, f"{name}|None", f"Optional[{name}]"):
            return kind
    if ann.startswith(("tuple[", "list[")) or isinstance(default, (tuple, list)):
        inner = float if "float" in ann else int if "int" in ann else str
        return lambda text: tuple(inner(v) for v in text.split(","))
    return str


def _show(default: Any) -> str:
    if isinstance(default, (tuple, list)):
        return ",".join(str(v) for v in default)
    return str(default)


def add_config_options(parser: argparse.ArgumentParser, cls: type, *, only=None, exclude=(), flags=None,
                       choices=None, group: str | None = None) -> None:
    """Add one flag per field of dataclass ``cls``.

    ``only``/``exclude``: which fields; ``flags``: ``{field: "--flag"}`` renames (a flag name users already know);
    ``choices``: ``{field: [...]}``. Booleans become ``--field/--no-field``."""
    docs = field_docs(cls)
    target = parser.add_argument_group(group) if group else parser
    for f in dataclasses.fields(cls):
        if (only is not None and f.name not in only) or f.name in exclude or not f.init:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        flag = (flags or {}).get(f.name, "--" + f.name.replace("_", "-"))
        help_text = docs.get(f.name, "")
        if default is not None and not isinstance(default, bool):
            help_text += f" (default: {_show(default)})"
        kw: dict = {"dest": f"{cls.__name__}.{f.name}", "default": None, "help": help_text}
        if isinstance(default, bool) or str(f.type) in ("bool", "bool | None"):
            kw["action"] = argparse.BooleanOptionalAction
            kw["help"] = f"{help_text} (default: {'on' if default else 'off'})"
        else:
            kw["type"] = _parser_for(f.type, default)
            if (choices or {}).get(f.name):
                kw["choices"] = list(choices[f.name])
            else:
                kw["metavar"] = f.name.upper()
        target.add_argument(flag, **kw)


def config_from_args(cls: type, args: argparse.Namespace, **overrides):
    """An instance of ``cls`` with the dataclass defaults, the flags the user gave and ``overrides`` on top."""
    given = {f.name: getattr(args, f"{cls.__name__}.{f.name}") for f in dataclasses.fields(cls)
             if getattr(args, f"{cls.__name__}.{f.name}", None) is not None}
    return cls(**{**given, **overrides})


def pixel_point(text: str) -> tuple[float, float]:
    """An ``argparse`` type: ``X,Y`` in pixels (a click)."""
    try:
        x, y = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X,Y (pixels), got {text!r}") from None
    return x, y


def pixel_box(text: str) -> tuple[float, float, float, float]:
    """An ``argparse`` type: ``X0,Y0,X1,Y1`` in pixels (a box around an object)."""
    try:
        x0, y0, x1, y1 = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X0,Y0,X1,Y1 (pixels), got {text!r}") from None
    return x0, y0, x1, y1
