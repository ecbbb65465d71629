"""``%%cuda_kernel``: compile a cell with NVRTC and bind each kernel to a Python name."""

from __future__ import annotations

import builtins
import sys

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from traitlets import Bool, Unicode

from ..compiler.binding import python_name
from ..compiler.kernel import CudaKernel, CudaModule, compile_module
from ..errors import LabError


@magics_class
class CudaKernelMagics(Magics):
    """Settings: ``%config CudaKernelMagics.arch = "sm_90a"``, ``%config CudaKernelMagics.lineinfo = False``."""

    arch = Unicode("", config=True, help="Architecture to compile for; empty: this GPU's, else sm_90.")
    lineinfo = Bool(True, config=True, help="Pass -lineinfo so SASS, ncu and compute-sanitizer show source lines.")

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        #: The last compile of each kernel name (for the compile panel's diff against the previous rung).
        self.history: dict[str, tuple] = {}

    @magic_arguments()
    @argument("--arch", default=None,
              help="target architecture, e.g. sm_80, sm_90, sm_90a (default: this GPU's, else sm_90)")
    @argument("-n", "--name-expr", action="append", default=[], metavar="EXPR",
              help="template instance to compile and bind, e.g. -n 'gemm<float, 64>' (bound as gemm_float_64), or an "
                   "overload named by a cast, -n '(void(*)(float*))f' (bound as f_float_ptr)")
    @argument("--as", dest="module_name", default=None, metavar="NAME", help="also bind the compiled module to NAME")
    @argument("--maxrregcount", type=int, default=None, help="cap registers per thread (NVRTC --maxrregcount)")
    @argument("--no-lineinfo", action="store_true", help="do not pass -lineinfo")
    @argument("--sass", action="store_true", help="show the SASS with source lines interleaved")
    @argument("--ptx", action="store_true", help="show the PTX")
    @argument("--panel", action="store_true", help="show the compile panel: instruction mix, occupancy, diff")
    @argument("--vs", default=None, metavar="KERNEL", help="diff the panel against another kernel's last compile")
    @argument("--block", type=int, default=None, help="threads per block for the occupancy estimate")
    @argument("--smem", type=int, default=0, help="dynamic shared memory per block (bytes) for the occupancy estimate")
    @argument("options", nargs="*", help="NVRTC options after --, e.g. -- -use_fast_math -DTILE=32")
    @cell_magic
    def cuda_kernel(self, line: str, cell: str):
        """Compile the cell with NVRTC; each ``__global__`` entry point becomes a callable.

        Call a kernel as ``vecadd(a, b, c, n, grid=(blocks,), block=(256,), smem=0)``. Arguments are
        checked against the C signature; the launch runs on torch's current stream. The book's shared headers
        (``book/include``) are on the include path after any ``-I`` of yours: ``#include <lab/...>``.
        """
        args = parse_argstring(self.cuda_kernel, line)
        options = list(args.options)
        if args.maxrregcount is not None:
            options.append(f"--maxrregcount={args.maxrregcount}")
        module = compile_module(
            cell,
            arch=args.arch or self.arch or None,
            options=options,
            name_expressions=[_unquote(e) for e in args.name_expr],
            lineinfo=self.lineinfo and not args.no_lineinfo,
            first_line=2,  # the cell's first line is the magic itself
        )
        for expression, kernel in module.kernels.items():
            name = python_name(expression)
            _warn_if_hiding(self.shell.user_ns, name, expression)
            self.shell.user_ns[name] = kernel
        if args.module_name:
            self.shell.user_ns[args.module_name] = module
        display(module)
        if args.sass or args.ptx or args.panel or args.vs:
            self._show_panel(module, args)
        for expression, kernel in module.kernels.items():
            self.history[python_name(expression)] = (module.result, kernel.symbol)

    def _show_panel(self, module: CudaModule, args) -> None:
        from ..analysis.panel import build_panel

        previous = None
        if args.vs:
            if args.vs not in self.history:
                raise LabError(f"--vs {args.vs}: no kernel of that name was compiled in this session yet "
                               f"(known: {', '.join(self.history) or 'none'})")
            previous = self.history[args.vs]
        else:
            # The previous compile of the same kernel, if this cell was edited and re-run.
            names = [python_name(e) for e in module.kernels]
            previous = next((self.history[n] for n in names
                             if n in self.history and self.history[n][0].key != module.result.key), None)
        display(build_panel(module.result, block_size=args.block, previous=previous, vs=args.vs,
                            dynamic_smem=args.smem, show_sass=args.sass, show_ptx=args.ptx))


def _warn_if_hiding(namespace: dict, name: str, expression: str) -> None:
    """Say so when a kernel's name hides a Python builtin or replaces a notebook variable that is not a kernel.

    A warning, not a refusal: ``sum``, ``max`` or ``copy`` are natural names for a kernel, and binding it is what
    the cell asks for; but a later ``print(x)`` that launches a kernel, or a lost tensor, must not be a surprise.
    """
    value = namespace.get(name, getattr(builtins, name, None))
    if value is None or isinstance(value, CudaKernel):
        return
    if name in namespace:
        what = f"replaces the notebook's {name} ({type(value).__name__})"
    else:
        what = f"hides Python's builtin {name} (del {name} brings it back)"
    print(f"labmagic: kernel {expression!r} is bound as {name} and {what}", file=sys.stderr)


def _unquote(text: str) -> str:
    """IPython keeps the quotes of a quoted argument (``-n 'gemm<float, 64>'``): drop them."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def register(ipython) -> None:
    ipython.register_magics(CudaKernelMagics)
