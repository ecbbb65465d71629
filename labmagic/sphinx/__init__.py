"""Sphinx extensions used only while the book is built (listed in ``_config.yml``): the Results page
(:mod:`.fill_results`) and CUDA highlighting of ``%%cuda_kernel`` cells (:mod:`.cuda_cells`)."""
