"""The files a compile reads: a cell's ``#include`` lines resolved the way NVRTC resolves them, transitively.

NVRTC cannot say which files it opened (13.x has no ``-M`` option and no API for it), so the compile cache
(:mod:`.cache`) and the results fingerprint (:mod:`labmagic.store.fingerprint`) find them here. NVRTC's rules, as it
follows them: ``#include "x"`` looks in the folder of the file that says it (the working directory, for the cell),
then in each ``-I`` folder in order; ``#include <x>`` looks only in the ``-I`` folders; ``-include x`` (or
``--pre-include=x``) is a quoted include of the cell; the first match is the file opened.

The scan errs on the side of reading more: every ``#include`` line counts, under ``#if 0`` or in a block comment
too (an extra file costs a recompile when it changes, never a stale CUBIN); a name found nowhere is recorded as
missing, so that creating the file later changes the key; ``#include_next`` follows every match. What it cannot
follow, a computed ``#include MACRO``, leaves the scan incomplete, and the compile cache does not keep such a
compile. Files under the toolkit's folders are neither read nor followed: NVRTC's version and the folders' paths
stand for them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
from collections.abc import Sequence

#: A file larger than this is not a header: it is not read, and the scan is incomplete (the compile is not cached).
MAX_BYTES = 16 << 20
#: Headers nested deeper than this are not followed (and the scan is incomplete); NVRTC stops sooner.
MAX_DEPTH = 200

#: ``#include`` and what follows it on its line; only where nothing but blanks come before it on the line (checked
#: apart: a ``^[ \t]*`` in the pattern costs ten times the scan).
_DIRECTIVE = re.compile(r"#[ \t]*include(_next)?\b[ \t]*(.*)$", re.MULTILINE)
_HAS_INCLUDE = re.compile(r"__has_include(?:_next)?\s*\(\s*(\"[^\"\n]*\"|<[^>\n]*>)\s*\)")
_NAMED = re.compile(r"\"([^\"\n]*)\"|<([^>\n]*)>")


@dataclasses.dataclass(frozen=True)
class Header:
    """One file a compile reads that is not the toolkit's."""

    #: Where it was opened (absolute, as NVRTC names it in its log).
    path: str
    #: As the reader knows it: relative to the include folder it lies in (``lab/vec.cuh``), else its path.
    name: str
    sha256: str
    #: The line of the cell (1 = the source's first) whose ``#include`` reaches it first; 0: a pre-include option.
    cell_line: int
    #: Under the book's include folder: the project's own, so its lines and words may be shown in messages.
    project: bool


@dataclasses.dataclass(frozen=True)
class SearchPath:
    """Where NVRTC looks: the working directory (for the cell's quoted includes), the ``-I`` folders in order, and
    which folders hold the toolkit's headers (not read) and the project's (quotable)."""

    cwd: str
    dirs: tuple[str, ...] = ()
    toolkit: tuple[str, ...] = ()
    project: tuple[str, ...] = ()
    pre_includes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Includes:
    """What a scan found: the headers read, every ``#include`` and where it led (what the compile-cache key hashes),
    and the includes it could not follow."""

    headers: tuple[Header, ...]
    trail: tuple[tuple, ...]
    #: (file, line) of each ``#include`` that names no file the scan can look for (``#include MACRO``).
    unfollowed: tuple[tuple[str, int], ...]

    @property
    def complete(self) -> bool:
        return not self.unfollowed

    def header(self, file: str, cwd: str | None = None) -> Header | None:
        """The header a compiler log names ``file`` (a path, relative to ``cwd`` or absolute), or None."""
        real = os.path.realpath(os.path.join(cwd or os.getcwd(), file))
        return next((h for h in self.headers if os.path.realpath(h.path) == real), None)


def include_options(options: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ``-I`` folders and the pre-included files of NVRTC ``options``, in order, in every spelling NVRTC takes
    (``-Idir``, ``-I dir``, ``--include-path=dir``, ``--include-path dir``; ``-include f``, ``--pre-include=f``)."""
    dirs: list[str] = []
    pre: list[str] = []
    i = 0
    while i < len(options):
        opt = options[i]
        for short, long, found in (("-I", "--include-path", dirs), ("-include", "--pre-include", pre)):
            if opt in (short, long):
                if i + 1 < len(options):
                    found.append(options[i + 1])
                i += 1
                break
            if opt.startswith(long + "="):
                found.append(opt[len(long) + 1 :])
                break
            if short == "-I" and opt.startswith("-I"):
                found.append(opt[2:])
                break
        i += 1
    return dirs, pre


def scan(source: str, search: SearchPath) -> Includes:
    """Every file ``source`` (a cell, its quoted includes relative to ``search.cwd``) reads, transitively."""
    return _Scan(search).run(source)


def file_sha256(path: str) -> str | None:
    """sha256 of a file's bytes, or None where it cannot be read (or is larger than :data:`MAX_BYTES`)."""
    data = _read(path)
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _read(path: str) -> bytes | None:
    """A header's bytes, or None where it cannot be read or is larger than :data:`MAX_BYTES`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_BYTES else None


def _under(path: str, folders: Sequence[str]) -> str | None:
    """The first of ``folders`` (real paths) that holds ``path`` (a real path), or None."""
    return next((f for f in folders if path.startswith(f.rstrip(os.sep) + os.sep)), None)


class _Scan:
    def __init__(self, search: SearchPath):
        self.search = search
        self.dirs = [os.path.join(search.cwd, d) for d in search.dirs]
        self.headers: dict[str, Header] = {}
        self.trail: list[tuple] = []
        self.unfollowed: list[tuple[str, int]] = []

    def run(self, source: str) -> Includes:
        for name in self.search.pre_includes:
            self._include("<cell>", '"', name, self.search.cwd, 0, 0, every=False)
        self._file("<cell>", source, self.search.cwd, None, 0)
        return Includes(tuple(self.headers.values()), tuple(self.trail), tuple(self.unfollowed))

    def _file(self, label: str, text: str, here: str, cell_line: int | None, depth: int) -> None:
        """Follow each include of ``text`` (the cell where ``cell_line`` is None, else a header reached from that
        line of the cell)."""
        for m in _HAS_INCLUDE.finditer(text) if "__has_include" in text else ():
            quoted, name = m.group(1)[0] == '"', m.group(1)[1:-1]
            found = self._find(name, quoted, here)
            self.trail.append((label, "has", m.group(1), found[0][0] if found else None))
        for m in _DIRECTIVE.finditer(text):
            if text[text.rfind("\n", 0, m.start()) + 1 : m.start()].strip(" \t"):
                continue  # not a directive: something else comes first on its line
            line = text.count("\n", 0, m.start()) + 1
            named = _NAMED.match(m.group(2))
            if named is None:
                self.unfollowed.append((label, line))
                self.trail.append((label, "unfollowed", line, m.group(2).strip()))
                continue
            quoted, name = named.group(1) is not None, named.group(1) if named.group(1) is not None else named.group(2)
            form = '"' if quoted else "<"
            self._include(label, form, name, here, line if cell_line is None else cell_line, depth,
                          every=bool(m.group(1)))

    def _find(self, name: str, quoted: bool, here: str) -> list[tuple[str, str | None]]:
        """(path, folder it was found through, None for an absolute name) of each file ``name`` may open, first the
        one NVRTC opens."""
        if os.path.isabs(name):
            return [(os.path.abspath(name), None)] if os.path.isfile(name) else []
        folders = ([here] if quoted else []) + self.dirs
        return [(os.path.abspath(os.path.join(d, name)), d) for d in folders if os.path.isfile(os.path.join(d, name))]

    def _toolkit(self, path: str, folder: str | None) -> bool:
        """Whether ``path`` is a toolkit header: found through a toolkit folder, or lying in one."""
        if folder is not None and folder in self.toolkit_folders:
            return True
        return _under(os.path.realpath(path), self.toolkit) is not None

    def _include(self, label: str, form: str, name: str, here: str, cell_line: int, depth: int,
                 every: bool) -> None:
        found = self._find(name, form == '"', here)
        if not found:
            self.trail.append((label, form, name, "missing"))
            return
        for path, folder in found if every else found[:1]:
            if self._toolkit(path, folder):
                self.trail.append((label, form, name, "toolkit", path))
                continue
            real = os.path.realpath(path)
            data = _read(path)  # read once: the hash is of the very text followed below
            sha = hashlib.sha256(data).hexdigest() if data is not None else None
            self.trail.append((label, form, name, path, sha))
            if data is None:
                if os.access(path, os.R_OK):  # readable but too large to be a header: nothing here vouches for it
                    self.unfollowed.append((label, cell_line))
                continue
            if real in self.headers:
                continue
            self.headers[real] = Header(path=path, name=self._name(real, path), sha256=sha, cell_line=cell_line,
                                        project=_under(real, self.project) is not None)
            if depth >= MAX_DEPTH:
                self.unfollowed.append((path, 0))
                continue
            self._file(path, data.decode("utf-8", errors="replace"), os.path.dirname(path), cell_line, depth + 1)

    @functools.cached_property
    def toolkit_folders(self) -> set[str]:
        return {os.path.join(self.search.cwd, d) for d in self.search.toolkit}

    @functools.cached_property
    def toolkit(self) -> list[str]:
        return [os.path.realpath(d) for d in self.search.toolkit]

    @functools.cached_property
    def project(self) -> list[str]:
        return [os.path.realpath(d) for d in self.search.project]

    def _name(self, real: str, path: str) -> str:
        """``real`` relative to the first folder that holds it: the project's, then each -I folder, then cwd."""
        bases = [*self.project, *(os.path.realpath(d) for d in self.dirs), os.path.realpath(self.search.cwd)]
        base = _under(real, bases)
        return os.path.relpath(real, base) if base else path
