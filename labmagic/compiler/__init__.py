"""From CUDA C++ to a launch: the compile backend, chosen in one place (:mod:`.backend`), NVRTC (:mod:`.nvrtc`) and
its cache (:mod:`.cache`), the kernels' C signatures (:mod:`.signature`), the compiler's resource report
(:mod:`.resources`), checked launches (:mod:`.kernel`), and the account of a kernel that faulted (:mod:`.faults`).
Nothing here needs a GPU until a kernel is launched."""
