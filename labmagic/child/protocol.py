"""Talking to a child: the command that starts ``python -m labmagic.child``, its environment, and the one
JSON record it prints last (``LABMAGIC-CHILD {...}``), which the parent reads back.

The parent side lives here; the child side is :mod:`labmagic.child.worker`.
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import LabError
from ..paths import check_race_name

#: Prefix of the child's record line on stdout.
MARKER = "LABMAGIC-CHILD "


def check_param_name(name) -> str:
    """``name`` if it can be a papermill parameter, else a :class:`LabError`.

    The child replays parameters as source (``NAME = value``), so a NAME such as ``globals()[...]`` would
    run as code: only a plain Python identifier is a name.
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise LabError(f"{name!r} is not a parameter name: NAME in -p NAME=VALUE must be a Python identifier "
                       "(e.g. -p size=quick)")
    return name


def split_param(item: str) -> tuple[str, str]:
    """``-p NAME=VALUE`` -> (NAME, VALUE as typed), NAME checked by :func:`check_param_name`."""
    name, sep, value = item.partition("=")
    if not sep:
        raise LabError(f"-p {item!r}: expected NAME=VALUE")
    return check_param_name(name), value


def parse_params(items) -> dict:
    """``-p NAME=VALUE`` items as parameters: each VALUE a Python literal where it reads as one (``3``, ``'quick'``,
    ``[1, 2]``), else the text as typed (``quick``); each NAME checked."""
    params = {}
    for item in items:
        name, value = split_param(item)
        try:
            params[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[name] = value
    return params


def param_arg(item: str) -> str:
    """argparse ``type=`` of ``-p NAME=VALUE``: the item unchanged, or argparse's one-line usage error."""
    try:
        split_param(item)
    except LabError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return item


def param_args(params: dict | None) -> list[str]:
    """``-p NAME=VALUE`` for each parameter, VALUE as typed (the child reads it as a Python literal)."""
    return [arg for name, value in (params or {}).items() for arg in ("-p", f"{check_param_name(name)}={value}")]


def child_command(chapter: str, variant: str | None, shape: str | None, mode: str, iters: int = 1,
                  params: dict | None = None, race: str | None = None, skip_dsl: bool = False,
                  jobs: str | None = None) -> list[str]:
    """``python -m labmagic.child ...``; a notebook path is made absolute (the child runs at the repo root).
    ``race``: the race's name in the chapter (default: the one its first ``%bench`` names); ``skip_dsl``: its
    ``%%dsl`` cells replayed as stand-ins; ``jobs``: a jobs file (``--mode nsight-time``) instead of a variant."""
    if str(chapter).endswith(".ipynb"):
        chapter = str(Path(chapter).resolve())
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--mode", mode, "--iters", str(iters)]
    if variant is not None:
        cmd += ["--variant", variant]
    if jobs is not None:
        cmd += ["--jobs", jobs]
    if shape:
        cmd += ["--shape", *str(shape).split()]
    return cmd + race_args(race) + param_args(params) + (["--skip-dsl"] if skip_dsl else [])


def race_args(race: str | None) -> list[str]:
    """``--race NAME`` for the child (nothing for the default race); the name must be a Python name."""
    return ["--race", check_race_name(race)] if race else []


def child_record(output: str) -> dict:
    """The child's last ``LABMAGIC-CHILD {json}`` line, or {} when it died before writing one."""
    for line in reversed(output.splitlines()):
        idx = line.find(MARKER)
        if idx >= 0:
            try:
                return json.loads(line[idx + len(MARKER):])
            except ValueError:
                return {}
    return {}


def child_env(**extra: str) -> dict:
    """The child's environment: this labmagic importable whatever the working directory."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def log_tail(log: str, lines: int = 30) -> str:
    """The last lines of a tool's output, for an error's detail."""
    return "\n".join(log.strip().splitlines()[-lines:])


def list_variants(chapter: str, params: dict | None = None, race: str | None = None) -> dict:
    """The race's variants and shapes, asked of a child (so the CLI never imports the chapter itself)."""
    cmd = [sys.executable, "-m", "labmagic.child", "--chapter", str(chapter), "--mode", "list", *race_args(race),
           *param_args(params)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    record = child_record(proc.stdout)
    if not record or record.get("ok") is False:
        raise LabError(f"could not load chapter {chapter!r}: {record.get('error', 'no answer from the child')}",
                       detail=log_tail(proc.stderr))
    return record


def parse_shape(tokens: list[str]) -> tuple[int, ...]:
    """``["4096"]``, ``["4096", "4096"]``, ``["4096x4096"]``, ``["2**20"]`` -> a tuple of ints."""
    dims: list[int] = []
    for token in tokens:
        for part in token.lower().split("x"):
            part = part.strip()
            m = re.fullmatch(r"(\d+)\s*\*\*\s*(\d+)(?:\s*([+-])\s*(\d+))?", part)
            if m:
                value = int(m.group(1)) ** int(m.group(2))
                if m.group(3):
                    value += int(m.group(4)) * (1 if m.group(3) == "+" else -1)
                dims.append(value)
            elif part.isdigit():
                dims.append(int(part))
            else:
                raise SystemExit(f"--shape: {token!r} is not a size (4096, 4096x4096, 2**20)")
    return tuple(dims)
