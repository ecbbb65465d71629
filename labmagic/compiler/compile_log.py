"""NVRTC's log made readable: one headline for the error, and the log with the reader's own lines beside it.

The cell's messages name its lines as the reader sees them (``line 4: ...``). A message about a header of the book's
include folder names the header as the cell includes it and the cell line that includes it
(``lab/vec.cuh:12 (included at line 3): ...``); those headers are the project's own, so their lines are quoted too.
Any other file is whatever an ``#include`` named (``/etc/passwd``, a key): its place is shown, never its lines, and
its messages lose their quoted words unless it is one of the toolkit's headers, since an error shown in a notebook
lands in logs and executed copies.
"""

from __future__ import annotations

import dataclasses
import os
import re

from ..errors import CompileError
from . import type_probe
from .includes import Header, Includes, SearchPath, file_sha256

#: Name NVRTC gives the source; compiler messages read ``cell(LINE): error: ...``.
SOURCE_NAME = "cell"
#: The file NVRTC compiles the name expressions in; its messages quote an expression, never the user's files.
NAME_MAP = "__nv_name_map"

_HEADER = re.compile(r"^(?P<file>\S.*?)\((?P<line>\d+)\): (?P<severity>catastrophic error|error|warning|note|remark)"
                     r"(?P<code>[^:]*): (?P<message>.*)$")
_PRAGMA = re.compile(r"^\s*#pragma nv_mangled_name (.*?)\s*$")
_NOISE = ('detected in the compilation of "cell".', "Compilation terminated.")


@dataclasses.dataclass(frozen=True)
class Context:
    """What a log is read against: the cell, its first line's number, and the files its includes reached."""

    source: str
    first_line: int = 1
    search: SearchPath | None = None
    includes: Includes | None = None

    def header(self, file: str) -> Header | None:
        if self.includes is None or file in (SOURCE_NAME, NAME_MAP, type_probe.SOURCE_NAME):
            return None
        return self.includes.header(file, self.search.cwd if self.search else None)

    def cell_line(self, header: Header) -> int:
        """The line number the reader sees for the cell line that includes ``header``."""
        return header.cell_line + self.first_line - 1


def diagnostics(log: str) -> list[re.Match]:
    return [m for m in map(_HEADER.match, log.splitlines()) if m]


def only_name_map_errors(log: str) -> bool:
    errors = [m for m in diagnostics(log) if "error" in m["severity"]]
    return bool(errors) and all(m["file"] == NAME_MAP for m in errors) and "nvrtc: error" not in log


def name_map_errors(log: str) -> dict[str, str]:
    """Each name expression NVRTC rejected, with its first message (NVRTC quotes the expression under it)."""
    lines = log.splitlines()
    rejected: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m and m["file"] == NAME_MAP and "error" in m["severity"]:
            quoted = next((p.group(1) for p in map(_PRAGMA.match, lines[i + 1 : i + 3]) if p), None)
            if quoted is not None:
                rejected.setdefault(quoted, m["message"])
    return rejected


def compile_error(log: str, context: Context, rejected: dict[str, str]) -> CompileError:
    """The error for a compile that failed: a rejected name expression, else the first error of the log."""
    detail = annotate_log(log, context)
    if rejected and only_name_map_errors(log):
        expr, message = next(iter(rejected.items()))
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        return CompileError(f"name expression {expr!r}: {message.strip()}{more}", detail=detail)
    return CompileError(headline(log, context), detail=detail)


def _quotable(m: re.Match, context: Context) -> bool:
    """Whether log lines quoted from the file of ``m`` may be shown: the cell's own, the expressions we added, and
    the project's headers."""
    if m["file"] in (SOURCE_NAME, NAME_MAP):
        return True
    header = context.header(m["file"])
    return header is not None and header.project


def _readable(m: re.Match, context: Context) -> bool:
    """Whether the messages about the file of ``m`` may be shown as they are: the quotable files, our additions,
    the toolkit's headers."""
    if _quotable(m, context) or m["file"] == type_probe.SOURCE_NAME:
        return True
    real = os.path.realpath(os.path.join(context.search.cwd, m["file"]) if context.search else m["file"])
    toolkit = context.search.toolkit if context.search else ()
    return any(real.startswith(os.path.realpath(d) + os.sep) for d in toolkit)


def _message(m: re.Match, context: Context) -> str:
    """A diagnostic's message, with its quoted words left out where it is about a file we may not show, and a
    project header's path given as the cell includes it."""
    if not _readable(m, context):
        return re.sub(r'"[^"]*"', '"..."', m["message"])
    header = context.header(m["file"])
    return m["message"].replace(header.path, header.name) if header else m["message"]


def _missing_hint(m: re.Match, context: Context) -> str:
    """Where a header that could not be opened was looked for (the toolkit's folders left out)."""
    if "cannot open source file" not in m["message"] or context.search is None:
        return ""
    search = context.search
    folders = [d for d in search.dirs if d not in search.toolkit]
    if not folders:
        return " (no include folder but the toolkit's is on the path: add -I <folder>)"
    return f" (include folders searched: {', '.join(folders)})"


def headline(log: str, context: Context) -> str:
    """One line for the reader: the first error in the cell or a project header, with its place, and how many
    there were; else the first error anywhere."""
    errors = [m for m in diagnostics(log) if "error" in m["severity"]]
    own = [m for m in errors if m["file"] == SOURCE_NAME or (_quotable(m, context) and m["file"] != NAME_MAP)]
    if own:
        first = own[0]
        more = f" (and {len(own) - 1} more)" if len(own) > 1 else ""
        message = _message(first, context).strip() + _missing_hint(first, context)
        header = context.header(first["file"])
        if header is None:
            return f"line {first['line']}: {message}{more}"
        return f"{header.name}:{first['line']} ({_included(header, context)}): {message}{more}"
    if errors:
        first = errors[0]
        header = context.header(first["file"])
        name = header.name if header else first["file"]
        where = f" ({_included(header, context)})" if header else ""
        return (f"compile failed: {name}({first['line']}): {first['severity']}: "
                f"{_message(first, context).strip()}{_missing_hint(first, context)}{where}")
    fallback = log.strip().splitlines()[0] if log.strip() else ""
    first_line = next((line for line in log.splitlines() if "error" in line), fallback)
    return f"compile failed: {first_line.strip()}"


def _included(header: Header, context: Context) -> str:
    return "pre-included by an option" if header.cell_line == 0 else f"included at line {context.cell_line(header)}"


def _header_line(header: Header, number: int) -> str | None:
    """Line ``number`` of a project header, if the file still holds the text the compile read."""
    if file_sha256(header.path) != header.sha256:
        return None
    try:
        with open(header.path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    return lines[number - 1] if 0 < number <= len(lines) else None


def annotate_log(log: str, context: Context) -> str:
    """The compiler log with each diagnostic of the cell or of a project header followed by its line, where NVRTC
    did not quote it, and a last word on which cell line includes each header the log speaks of.

    NVRTC's own caret lines stay; the noise of the final summary and of the resource report goes. A diagnostic about
    any other file keeps its place and message (its quoted words left out unless the file is a toolkit header),
    never that file's lines.
    """
    lines = context.source.splitlines()
    out: list[str] = []
    log_lines = log.strip("\n").splitlines()
    hidden = withheld = False
    mentioned: dict[str, Header] = {}
    for i, text in enumerate(log_lines):
        if text.strip().endswith(_NOISE[0]) or text.strip() == _NOISE[1]:
            continue
        if text.startswith("ptxas info") or text.startswith("ptxas         ."):
            continue
        match = _HEADER.match(text)
        header = context.header(match["file"]) if match else None
        if header is not None:
            mentioned.setdefault(header.path, header)
        if match:
            hidden = not _quotable(match, context)
            shown = _message(match, context)
            if hidden:
                withheld = withheld or shown != match["message"]
            if header is not None or hidden:
                name = header.name if header else match["file"]
                out.append(f"{name}({match['line']}): {match['severity']}{match['code']}: {shown}")
            else:
                out.append(text)
        elif hidden:
            withheld = withheld or bool(text.strip())
            continue
        else:
            out.append(text)
        if match and not hidden:
            number = int(match["line"])
            quoted = i + 1 < len(log_lines) and log_lines[i + 1].strip() and not _HEADER.match(log_lines[i + 1])
            if quoted:
                continue
            if match["file"] == SOURCE_NAME and 0 <= number - context.first_line < len(lines):
                out.append(f"  {number:>4} | {lines[number - context.first_line]}")
            elif header is not None and (own := _header_line(header, number)) is not None:
                out.append(f"  {number:>4} | {own}")
    for header in mentioned.values():
        if header.cell_line:
            index = header.cell_line - 1
            text = lines[index] if 0 <= index < len(lines) else ""
            out.append(f"{header.name} is included at line {context.cell_line(header)}: {text.strip()}")
    if withheld:
        out.append("(lines and quoted words of files other than the cell are not shown, "
                   "the book's own headers excepted)")
    return "\n".join(out).strip("\n")
