"""The book's kernels as a library: ``labmagic.kernel("07_attention", "cuda_wgmma_pingpong")`` returns a chapter's
variant as a Python callable, for a script or another chapter, without anyone re-running the notebook by hand.

The chapter is replayed as ``labmagic bench`` replays it (:func:`labmagic.child.replay.load_chapter`): its code cells
up to the cell that benches its last race (the ``%bench`` lines and the cells tagged ``no-replay`` left out, so a race
defined after the first ``%bench``, such as chapter 08's ``race_w8a8``, is there too), in a real IPython shell with
labmagic loaded, so ``%%cuda_kernel`` cells compile through the same compile cache as in the notebook (an unchanged
cell costs a file read) and Triton and Pallas variants are the chapter's own functions, never copies. Inside a notebook
the replay runs in a namespace of its own that is swapped in for the duration and then put back: chapter 07's ``size``
or ``check`` never overwrite the caller's. A chapter is replayed once per process and file version; later calls are a
dictionary lookup.

Which callable a name means, in this order:

1. ``race=`` given: that race's variant of that name, exactly as ``%bench`` times it.
2. The chapter's own function of that name, when a race times it (directly, bound by ``functools.partial`` or held
   by a closure): the general form, e.g. chapter 07's ``cuda_wgmma_pingpong(q, k, v, causal=True)``, where its races
   hold one partial per mask, or chapter 08's ``triton_quant`` (codes and scales), whose race keeps only the codes.
3. The one variant of that name across the chapter's races (``cuda_wgmma_pingpong_causal``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from pathlib import Path

from ..benchmark.race import callable_identity
from ..errors import LabError
from ..paths import chapter_path

_NAMESPACES: dict[tuple, dict] = {}


def kernel(chapter: str, name: str, race: str | None = None, parameters: dict | None = None):
    """Chapter ``chapter``'s variant ``name`` as a callable (see the module's docstring for which one)."""
    ns = chapter_namespace(chapter, parameters)
    races = _races(ns)
    if race is not None:
        if race not in races:
            raise LabError(f"{Path(ns['__chapter_path__']).stem} has no race {race!r} "
                           f"(races: {', '.join(races) or 'none'})")
        variants = races[race].variants
        if name not in variants:
            raise LabError(f"race {race!r} has no variant {name!r} (variants: {', '.join(variants)})")
        return variants[name]
    own = ns.get(name)
    timed = [fn for r in races.values() for n, fn in r.variants.items() if n == name]
    if callable(own) and any(_is_or_binds(fn, own) for r in races.values() for fn in r.variants.values()):
        return own
    distinct = list({callable_identity(fn): fn for fn in timed}.values())
    if len(distinct) == 1:
        return distinct[0]
    stem = Path(ns["__chapter_path__"]).stem
    if distinct:
        having = [r for r, race_ in races.items() if name in race_.variants]
        raise LabError(f"{stem}: {name!r} is a different callable in each of {', '.join(having)}: "
                       f"name one with race=")
    known = sorted({n for r in races.values() for n in r.variants})
    raise LabError(f"{stem} has no variant {name!r} (variants: {', '.join(known) or 'none'})")


def variants(chapter: str, parameters: dict | None = None) -> dict[str, list[str]]:
    """Each race of the chapter with the names of its variants (what :func:`kernel` can return)."""
    return {name: list(race.variants) for name, race in _races(chapter_namespace(chapter, parameters)).items()}


def chapter_namespace(chapter: str, parameters: dict | None = None) -> dict:
    """The chapter's namespace after its replay (cached per file version and parameters)."""
    path = chapter_path(chapter)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, tuple(sorted((parameters or {}).items())))
    if key not in _NAMESPACES:
        _NAMESPACES[key] = _replay(path, parameters)
    return _NAMESPACES[key]


def _replay(path: Path, parameters: dict | None) -> dict:
    import json

    from IPython.core.interactiveshell import InteractiveShell

    from ..child.replay import benched_races, load_chapter

    through = benched_races(json.loads(path.read_text(encoding="utf-8"))) or None  # every race the chapter benches
    # In a notebook, or in a script (the process's shell), each chapter gets a namespace of its own: two chapters
    # replayed in one namespace saw each other's names (a script replaying 01 then 03 failed in 03's Helion cell).
    ip = InteractiveShell.instance()
    with _own_namespace(ip) as ns:
        load_chapter(path, parameters, shell=ip, through=through)
    return ns


@contextlib.contextmanager
def _own_namespace(ip):
    """Swap a fresh user namespace into ``ip`` for the replay, and the caller's back afterwards, even on error. The
    fresh module is ``sys.modules["__main__"]`` meanwhile, as IPython's own user module is: Helion's generated code
    imports ``__main__`` to find the globals of the function it compiles (chapter 03's Helion cell failed to replay
    without it)."""
    saved = (ip.user_module, ip.user_ns, ip.user_ns_hidden, ip.ns_table)
    main = sys.modules.get("__main__")
    module = types.ModuleType("__main__")
    try:
        ip.init_create_namespaces(module, module.__dict__)
        ip.init_user_ns()
        sys.modules["__main__"] = module
        yield ip.user_ns
    finally:
        ip.user_module, ip.user_ns, ip.user_ns_hidden, ip.ns_table = saved
        if main is not None:
            sys.modules["__main__"] = main


def _races(ns: dict) -> dict:
    from ..child.replay import races_in

    return dict(races_in(ns))


def _is_or_binds(fn, target) -> bool:
    """``fn`` is ``target``, binds it (``functools.partial``) or wraps it (a closure holding it, as chapter 08's
    ``(lambda fn: lambda x: fn(x)[0])(triton_quant)`` keeps only the codes of what ``triton_quant`` returns)."""
    while isinstance(fn, functools.partial):
        if fn.func is target:
            return True
        fn = fn.func
    return fn is target or any(_cell_holds(cell, target) for cell in getattr(fn, "__closure__", None) or ())


def _cell_holds(cell, target) -> bool:
    try:
        return cell.cell_contents is target
    except ValueError:  # a cell not yet filled
        return False
