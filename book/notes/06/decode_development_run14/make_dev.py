# Development run 14 (decode_development.txt) ran this with the working tree at the kernel committed as 03c5d34
# and HEAD at f4a083c, whose wgmma_decode is the kernel of 809ed5e ("old").
"""book/_dev06.ipynb: chapter 06 with the working tree's (new) wgmma_decode and HEAD's beside it as wgmma_decode_old,
a DIRECT_NS switch on the new one (0: unsplit weight tiles keep the shared-memory epilogue), extra instances, no tuning
cells. Run from the repository root."""
import json
import subprocess

path = "book/06_tensor_core_gemm.ipynb"
nb = json.load(open(path))
head = json.loads(subprocess.run(["git", "show", "HEAD:" + path], capture_output=True, text=True, check=True).stdout)

def text(cell):
    return "".join(cell["source"])

def set_text(cell, src):
    lines = src.split("\n")
    cell["source"] = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])

kernel = nb["cells"][12]
src = text(kernel)
old_src = text(head["cells"][12])
start = old_src.index("template <int NT, int R, int KB, int STAGES, int CL>\n__global__ void __cluster_dims__(1, 1, CL) __launch_bounds__(256)\nwgmma_decode(")
old_kernel = old_src[start:].replace("wgmma_decode(", "wgmma_decode_old(", 1)
src = src.replace("template <int NT, int R, int KB, int STAGES, int CL>\n__global__ void __cluster_dims__(1, 1, CL) __launch_bounds__(256)\nwgmma_decode(",
                  "template <int NT, int R, int KB, int STAGES, int CL, int DIRECT_NS = 1>\n__global__ void __cluster_dims__(1, 1, CL) __launch_bounds__(256)\nwgmma_decode(", 1)
assert "DIRECT_NS" in src
src = src.replace("    if constexpr (CL == 1) {  // nothing to sum", "    if constexpr (CL == 1 && (SWAP || DIRECT_NS)) {  // nothing to sum", 1)
assert "(SWAP || DIRECT_NS)" in src
# CL = 1 without the direct path: the committed shared-memory route (the barrier became cluster-only in the new code)
src = src.replace('    asm volatile("barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;\\n" ::: "memory");\n    // Block `rank` sums',
                  '    if constexpr (CL > 1) asm volatile("barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;\\n" ::: "memory");\n    else __syncthreads();\n    // Block `rank` sums', 1)
src = src.replace("        const float* part = cluster_ptr(P, q);", "        const float* part = CL > 1 ? cluster_ptr(P, q) : P;", 1)
src = src.replace('    asm volatile("barrier.cluster.arrive.release.aligned;\\n" ::: "memory");\n#pragma unroll\n    for (int i = 0; i < ITEMS',
                  '    if constexpr (CL > 1) asm volatile("barrier.cluster.arrive.release.aligned;\\n" ::: "memory");\n#pragma unroll\n    for (int i = 0; i < ITEMS', 1)
src = src.replace('    asm volatile("barrier.cluster.wait.acquire.aligned;\\n" ::: "memory");\n}',
                  '    if constexpr (CL > 1) asm volatile("barrier.cluster.wait.acquire.aligned;\\n" ::: "memory");\n}', 1)
assert src.count("if constexpr (CL > 1) asm") == 3 and "else __syncthreads();" in src, "dev substitutions"
src = src.rstrip("\n") + "\n\n" + old_kernel
DEV = [(8, 64, 2, 5, 2), (8, 64, 2, 4, 2), (8, 64, 2, 8, 2), (8, 128, 1, 8, 1), (8, 64, 2, 5, 1),
       (16, 64, 2, 5, 2), (16, 64, 2, 8, 2), (16, 64, 2, 5, 1), (16, 128, 1, 8, 1),
       (64, 64, 2, 6, 2), (64, 32, 2, 8, 1), (64, 56, 1, 6, 1), (64, 64, 2, 3, 1)]
names = []
for c in DEV:
    args = ", ".join(map(str, c))
    names += [f"wgmma_decode_old<{args}>"]
    if c[-1] == 1 and c[0] != 64:
        names += [f"wgmma_decode<{args}, 0>"]
first, rest = src.split("\n", 1)
assert first.endswith("{decode_flags}")
src = first + " " + " ".join(f"-n '{n}'" for n in names) + "\n" + rest
set_text(kernel, src)

dev = {"cell_type": "code", "execution_count": None, "metadata": {"tags": []}, "outputs": [],
       "source": ["DEV_CONFIGS = " + repr(DEV) + "\n"]}
nb["cells"].insert(16, dev)
assert "Tuning the decode kernels" in text(nb["cells"][29])
del nb["cells"][29:31]
json.dump(nb, open("book/_dev06.ipynb", "w"), indent=1, ensure_ascii=False)
print(len(names), "extra instances")
