"""Errors a reader should see as one line, not as a traceback.

Every error labmagic raises on purpose derives from :class:`LabError`. When the IPython extension is
loaded, a custom exception handler prints these as ``ErrorName: message`` (plus any preformatted
detail, such as a compiler log) instead of a traceback wall; the notebook stays usable.
"""

from __future__ import annotations


class LabError(Exception):
    """Base class: the message is the whole story, no traceback needed."""

    #: Optional preformatted text shown under the one-line message (e.g. the compiler's log).
    detail: str = ""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class CompileError(LabError):
    """NVRTC rejected the source. ``detail`` holds the log with the cell's line numbers."""


class ArgumentError(LabError, TypeError):
    """A kernel argument does not match the kernel's C signature."""


class UnsupportedInput(ArgumentError):
    """The variant does not take this input by design (a peer library's documented limit: a row length, a dtype), as
    opposed to a wrong argument: a chapter's check (:func:`labmagic.check_variants`) and a race's check move on to the
    next shape, and a race's row at that shape reads ``skipped``, with why. Not a failure, and not a way to hide one:
    raise it before the kernel runs, for inputs its library refuses."""


class NoGPUError(LabError, RuntimeError):
    """The call needs a CUDA GPU and this machine has none."""


class ToolMissingError(LabError, RuntimeError):
    """An external tool (ncu, compute-sanitizer, cuobjdump, ...) is not installed."""


def shown(value, limit: int = 40) -> str:
    """``value`` quoted for a one-line message: its ``repr`` (which shows control and bidirectional-format characters
    as escapes, so they cannot act on the line), cut to ``limit`` characters with the full length said."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    return repr(value)


def one_line(exc: BaseException) -> str:
    """The text the notebook shows for a LabError."""
    text = f"{type(exc).__name__}: {exc}"
    detail = getattr(exc, "detail", "")
    return f"{text}\n{detail.rstrip()}" if detail else text


def describe(exc: BaseException) -> str:
    """``Type: first line`` of an exception a variant raised, for a row or a check line (at most 300 characters)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
