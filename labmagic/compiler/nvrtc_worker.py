"""The child side of :mod:`.sandbox`: NVRTC in a process of its own, under a memory limit.

Started as a script (``python nvrtc_worker.py LIMIT_BYTES [CUDA_SITE]``), it answers compile requests read from
stdin, one at a time, until stdin closes. Each message is a pickle behind an 8-byte length (:data:`FRAME`). It
imports nothing from labmagic, so a start costs an interpreter and cuda.bindings, not the package's environment
setup.

A runaway compile (a template that instantiates without end) then costs this process, not the notebook: the
parent kills it at its time limit or at a Ctrl-C, and the address-space limit set here stops its memory.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import threading
import time

#: Every message: its length (little-endian u64), then the pickle.
FRAME = struct.Struct("<Q")


def write_message(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def _read_exactly(stream, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_message(stream):
    """The next message on ``stream``, or None when it closed."""
    header = _read_exactly(stream, FRAME.size)
    if header is None:
        return None
    body = _read_exactly(stream, FRAME.unpack(header)[0])
    return None if body is None else pickle.loads(body)


def peak_memory() -> int:
    """The most address space this process has held (VmPeak), in bytes; 0 where /proc does not say."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def compile_program(request: dict) -> dict:
    """Run NVRTC on ``request`` (source, name, options, expressions, and the notebook's working directory, where
    the cell's quoted includes and relative ``-I`` folders are found); the reply holds the log and, if it
    compiled, the CUBIN, the PTX and each expression's lowered name."""
    from cuda.bindings import nvrtc

    if request.get("cwd"):
        try:
            os.chdir(request["cwd"])  # the notebook may have changed folder since this process started
        except OSError:
            pass  # a folder gone since: NVRTC reports the includes it then cannot find

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    reply: dict = {"ok": False, "log": "", "api_error": None, "cubin": b"", "ptx": None, "lowered": {}}
    err, prog = nvrtc.nvrtcCreateProgram(request["source"].encode(), request["name"].encode(), 0, [], [])
    if err != ok:
        reply["api_error"] = f"create program: {_error_text(err)}"
        return reply
    try:
        for expr in request["expressions"]:
            err, = nvrtc.nvrtcAddNameExpression(prog, expr.encode())
            if err != ok:
                reply["api_error"] = f"name expression {expr!r}: {_error_text(err)}"
                return reply
        options = [o.encode() for o in request["options"]]
        err, = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        reply["log"] = _program_log(prog)
        if err != ok:
            return reply
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = bytearray(size)
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        reply["cubin"] = bytes(cubin)
        err, ptx_size = nvrtc.nvrtcGetPTXSize(prog)
        if err == ok:
            buf = bytearray(ptx_size)
            nvrtc.nvrtcGetPTX(prog, buf)
            reply["ptx"] = bytes(buf).rstrip(b"\0").decode(errors="replace")
        for expr in request["expressions"]:
            err, name = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            if err != ok:
                reply["api_error"] = f"lowered name of {expr!r}: {_error_text(err)}"
                return reply
            reply["lowered"][expr] = name.decode() if isinstance(name, bytes) else str(name)
        reply["ok"] = True
        return reply
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _error_text(err) -> str:
    from cuda.bindings import nvrtc

    return nvrtc.nvrtcGetErrorString(err)[1].decode()


def _program_log(prog) -> str:
    from cuda.bindings import nvrtc

    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = bytearray(size)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


def _limit_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # not a POSIX system: the parent's time limit still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _exit_with_parent(parent: int) -> None:
    """End this process when the notebook that started it is gone, even in the middle of a compile (NVRTC
    releases the GIL, so this thread runs)."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str]) -> None:
    parent = os.getppid()
    # Anything NVRTC or Python prints must not land in the reply channel: stdout becomes stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    if len(argv) > 1 and argv[1] and argv[1] not in sys.path:
        sys.path.append(argv[1])  # last: it must not shadow the standard library
    from cuda.bindings import nvrtc  # noqa: F401  (loaded before the limit, once, while the parent waits)

    _limit_memory(int(argv[0]))
    _exit_with_parent(parent)
    while (request := read_message(requests)) is not None:
        try:
            reply = compile_program(request)
        except BaseException as exc:  # noqa: BLE001  (MemoryError at the limit included: the parent explains)
            reply = {"ok": False, "log": "", "api_error": f"{type(exc).__name__}: {exc}"}
        reply["peak_memory"] = peak_memory()
        write_message(replies, reply)


if __name__ == "__main__":
    # Run as a script: its own folder must not shadow modules of the same name (resources, signature, ...).
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    main(sys.argv[1:])
