"""Which declaration each compiled kernel is, and the Python name it is bound to.

A plain kernel is found by its name, a template instance by its name expression (``-n 'gemm<float, 64>'``). An
overloaded kernel has no name NVRTC can place: each overload is named by a cast, ``-n '(void(*)(float*))f'``, and
bound under its name and parameter types (``f_float_ptr``). Overloads left unnamed are refused with the casts that
would name them: a kernel is never dropped without a word.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from ..errors import LabError
from .signature import KernelDecl, parse_type, split_top_level

#: ``(void(*)(float*, int))ns::f``: a cast that picks one overload of a kernel.
_CAST = re.compile(r"^\(\s*void\s*\(\s*\*\s*\)\s*\((?P<params>.*)\)\s*\)\s*&?\s*(?P<name>(?:::)?[A-Za-z_][\w:\s]*)$",
                   re.DOTALL)


def cast_target(expression: str) -> tuple[str, list[tuple[str, int, bool]]] | None:
    """(kernel name, parameter types as (base, pointer levels, const)) of a cast name expression, else None."""
    m = _CAST.match(expression.strip())
    if m is None:
        return None
    types = [parse_type(p) for p in split_top_level(m["params"])]
    if len(types) == 1 and (types[0].base, types[0].pointer) == ("void", 0):
        types = []
    return re.sub(r"\s+", "", m["name"]).removeprefix("::"), [(t.base, t.pointer, t.const) for t in types]


def display_name(expression: str) -> str:
    """What the reader sees for a kernel: ``f(float*)`` for the cast that names an overload, else the expression."""
    cast = cast_target(expression)
    if cast is None:
        return expression
    name, types = cast
    params = ", ".join(f"{'const ' if const else ''}{base}{'*' * pointer}" for base, pointer, const in types)
    return f"{name}({params})"


def python_name(expression: str) -> str:
    """``gemm<float, 64>`` -> ``gemm_float_64``, ``f<float*>`` -> ``f_float_ptr``, ``ns::k`` -> ``ns_k``, the
    overload ``(void(*)(const float*, int))f`` -> ``f_const_float_ptr_int``: a name the notebook namespace can
    hold. Pointers, references and minus signs are spelled out, so that instances that differ only in them get
    different names."""
    expression = display_name(expression)
    for symbol, word in (("*", " ptr "), ("&", " ref "), ("-", " minus ")):
        expression = expression.replace(symbol, word)
    return re.sub(r"_+", "_", re.sub(r"\W", "_", expression)).strip("_")


def signature(decl: KernelDecl, name: str | None = None) -> str:
    """``f(const float* x, int n)``."""
    return f"{name or decl.qualified_name}({', '.join(f'{p.ctype} {p.name}' for p in decl.params)})"


def _cast(decl: KernelDecl) -> str:
    return f"(void(*)({', '.join(p.ctype for p in decl.params)})){decl.qualified_name}"


def _named(head: str, decls: Iterable[KernelDecl]) -> list[KernelDecl]:
    """The kernels ``head`` names: by qualified name, else by their own name where only one name matches (a
    ``using namespace``)."""
    decls = list(decls)
    exact = [d for d in decls if d.qualified_name == head]
    if exact:
        return exact
    short = [d for d in decls if d.name == head.split("::")[-1]]
    return short if len({d.qualified_name for d in short}) == 1 else []


def targets(decls: Iterable[KernelDecl], name_expressions: Iterable[str]) -> dict[str, KernelDecl]:
    """Each kernel that can be bound, by its expression: every plain kernel that is not overloaded, and each name
    expression whose declaration the scanner found (a template instance with its arguments substituted).

    Raises LabError for an overload no cast names, or a cast that matches no overload."""
    decls = list(decls)
    plain: dict[str, list[KernelDecl]] = {}
    for decl in decls:
        if not decl.template_params:
            plain.setdefault(decl.qualified_name, []).append(decl)
    bound = {name: group[0] for name, group in plain.items() if len(group) == 1}
    named: set[KernelDecl] = set()
    for expression in name_expressions:
        cast = cast_target(expression)
        if cast is not None:
            decl = _overload(expression, *cast, decls)
            named.add(decl)
            bound[expression] = decl
            continue
        head = re.sub(r"\s+", "", expression.split("<")[0]).removeprefix("::")
        found = _named(head, decls)
        templates = [d for d in found if d.template_params]
        decl = templates[0] if "<" in expression and len(templates) == 1 else found[0] if len(found) == 1 else None
        if decl is not None:
            bound[expression] = decl.instantiate(expression)
    for name, group in plain.items():
        unnamed = [d for d in group if d not in named]
        if len(group) > 1 and unnamed:
            casts = " ".join(f"-n {shlex.quote(_cast(d))}" for d in unnamed)
            raise LabError(f"kernel {name} is overloaded ({'; '.join(signature(d) for d in group)}): NVRTC binds an "
                           f"overload only where a cast names it, so add {casts} (or give each kernel a name of its "
                           'own, e.g. an extern "C" wrapper per overload)')
    return bound


def _overload(expression: str, name: str, types: list, decls: list[KernelDecl]) -> KernelDecl:
    """The overload of ``name`` whose parameter types are ``types``."""
    candidates = [d for d in _named(name, decls) if not d.template_params]
    for decl in candidates:
        if [(p.base, p.pointer, p.const) for p in decl.params] == types:
            return decl
    known = "; ".join(signature(d) for d in candidates) or "none"
    raise LabError(f"name expression {expression!r} matches no kernel {name} declared in the cell (its overloads: "
                   f"{known})")


def check_python_names(expressions: Iterable[str]) -> None:
    """Two kernels bound to one Python name would lose one of them without a word: refuse instead."""
    seen: dict[str, str] = {}
    for expression in expressions:
        name = python_name(expression)
        if name in seen:
            raise LabError(f"kernels {seen[name]!r} and {expression!r} would both be bound as {name}: rename one, "
                           "or drop one of the name expressions")
        seen[name] = expression
