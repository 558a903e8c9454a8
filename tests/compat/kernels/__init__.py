"""Kernels written as public Triton code is written, host wrappers included.

Each module here is Triton code whose only Tessera-specific lines are its imports
(``import tessera as triton``, ``import tessera.language as tl``, ...). Each defines:

- ``check(device)``: runs the kernels on fresh random inputs (ragged sizes included) and asserts
  the results against an independent float64 reference (PyTorch or NumPy);
- ``bench(device)``: ``(fn, args)`` at a benchmark size, for benchmarks/triton_compat.py, which
  also runs the same text through Triton with the imports changed back.

MODULES lists them in the order of the compatibility table in docs/triton-compat.md.
"""
MODULES = [
    "vector_add",
    "fused_softmax",
    "matmul_autotune",
    "layer_norm",
    "rms_norm",
    "dropout",
    "geglu",
    "swiglu",
    "cross_entropy",
    "rope",
    "block_ptr_matmul",
    "flash_attention",
    "early_exit_rows",
    "grouped_gemm",
    "multi_tensor_selu",
    "rotary_varlen",
    "persistent_matmul",
    "descriptor_matmul",
]
