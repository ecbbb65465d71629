"""Rebuild a chapter's race in a fresh process: the mechanism behind ``%ncu``, ``%sanitize`` and the
bench timer script.

Nsight Compute and compute-sanitizer must *launch* the process they observe (ncu writes its report
when that process exits), so a notebook cannot profile its own kernel in place. Instead the child
process (:mod:`labmagic.child`) replays the chapter notebook from disk: every code cell before the
first cell that runs ``%bench``, in a real IPython shell with labmagic loaded, so ``%%cuda_kernel``
cells compile exactly as they do in the notebook. Then :func:`find_race` returns the race the
``%bench`` line names, and the child builds inputs and calls one variant.

Limits, by design:

- The *saved* notebook is replayed, not the live kernel's state: unsaved edits are not seen, and a
  variant defined only after the ``%bench`` cell does not exist in the child.
- Cells that are expensive or irrelevant to a single call (full correctness sweeps, plots) can be
  tagged ``no-replay`` to be skipped; they would otherwise run (and, under compute-sanitizer, be
  checked) in every child.
- Papermill parameters can be overridden (``parameters={"size": "quick"}``): they are injected right
  after the cell tagged ``parameters``, as papermill does.
- A race benched after the first ``%bench`` (chapter 08's ``race_w8a8``) is reached by naming it: with
  ``through=["race_w8a8"]`` the replay runs past the ``%bench`` cells before it (their ``%bench`` lines not run,
  the rest of such a cell run) and stops at the cell that benches the last race named. :func:`benched_races`
  lists the races a chapter's ``%bench`` lines name, for a caller to check a name before replaying anything.
- ``skip_dsl``: each ``%%dsl`` cell is replaced by the stand-ins its ``--defines`` names get where the DSL cannot
  run, raising :class:`~labmagic.dsl.DSLUnavailable` ("not replayed") when called: a child that profiles a CUDA or
  torch variant need not import and compile every DSL's kernels first (``%ncu --skip-dsl``).
- Cell output is captured and dropped; a cell that raises stops the replay with the cell's number and
  error, since later cells would only fail in confusing ways.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from typing import Any

from ..errors import LabError
from ..paths import chapter_path
from .protocol import check_param_name

NO_REPLAY_TAG = "no-replay"
_BENCH = re.compile(r"^\s*(?:\w+\s*=\s*)?%bench\b(.*)$", re.M)
#: A ``%bench`` line, its indentation and the name it assigns to, for :func:`_not_run`.
_UNBENCHED = re.compile(r"^([ \t]*)(?:(\w+)\s*=\s*)?%bench\b.*$", re.M)
#: Cells that would start a child of their own (a child replaying them would recurse).
_EXPLAIN = re.compile(r"^\s*(?:\w+\s*=\s*)?%(?:ncu|sanitize)\b", re.M)


def replay_cells(notebook: dict, parameters: dict[str, Any] | None = None,
                 through: Sequence[str] | None = None, skip_dsl: bool = False) -> tuple[list[str], str | None]:
    """The code to run (cell sources, in order) and the ``%bench`` line that ended the replay (or None).

    Skips markdown, empty cells, cells tagged ``no-replay`` and cells running ``%ncu``/``%sanitize``
    (each would start a child of its own); stops *before* the first cell that contains ``%bench``, or with
    ``through``, before the cell that benches the last of those races, the ``%bench`` lines before it left out.
    ``parameters`` become one assignment cell after the ``parameters`` cell; with ``skip_dsl`` a ``%%dsl`` cell
    becomes its variants' stand-ins (:func:`dsl_stand_ins`).
    """
    numbered, bench = _replay(notebook, parameters, through, skip_dsl)
    return [source for _, source in numbered], bench


def bench_race_name(line: str) -> str | None:
    """The race a ``%bench`` line names (its first argument that is not an option), or None."""
    m = _BENCH.search(line)
    tokens = [t for t in m.group(1).split() if not t.startswith("-")] if m else []
    return tokens[0] if tokens else None


def benched_races(notebook: dict) -> list[str]:
    """The races a chapter's ``%bench`` lines name, in order (each once)."""
    names = []
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if cell.get("cell_type") == "code":
            names += [bench_race_name(m.group(0)) for m in _BENCH.finditer(source)]
    return list(dict.fromkeys(n for n in names if n))


def dsl_stand_ins(source: str) -> str:
    """The code that binds each variant a ``%%dsl NAME -d VARIANT ...`` cell defines to a stand-in raising
    DSLUnavailable ("not replayed"), in place of the cell. The names become source: each must be a Python name."""
    words = shlex.split(source.partition("\n")[0])[1:]
    dsl = next((w for w in words if not w.startswith("-")), "?")
    names = [w.split("=", 1)[1] for w in words if w.startswith("--defines=")]
    names += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-d", "--defines")]
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise LabError(f"%%dsl {dsl}: --defines takes Python names, got {', '.join(map(repr, bad))}")
    reason = f"{dsl}: not replayed in this child (--skip-dsl)"
    return "\n".join(["from labmagic.dsl import DSLUnavailable as _DSLUnavailable, unavailable as _unavailable",
                      *(f"{n} = _unavailable(_DSLUnavailable({reason!r}), {n!r})" for n in names)])


def _replay(notebook: dict, parameters: dict[str, Any] | None, through: Sequence[str] | None = None,
            skip_dsl: bool = False) -> tuple[list[tuple[str, str]], str | None]:
    """Like :func:`replay_cells`, each source with the label the reader finds it by (``code cell 4``)."""
    cells: list[tuple[str, str]] = []
    injected = parameters is None
    pending = set(through or ())
    number = 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        tags = cell.get("metadata", {}).get("tags", [])
        bench = _BENCH.search(source)
        if bench:
            pending -= {bench_race_name(m.group(0)) for m in _BENCH.finditer(source)}
            if not through or not pending:
                return _with_parameters(cells, parameters, injected), bench.group(0).strip()
            source = _UNBENCHED.sub(_not_run, source)  # on the way to a later race: this one is not run
        if NO_REPLAY_TAG in tags or not source.strip() or _EXPLAIN.search(source):
            continue
        if skip_dsl and source.lstrip().startswith("%%dsl"):
            source = dsl_stand_ins(source.lstrip())
        cells.append((f"code cell {number}", source))
        if "parameters" in tags and not injected:
            cells.append(("injected parameters", _assignments(parameters)))
            injected = True
    return _with_parameters(cells, parameters, injected), None


def _not_run(m: re.Match) -> str:
    """A ``%bench`` line the replay passes: ``pass`` at its indentation, or its result name bound to None."""
    indent, name = m.group(1), m.group(2)
    return f"{indent}{name} = None" if name else f"{indent}pass"


def _assignments(parameters: dict[str, Any]) -> str:
    # The names become source: checked here too, whoever called, so a name can never smuggle in code.
    return "\n".join(f"{check_param_name(name)} = {value!r}" for name, value in parameters.items())


def _with_parameters(cells: list[tuple[str, str]], parameters, injected: bool) -> list[tuple[str, str]]:
    if parameters and not injected:  # no parameters cell: set them before everything, like papermill
        return [("injected parameters", _assignments(parameters)), *cells]
    return cells


def code_cell(name_or_path, contains: str) -> str:
    """The source of the chapter's first code cell that contains ``contains`` (scripts in ``benchmarks/``
    run a chapter's own kernels and cells this way, not copies of them)."""
    path = chapter_path(name_or_path)
    for cell in json.loads(path.read_text()).get("cells", []):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if cell.get("cell_type") == "code" and contains in source:
            return source
    raise LabError(f"{path.name} has no code cell containing {contains!r}")


def load_chapter(name_or_path, parameters: dict[str, Any] | None = None, shell=None,
                 through: Sequence[str] | None = None, skip_dsl: bool = False) -> dict:
    """Execute a chapter notebook's code up to its ``%bench`` cell (with ``through``, the ``%bench`` cell of the last
    of those races; with ``skip_dsl``, its ``%%dsl`` cells as stand-ins; see :func:`replay_cells`); return the
    namespace.

    Runs in a real IPython ``InteractiveShell`` (``shell``, else the process's singleton) with
    ``%load_ext labmagic``, in the notebook's folder (papermill runs chapters with ``book/`` as the
    working directory). The ``%bench`` line that stopped the replay is stored in the namespace as
    ``__bench_line__`` for :func:`find_race`.
    """
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    path = chapter_path(name_or_path)
    notebook = json.loads(path.read_text())
    cells, bench_line = _replay(notebook, parameters, through, skip_dsl)
    ip = shell or InteractiveShell.instance()
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        with capture_output(display=True):
            ip.run_line_magic("load_ext", "labmagic")
        for label, source in cells:
            with capture_output(display=True) as captured:
                result = ip.run_cell(source, store_history=False, silent=False)
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                first = source.strip().splitlines()[0][:80]
                raise LabError(
                    f"replaying {path.name}: {label} (`{first}`) raised "
                    f"{type(error).__name__}: {error}{_skipped_hint(notebook, label, error)}",
                    detail=captured.stderr[-2000:])
    finally:
        os.chdir(cwd)
    ip.user_ns["__bench_line__"] = bench_line
    ip.user_ns["__chapter_path__"] = str(path)
    return ip.user_ns


def _skipped_hint(notebook: dict, label: str, error: BaseException) -> str:
    """For a name a replayed cell could not find: the cells before it that the replay skipped for their
    ``no-replay`` tag, where such a name is often defined."""
    if not isinstance(error, NameError) or not label.startswith("code cell "):
        return ""
    upto, number, skipped = int(label.rsplit(" ", 1)[1]), 0, []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        if number < upto and NO_REPLAY_TAG in cell.get("metadata", {}).get("tags", []):
            skipped.append(str(number))
    return f" (skipped before it, tagged {NO_REPLAY_TAG}: code cell {', '.join(skipped)})" if skipped else ""


def _is_race(obj) -> bool:
    """A race by its shape (a :class:`labmagic.benchmark.Race` has these fields), so that the child, below the
    benchmark package, never imports it."""
    return all(hasattr(obj, a) for a in ("chapter", "variants", "make_inputs", "ref"))


def find_race(namespace: dict, name: str | None = None):
    """The race a chapter benchmarks: ``name``, else the one its ``%bench`` line names, else the only
    race in the namespace."""
    if name is None:
        name = bench_race_name(namespace.get("__bench_line__") or "")
    if name is not None:
        race = namespace.get(name)
        if race is None or not _is_race(race):
            raise LabError(f"{name!r} is not a labmagic.benchmark.Race in the chapter")
        return race
    races = races_in(namespace)
    if len(races) != 1:
        raise LabError(f"cannot tell which race to use: found {len(races)} (name it, e.g. `%bench race`)")
    return races[0][1]


def races_in(namespace: dict) -> list[tuple[str, object]]:
    """(name, race) of each distinct race in a namespace (the first name bound to it)."""
    seen: dict[int, tuple[str, object]] = {}
    for name, value in list(namespace.items()):
        if not name.startswith("_") and id(value) not in seen and _is_race(value):
            seen[id(value)] = (name, value)
    return list(seen.values())


def variant_and_inputs(race, variant: str, shape: tuple[int, ...]):
    """(the variant's callable, a fresh tuple of its inputs at ``shape``); KeyError naming the race's variants."""
    if variant not in race.variants:
        raise KeyError(f"race {race.chapter!r} has no variant {variant!r} (variants: {', '.join(race.variants)})")
    inputs = race.make_inputs(*shape)
    return race.variants[variant], inputs if isinstance(inputs, tuple) else (inputs,)
