"""``%triton_panel``: the compile panel of a ``@triton.jit`` or ``@gluon.jit`` kernel (``labmagic.triton_panel``)."""

from __future__ import annotations

import ast

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Int

from ..errors import LabError


@magics_class
class TritonPanelMagics(Magics):
    """Settings: ``%config TritonPanelMagics.max_lines = 120``."""

    max_lines = Int(60, config=True, help="Lines of each IR the text form of the panel prints.")

    @magic_arguments()
    @argument("kernel", help="the @triton.jit or @gluon.jit kernel (a name in the notebook)")
    @argument("--signature", "-s", default=None, help="runtime parameter types, e.g. 'x: *fp32, y: *fp32, n: i32'")
    @argument("--args", default=None, metavar="EXPR",
              help="example arguments instead of --signature, e.g. '(x, y, out, n)' (types and 16-divisibility)")
    @argument("--constexpr", "-c", action="append", default=[], metavar="NAME=VALUE",
              help="a tl.constexpr value, e.g. -c BLOCK=1024 (repeatable)")
    @argument("--num-warps", type=int, default=4, help="warps per program (threads per block / 32)")
    @argument("--num-stages", type=int, default=3, help="software-pipelining stages")
    @argument("--arch", default=None, help="target architecture, e.g. sm_80, sm_90 (default: this GPU's, else sm_90)")
    @argument("--vs", default=None, metavar="OTHER",
              help="diff against OTHER: a panel bound with --as, or another kernel compiled with the same options")
    @argument("--ir", default="", metavar="STAGES", help="stages to print, e.g. ttgir,ptx,sass (of ttir,ttgir,llir)")
    @argument("--as", dest="bind", default=None, metavar="NAME", help="bind the panel to NAME (for a later --vs)")
    @line_magic
    def triton_panel(self, line: str):
        """Compile a Triton kernel for the target architecture without launching it; show its resources,
        occupancy, SASS instruction mix, a diff (``--vs``) and the IRs asked for (``--ir``)."""
        # Imported here: %load_ext registers this magic in every notebook, and most never ask for a Triton panel.
        from ..analysis.triton_panel import TritonPanel, triton_panel

        args = parse_argstring(self.triton_panel, line)
        ns = self.shell.user_ns
        kernel = self._value(args.kernel)
        constexprs = dict(_constexpr(item) for item in args.constexpr)
        options = dict(signature=_unquote(args.signature) if args.signature else None, constexprs=constexprs,
                       args=self._value(_unquote(args.args)) if args.args else None, num_warps=args.num_warps,
                       num_stages=args.num_stages, arch=args.arch)
        versus = None
        if args.vs:
            other = self._value(args.vs)
            versus = other if isinstance(other, TritonPanel) else triton_panel(other, **options)
        panel = triton_panel(kernel, **options, vs=versus, ir=args.ir, max_lines=self.max_lines)
        if args.bind:
            ns[args.bind] = panel
        return panel

    def _value(self, expr: str):
        try:
            return self.shell.ev(expr)
        except Exception as exc:  # noqa: BLE001  (NameError, SyntaxError: the reader's typo, one line)
            raise LabError(f"%triton_panel: cannot evaluate {expr!r}: {type(exc).__name__}: {exc}") from exc


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _constexpr(item: str) -> tuple[str, object]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip():
        raise LabError(f"--constexpr {item!r} is not NAME=VALUE (e.g. BLOCK=1024)")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return name.strip(), value.strip()


def register(ipython) -> None:
    ipython.register_magics(TritonPanelMagics)
