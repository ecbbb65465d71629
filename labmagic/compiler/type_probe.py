"""What a parameter's type really is, asked of NVRTC: typedefs, ``using`` aliases and macros resolved.

The signature scanner reads ``real* x`` and cannot know that ``real`` is ``float`` (``typedef float real``) or
``double`` (``#define real double``, ``-Dreal=double``). NVRTC knows. For each such type the compile adds one
instance of a variable template, ``&__labmagic_type_probe<real>``, as a name expression: its lowered (Itanium
mangled) name spells the canonical type, ``_Z21__labmagic_type_probeIfE`` for float. The variable is one byte of
device memory per type and no code.
"""

from __future__ import annotations

import re

PROBE = "__labmagic_type_probe"
#: Appended after the cell under a file name of its own, so the cell's line numbers do not move.
DECLARATION = f'\n#line 1 "{PROBE}"\ntemplate <typename T> __device__ char {PROBE};\n'
#: The file name NVRTC gives the appended declaration in its messages.
SOURCE_NAME = PROBE

_BUILTIN = {
    "v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
    "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long", "x": "long long",
    "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float", "d": "double",
    "e": "long double", "g": "__float128", "w": "wchar_t", "Ds": "char16_t", "Di": "char32_t", "Du": "char8_t",
}


def expression(type_text: str) -> str:
    """The name expression that asks NVRTC for ``type_text``."""
    return f"&{PROBE}<{type_text}>"


def written_type(expr: str) -> str | None:
    """``real`` for the probe expression of ``real``; None for any other expression."""
    prefix = f"&{PROBE}<"
    return expr[len(prefix):-1] if expr.startswith(prefix) and expr.endswith(">") else None


def canonical_type(lowered: str) -> str | None:
    """The C type a probe's lowered name spells, without cv-qualifiers: ``float``, ``__half*``, ``ns::S``,
    ``Pair<...>*``, ``float**``; None for what this reader does not follow (references, functions, templates
    inside a namespace)."""
    match = re.fullmatch(rf"_Z{len(PROBE)}{PROBE}I(.+)E", lowered)
    if not match:
        return None
    code, pointers, i = match.group(1), 0, 0
    while i < len(code) and code[i] in "PrVK":  # pointer, restrict, volatile, const: only the pointers matter
        pointers += code[i] == "P"
        i += 1
    name = _name(code, i)
    if name is None:
        return None
    base, end = name
    if end < len(code):
        # A class template's arguments (``4PairIfE``) run to the end; the class is a struct all the same.
        if not (code.startswith("I", end) and code.endswith("E")):
            return None
        base += "<...>"
    return f"{base}{'*' * pointers}"


def _name(code: str, i: int) -> tuple[str, int] | None:
    for size in (2, 1):
        if i + size <= len(code) and code[i:i + size] in _BUILTIN:
            return _BUILTIN[code[i:i + size]], i + size
    if code.startswith("N", i):
        parts, i = [], i + 1
        while i < len(code) and code[i] != "E":
            part = _source_name(code, i)
            if part is None:
                return None
            parts.append(part[0])
            i = part[1]
        return ("::".join(parts), i + 1) if parts and i < len(code) else None
    return _source_name(code, i)


def _source_name(code: str, i: int) -> tuple[str, int] | None:
    digits = re.match(r"\d+", code[i:])
    if not digits:
        return None
    start = i + len(digits.group())
    end = start + int(digits.group())
    return (code[start:end], end) if end <= len(code) else None
