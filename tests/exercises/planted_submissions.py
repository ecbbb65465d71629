"""Submissions the judge must refuse or decline to grade, one per known cheat and per kind of bad input, written as a
reader's marked cells. Each entry: (exercise, cells, the status the judge must give, a phrase its verdict must hold).

CPU_CHEATS are refused without a GPU (Triton runs in its interpreter); GPU_CHEATS need one (streams, kernels and
copies are read from the device's own records; compute-sanitizer; timing). BAD_INPUT are not graded anywhere.
"""

from __future__ import annotations

#: A correct Triton kernel for scale_add, to build cheats around (the cheat is in the launcher).
SCALE_ADD_KERNEL = '''\
# exercise: scale_add
@triton.jit
def k(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''


def scale_add(launcher: str, kernel: str = SCALE_ADD_KERNEL) -> tuple[str, ...]:
    return (kernel + "\n" + launcher,)


LAUNCH = "    k[(triton.cdiv(x.numel(), 256),)](x, y, out, alpha, x.numel(), BLOCK=256)\n"

CPU_CHEATS = {
    "calls torch": ("scale_add", scale_add("def scale_add(x, y, alpha, out):\n    out.copy_(alpha * x + y)\n"),
                    "refused", "calls torch itself: aten::mul"),
    "hides the torch call in a helper": (
        "scale_add", scale_add("def helper(a, b):\n    return torch.add(a, b)\n\n"
                               "def scale_add(x, y, alpha, out):\n    out.copy_(helper(alpha * x, y))\n"),
        "refused", "calls torch itself"),
    "another library": ("scale_add", ("# exercise: scale_add\nimport numpy as np\n\n"
                                      "def scale_add(x, y, alpha, out):\n    out.numpy()[:] = alpha * x.numpy() + y.numpy()\n",),
                        "refused", "imports numpy"),
    "the chapter's own kernel": ("scale_add", ("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n"
                                               "    labmagic.kernel('01_vector_add', 'triton')(x, y, out=out)\n",),
                                 "refused", "labmagic.kernel"),
    "a copy to the host": ("scale_add", scale_add("def scale_add(x, y, alpha, out):\n    x.cpu()\n" + LAUNCH),
                           "refused", "a copy to the host"),
    "a device copy behind torch's back": (  # on the H200 it was graded fail (no CUDA kernel), not refused
        "copy_float4", ("# exercise: copy_float4\nfrom cuda.bindings import runtime\n\ndef copy_float4(x, out):\n"
                        "    runtime.cudaMemcpyAsync(out.data_ptr(), x.data_ptr(), 4 * x.numel(),\n"
                        "                            runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice,\n"
                        "                            torch.cuda.current_stream().cuda_stream)\n",),
        "refused", "imports cuda.bindings: the CUDA runtime or driver called directly"),
    "code built at run time": ("scale_add", ("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n"
                                             "    eval('out.copy_(alpha * x + y)')\n",),
                               "refused", "code built at run time"),
    "returns its input": ("scale_add", ("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n    return y\n",),
                          "refused", "returns (a view of) its input `y`"),
    "caches by address, writes nothing the second time": (
        "scale_add", scale_add("_seen = set()\n\ndef scale_add(x, y, alpha, out):\n"
                               "    if (x.data_ptr(), out.data_ptr()) in _seen:\n        return\n"
                               "    _seen.add((x.data_ptr(), out.data_ptr()))\n" + LAUNCH),
        "refused", "caches results across calls"),
    "caches by shape, returns the first result": (
        "scale_add", scale_add(
            "@triton.jit\ndef copy(src, dst, n, BLOCK: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)\n\n"
            "_kept = {}\n\ndef scale_add(x, y, alpha, out):\n"
            "    grid = (triton.cdiv(x.numel(), 256),)\n"
            "    if x.shape in _kept:\n"
            "        copy[grid](_kept[x.shape], out, x.numel(), BLOCK=256)\n        return\n"
            + LAUNCH + "    _kept[x.shape] = torch.empty_like(out)\n"
            "    copy[grid](out, _kept[x.shape], x.numel(), BLOCK=256)\n"),
        "refused", "returned the first call's result"),
    "writes past the end of its output": (
        "scale_add", scale_add(LAUNCH.join(("def scale_add(x, y, alpha, out):\n", "")),
                               SCALE_ADD_KERNEL.replace("mask=mask)\n", "mask=offs <= n)\n")),
        "refused", "writes outside its output"),
}

BAD_INPUT = {
    "does not compile": ("copy_float4", ('%%cuda_kernel\n// exercise: copy_float4\n'
                                         'extern "C" __global__ void k(float* x) { x[0] = y; }\n',),
                         "not_graded", "does not compile"),
    "a syntax error": ("scale_add", ("# exercise: scale_add\ndef scale_add(x, y, alpha, out)\n    pass\n",),
                       "not_graded", "syntax error"),
    "no function to call": ("scale_add", ("# exercise: scale_add\nTHREADS = 256\n",), "not_graded",
                            "define no function scale_add"),
    "an exercise that does not exist": ("no_such_exercise", ("# exercise: no_such_exercise\n",), "not_graded",
                                        "no exercise 'no_such_exercise'"),
    "a hang": ("scale_add", ("# exercise: scale_add\ndef scale_add(x, y, alpha, out):\n    while True:\n"
                             "        pass\n",), "not_graded", "did not finish within"),
    "a dead grading process": ("scale_add", ("# exercise: scale_add\nimport os\nimport signal\n\n"
                                             "def scale_add(x, y, alpha, out):\n    os.kill(os.getpid(), signal.SIGKILL)\n",),
                               "not_graded", "was killed by SIGKILL"),
}

#: The correct CUDA copy of copy_float4, to build GPU cheats around.
COPY_CUDA = '''\
%%cuda_kernel
// exercise: copy_float4
extern "C" __global__ void copy_float4_kernel(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < n / 4; i += stride) reinterpret_cast<float4*>(out)[i] = reinterpret_cast<const float4*>(x)[i];
    if (4 * (n / 4) + tid < n) out[4 * (n / 4) + tid] = x[4 * (n / 4) + tid];
    // PLANTED
}
'''
COPY_LAUNCH = '''\
# exercise: copy_float4
def copy_float4(x, out):
    n = x.numel()
    copy_float4_kernel(x, out, n, grid=max(1, min(1056, triton.cdiv(n // 4, 256))), block=256)
'''

GPU_CHEATS = {
    "another stream": ("scale_add", scale_add("_side = torch.cuda.Stream()\n\ndef scale_add(x, y, alpha, out):\n"
                                              "    with torch.cuda.stream(_side):\n    " + LAUNCH),
                       "refused", "another stream"),
    "a kernel it hides": ("scale_add", ("# exercise: scale_add\ndef _hidden():\n"
                                        "    return labmagic.compile_cuda(r'''extern \"C\" __global__ void sneaky(const float* x, "
                                        "const float* y, float* o, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
                                        "if (i < n) o[i] = a * x[i] + y[i]; }''').sneaky\n\n"
                                        "def scale_add(x, y, alpha, out):\n"
                                        "    _hidden()(x, y, out, alpha, x.numel(), grid=triton.cdiv(x.numel(), 256), block=256)\n",),
                          "refused", "launches kernels that are not its own: sneaky"),
    "skips the work once timed": (
        "scale_add", scale_add("_calls = {}\n\ndef scale_add(x, y, alpha, out):\n"
                               "    key = (x.data_ptr(), out.data_ptr())\n    _calls[key] = _calls.get(key, 0) + 1\n"
                               "    if _calls[key] > 3:\n        return\n" + LAUNCH),
        "refused", "below the datasheet floor"),
    "writes far outside its output": (
        "copy_float4", (COPY_CUDA.replace("// PLANTED", "if (tid == 0) out[n + 4096] = 1.f;  // PLANTED: 16 KB past"),
                        COPY_LAUNCH),
        "refused", "memcheck"),
}

#: A crash takes its grading process with it; the job after it must still be graded.
CRASH = ("copy_float4", (COPY_CUDA.replace("// PLANTED", "if (tid == 0) *(volatile float*)16 = 1.f;  // PLANTED"),
                         COPY_LAUNCH), "not_graded", "crashed the CUDA context")
