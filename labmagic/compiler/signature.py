"""Kernel signatures read from the CUDA source, so arguments can be checked before a launch.

A launch with a float64 tensor where the kernel takes ``const float*`` does not fail: it computes
garbage. The only place that knows the parameter types is the source, so we parse the ``__global__``
declarations: names, parameter types, pointer-ness, ``extern "C"``, and template parameters (which a
name expression such as ``gemm<float, 64>`` substitutes).

This is a declaration reader, not a C++ parser: it handles what kernel authors write (qualifiers,
``__restrict__``, ``__launch_bounds__``, templates, ``extern "C" { ... }`` blocks, namespaces, comments) and
never raises: what it cannot read it leaves out, and NVRTC, which sees the real program, has the last word (a
kernel under ``#if 0`` is found here but dropped when NVRTC does not know it; a type this reader cannot place is
asked of NVRTC, see :mod:`.type_probe`).
"""

from __future__ import annotations

import dataclasses
import functools
import re

_QUALIFIERS = {"__restrict__", "__restrict", "restrict", "volatile", "struct", "class", "typename"}


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    base: str  # the type without const/pointers: "float", "float4", "__nv_bfloat16", "unsigned int"
    pointer: int = 0  # levels of indirection
    const: bool = False

    @property
    def ctype(self) -> str:
        return f"{'const ' if self.const else ''}{self.base}{'*' * self.pointer}"


@dataclasses.dataclass(frozen=True)
class KernelDecl:
    name: str
    params: tuple[Param, ...]
    extern_c: bool
    template_params: tuple[str, ...] = ()
    line: int = 0
    #: The enclosing named namespaces, ``outer::inner`` (empty at global scope or in an anonymous namespace).
    namespace: str = ""

    @property
    def qualified_name(self) -> str:
        """``ns::kernel``: the name NVRTC finds it by from the end of the program."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    def instantiate(self, expression: str) -> KernelDecl:
        """Substitute the template arguments of ``expression`` (``name<float, 4>``) into the params."""
        if not self.template_params:
            return self
        opened, closed = expression.find("<"), expression.rfind(">")
        inside = expression[opened + 1 : closed] if 0 <= opened < closed else ""
        args = [a.strip() for a in split_top_level(inside)] if inside else []
        mapping = dict(zip(self.template_params, args))
        params = tuple(_substitute(p, mapping) for p in self.params)
        return dataclasses.replace(self, params=params, template_params=())


def _substitute(param: Param, mapping: dict[str, str]) -> Param:
    if param.base not in mapping:
        return param
    inner = parse_type(mapping[param.base])
    return dataclasses.replace(param, base=inner.base, pointer=param.pointer + inner.pointer,
                               const=param.const or inner.const)


def _literal_end(source: str, i: int, quote: str) -> int:
    """The index after the string or char literal opening at ``i`` (at most the end of its line)."""
    j = i + 1
    while j < len(source) and source[j] not in (quote, "\n"):
        j += 2 if source[j] == "\\" else 1
    return min(j + 1, len(source)) if j < len(source) and source[j] == quote else min(j, len(source))


def _digit_separator(source: str, i: int) -> bool:
    """Whether the ``'`` at ``i`` separates digits (``1'000'000``) rather than opening a char literal."""
    run = re.search(r"[\w.']*$", source[max(0, i - 64) : i]).group()
    return bool(run) and run[0].isdigit()


def strip_comments(source: str) -> str:
    """Blank out comments and string/char literals, keeping every newline (so line numbers hold)."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in source[i:j]))
            i = j
        elif source.startswith('"C"', i) and re.search(r"extern\s*$", source[max(0, i - 16) : i]):
            out.append('"C"')
            i += 3
        elif c == '"' or (c == "'" and not _digit_separator(source, i)):
            # A '(' or '}' inside a literal must not count when brackets are matched.
            j = _literal_end(source, i, c)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


class _Unbalanced(ValueError):
    """A bracket without its partner: the source does not compile, and NVRTC will say where."""


def _matching(text: str, open_index: int, open_ch: str = "(", close_ch: str = ")") -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise _Unbalanced(f"no {close_ch!r} for the {open_ch!r} at offset {open_index}")


def parse_type(text: str) -> Param:
    """Parse a type (no name) such as ``const float *`` or ``unsigned int``."""
    text = text.replace("*", " * ").replace("&", " & ")
    tokens = [t for t in text.split() if t not in _QUALIFIERS]
    const = "const" in tokens
    pointer = tokens.count("*")
    base = " ".join(t for t in tokens if t not in {"const", "*", "&"})
    return Param(name="", base=base, pointer=pointer, const=const)


_BUILTIN_WORDS = frozenset({"int", "char", "short", "long", "float", "double", "bool", "signed", "unsigned"})


def _parse_param(text: str, index: int) -> Param:
    text = text.split("=")[0].strip()
    array = text.endswith("]")
    if array:
        text = text[: text.index("[")].strip()
    match = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    # A lone type (unnamed parameter: `const int`, `unsigned long`) has no separate name: keep it as the type.
    # `unsigned n` is a named one (C's implicit int).
    if match and match.group(1).strip() not in ("", "const") and match.group(2) not in _BUILTIN_WORDS:
        decl = parse_type(match.group(1))
        name = match.group(2)
    else:
        decl, name = parse_type(text), f"arg{index}"
    return dataclasses.replace(decl, name=name, pointer=decl.pointer + int(array))


_GLOBAL = re.compile(r"\b__global__\b")
_ATTR_CALL = re.compile(r"\b(__launch_bounds__|__maxnreg__|__cluster_dims__|__attribute__)\s*\(")


def _blocks(text: str, opening: re.Pattern) -> list[tuple[int, int, re.Match]]:
    """(start, end, match) of each ``{ ... }`` block that ``opening`` (ending at its ``{``) starts."""
    blocks = []
    for m in opening.finditer(text):
        try:
            blocks.append((m.end(), _matching(text, m.end() - 1, "{", "}"), m))
        except _Unbalanced:
            blocks.append((m.end(), len(text), m))
    return blocks


_EXTERN_C_BLOCK = re.compile(r'extern\s+"C"\s*\{')
_NAMESPACE_BLOCK = re.compile(
    r"\bnamespace\s*((?:inline\s+)?[A-Za-z_]\w*(?:\s*::\s*(?:inline\s+)?[A-Za-z_]\w*)*)?\s*\{")


def _namespace_at(position: int, namespaces: list[tuple[int, int, re.Match]]) -> str:
    names = [re.sub(r"\s+|inline\s+", "", m.group(1)) for a, b, m in namespaces if a <= position < b and m.group(1)]
    return "::".join(names)


@functools.lru_cache(maxsize=128)
def parse_kernels(source: str) -> tuple[KernelDecl, ...]:
    """Every ``__global__`` function declared or defined in ``source``, in order of appearance.

    Remembered per source text: ``compile_module`` and ``nvrtc.compile`` both read a cell's kernels, on every run of
    the cell (a compile-cache hit included), and the declarations are frozen."""
    text = strip_comments(source)
    extern_blocks = _blocks(text, _EXTERN_C_BLOCK)
    namespaces = _blocks(text, _NAMESPACE_BLOCK)
    kernels: list[KernelDecl] = []
    for m in _GLOBAL.finditer(text):
        try:
            kernel = _declaration(text, m)
        except _Unbalanced:
            continue  # NVRTC will report the missing bracket with its line
        if kernel is not None:
            extern_c = kernel.extern_c or any(a <= m.start() < b for a, b, _ in extern_blocks)
            namespace = _namespace_at(m.start(), namespaces)
            kernels.append(dataclasses.replace(kernel, extern_c=extern_c, namespace=namespace))
    # A kernel declared and later defined appears twice: keep the definition (the last one). Overloads (one name,
    # other parameter types) are kernels of their own.
    unique: dict[tuple, KernelDecl] = {}
    for k in kernels:
        unique[(k.qualified_name, tuple(p.ctype for p in k.params))] = k
    return tuple(unique.values())


def _declaration(text: str, m: re.Match) -> KernelDecl | None:
    """The kernel whose ``__global__`` is ``m``, or None where no name and parameter list follow."""
    # The declaration starts after the previous ';', '}' or '{' (or the start of the text).
    start = max(text.rfind(ch, 0, m.start()) for ch in ";}{") + 1
    prefix = text[start : m.start()]
    pos = m.end()
    # Skip attribute calls such as __launch_bounds__(256, 2) to find the parameter list.
    while True:
        paren = text.find("(", pos)
        if paren < 0:
            return None
        attr = None
        for a in _ATTR_CALL.finditer(text, pos, paren + 1):
            if a.end() - 1 == paren:
                attr = a
        if attr is None:
            break
        pos = _matching(text, paren) + 1
    name_match = re.search(r"([A-Za-z_]\w*)\s*$", text[pos:paren])
    if not name_match:
        return None
    close = _matching(text, paren)
    params = tuple(_parse_param(p, i) for i, p in enumerate(split_top_level(text[paren + 1 : close])))
    if len(params) == 1 and params[0].base == "void" and params[0].pointer == 0:
        params = ()
    template: tuple[str, ...] = ()
    tmatch = re.search(r"template\s*<", prefix)
    if tmatch:
        t_open = start + tmatch.end() - 1
        t_close = _matching(text, t_open, "<", ">")
        template = tuple(
            re.split(r"[\s=]+", re.sub(r"^(typename|class|int|unsigned|bool|size_t|[\w:]+)\s+", "", p.strip()))[0]
            for p in split_top_level(text[t_open + 1 : t_close])
        )
    return KernelDecl(
        name=name_match.group(1), params=params, extern_c=bool(re.search(r'extern\s+"C"', prefix)),
        template_params=template, line=text.count("\n", 0, m.start()) + 1,
    )
