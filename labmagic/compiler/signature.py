"""Kernel signatures read from the CUDA source, so arguments can be checked before a launch.

A launch with a float64 tensor where the kernel takes ``const float*`` does not fail: it computes
garbage. The only place that knows the parameter types is the source, so we parse the ``__global__``
declarations: names, parameter types, pointer-ness, ``extern "C"``, and template parameters (which a
name expression such as ``gemm<float, 64>`` substitutes).

This is a declaration reader, not a C++ parser: it handles what kernel authors write (qualifiers,
``__restrict__``, ``__launch_bounds__``, templates, ``extern "C" { ... }`` blocks, comments) and reports
anything else as an unchecked parameter rather than guessing.
"""

from __future__ import annotations

import dataclasses
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

    def instantiate(self, expression: str) -> KernelDecl:
        """Substitute the template arguments of ``expression`` (``name<float, 4>``) into the params."""
        if not self.template_params:
            return self
        inside = expression[expression.index("<") + 1 : expression.rindex(">")] if "<" in expression else ""
        args = [a.strip() for a in _split_top_level(inside)] if inside else []
        mapping = dict(zip(self.template_params, args))
        params = tuple(_substitute(p, mapping) for p in self.params)
        return dataclasses.replace(self, params=params, template_params=())


def _substitute(param: Param, mapping: dict[str, str]) -> Param:
    if param.base not in mapping:
        return param
    inner = _parse_type(mapping[param.base])
    return dataclasses.replace(param, base=inner.base, pointer=param.pointer + inner.pointer,
                               const=param.const or inner.const)


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
        elif c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            out.append('""' + " " * max(0, j + 1 - i - 2))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split_top_level(text: str) -> list[str]:
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


def _matching(text: str, open_index: int, open_ch: str = "(", close_ch: str = ")") -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced")


def _parse_type(text: str) -> Param:
    """Parse a type (no name) such as ``const float *`` or ``unsigned int``."""
    text = text.replace("*", " * ").replace("&", " & ")
    tokens = [t for t in text.split() if t not in _QUALIFIERS]
    const = "const" in tokens
    pointer = tokens.count("*")
    base = " ".join(t for t in tokens if t not in {"const", "*", "&"})
    return Param(name="", base=base, pointer=pointer, const=const)


def _parse_param(text: str, index: int) -> Param:
    text = text.split("=")[0].strip()
    array = text.endswith("]")
    if array:
        text = text[: text.index("[")].strip()
    match = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    # A lone type (unnamed parameter) has no separate name: keep it as the type.
    if match and match.group(1).strip() and match.group(1).strip() not in {"const", "unsigned", "signed"}:
        decl = _parse_type(match.group(1))
        name = match.group(2)
    else:
        decl, name = _parse_type(text), f"arg{index}"
    return dataclasses.replace(decl, name=name, pointer=decl.pointer + int(array))


_GLOBAL = re.compile(r"\b__global__\b")
_ATTR_CALL = re.compile(r"\b(__launch_bounds__|__maxnreg__|__cluster_dims__|__attribute__)\s*\(")


def _extern_c_blocks(text: str) -> list[tuple[int, int]]:
    blocks = []
    for m in re.finditer(r'extern\s+"C"\s*\{', text):
        try:
            blocks.append((m.end(), _matching(text, m.end() - 1, "{", "}")))
        except ValueError:
            blocks.append((m.end(), len(text)))
    return blocks


def parse_kernels(source: str) -> list[KernelDecl]:
    """Every ``__global__`` function declared or defined in ``source``, in order of appearance."""
    text = strip_comments(source)
    blocks = _extern_c_blocks(text)
    kernels: list[KernelDecl] = []
    for m in _GLOBAL.finditer(text):
        # The declaration starts after the previous ';', '}' or '{' (or the start of the text).
        start = max(text.rfind(ch, 0, m.start()) for ch in ";}{") + 1
        prefix = text[start : m.start()]
        pos = m.end()
        # Skip attribute calls such as __launch_bounds__(256, 2) to find the parameter list.
        while True:
            paren = text.find("(", pos)
            if paren < 0:
                break
            attr = None
            for a in _ATTR_CALL.finditer(text, pos, paren + 1):
                if a.end() - 1 == paren:
                    attr = a
            if attr is None:
                break
            pos = _matching(text, paren) + 1
        if paren < 0:
            continue
        name_match = re.search(r"([A-Za-z_]\w*)\s*$", text[pos:paren])
        if not name_match:
            continue
        close = _matching(text, paren)
        params = tuple(_parse_param(p, i) for i, p in enumerate(_split_top_level(text[paren + 1 : close])))
        if len(params) == 1 and params[0].base == "void" and params[0].pointer == 0:
            params = ()
        template: tuple[str, ...] = ()
        tmatch = re.search(r"template\s*<", prefix)
        if tmatch:
            t_open = start + tmatch.end() - 1
            t_close = _matching(text, t_open, "<", ">")
            template = tuple(
                re.split(r"[\s=]+", re.sub(r"^(typename|class|int|unsigned|bool|size_t|[\w:]+)\s+", "", p.strip()))[0]
                for p in _split_top_level(text[t_open + 1 : t_close])
            )
        extern_c = bool(re.search(r'extern\s+"C"', prefix)) or any(a <= m.start() < b for a, b in blocks)
        kernels.append(
            KernelDecl(
                name=name_match.group(1), params=params, extern_c=extern_c, template_params=template,
                line=text.count("\n", 0, m.start()) + 1,
            )
        )
    # A kernel declared and later defined appears twice: keep the definition (the last one).
    unique: dict[str, KernelDecl] = {}
    for k in kernels:
        unique[k.name] = k
    return list(unique.values())
