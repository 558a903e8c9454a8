"""Matrix multiplication with a fused epilogue (bias + activation), autotuned.

Each program computes a BLOCK_M x BLOCK_N tile of C = act(A @ B + bias), walking K in steps
of BLOCK_K with a float32 accumulator; loads are software-pipelined (cp.async rings of
num_stages slots) and the products run on wgmma (sm_90a) or mma.sync. Programs are numbered
in groups of GROUP_SIZE_M rows of tiles, so that neighbours share columns of B in L2. Rows and
columns past M and N wrap around (their garbage is never stored); the K tail loads zeros.
tutorials/03-matrix-multiplication.py derives it step by step.

On sm_90a a second family competes in the same tuning: gemm_tma.matmul_tma_kernel, persistent
(one program per SM looping over tiles) and fed by the TMA through device-side tensor
descriptors, where the inputs allow it (gemm_tma.tma_rules; docs/perf/matmul_ops_tma.md).
"""
import numpy as np

import tessera
import tessera.language as tl
from tessera.runtime.allocation import default_allocator

from . import gemm_tma, torch_ops
from .gemm_tma import matmul_tma_kernel


LEAKY_SLOPE = 0.01  # leaky_relu's, for the backward (the custom op); the kernel spells it out


@tessera.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@tessera.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # The fused epilogue, in float32 on the accumulator's registers.
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0)
        accumulator = accumulator + bias.to(tl.float32)[None, :]
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))



CONFIGS = [
    tessera.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    # wgmma's (sm_90a) best: one warpgroup on 128 x 128 with K steps of 64, 3 stages (96 KiB,
    # two CTAs per SM), and two warpgroups on 256 x 128.
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                   num_warps=4, num_stages=4),
    # Two warpgroups on 128 x 256 (wgmma's widest N: each B tile read from shared memory
    # serves 64 rows x 256 columns; 220 registers, no spill) and 256 x 128 with a fourth
    # stage (192 KiB): cuBLAS's large-tile shapes, for the large square products.
    tessera.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=3),
    tessera.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                   num_warps=8, num_stages=4),
]


# ----------------------------------------------------------- the two families, tuned as one
# gemm_tma.matmul_tma_kernel (persistent, TMA-fed; sm_90a) competes with the pointer kernel:
# one autotuned entry whose configs are both families' (PERSISTENT picks the body; the pointer
# kernel's code is the same as launched alone), its tuning key holding what decides which
# families may run (FAMILIES) and how A and B are read.

@tessera.jit
def matmul_entry(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_SIZE_M: tl.constexpr, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
                 FAMILIES: tl.constexpr = "pointer", PERSISTENT: tl.constexpr = False,
                 NUM_SMS: tl.constexpr = 1, A_TRANS: tl.constexpr = False,
                 B_TRANS: tl.constexpr = False):
    if PERSISTENT:
        matmul_tma_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_ak,
                          stride_bk, stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K,
                          GROUP_SIZE_M, HAS_BIAS, ACTIVATION, NUM_SMS, A_TRANS, B_TRANS)
    else:
        matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M,
                      HAS_BIAS, ACTIVATION)


TMA_CONFIGS = [tessera.Config({**c.kwargs, "PERSISTENT": True}, num_warps=c.num_warps,
                              num_stages=c.num_stages) for c in gemm_tma.CONFIGS]


def family(config) -> str:
    """A config's kernel family: "tma" (persistent, TMA-fed) or "pointer"."""
    return "tma" if config.kwargs.get("PERSISTENT") else "pointer"


def _families(configs, nargs, **kwargs):
    """The prune hook: the configs of the families this launch allows (kwargs' FAMILIES)."""
    allowed = kwargs.get("FAMILIES", "pointer").split("+")
    return [c for c in configs if family(c) in allowed]


tuned_matmul_kernel = tessera.autotune(
    configs=CONFIGS + TMA_CONFIGS,
    key=["M", "N", "K", "FAMILIES", "NUM_SMS", "A_TRANS", "B_TRANS"],
    prune_configs_by={"early_config_prune": _families})(matmul_entry)


def matmul(a, b, bias=None, activation: str = "", out=None):
    """``C = activation(a @ b + bias)`` on the tensor cores, autotuned per (M, N, K).

    Args:
        a: (M, K), b: (K, N), float16 or bfloat16 (one dtype), any strides. CUDA torch tensors
            run on the GPU (wgmma on sm_90a, mma.sync elsewhere); NumPy arrays (or CPU tensors
            with ``TESSERA_INTERPRET=1``) through the interpreter. Accumulates in float32.
        bias: optional (N,) added to every row, in float32, before the activation.
        activation: "" (none) or "leaky_relu" (slope 0.01).
        out: written when given: (M, N), any strides.

    Returns:
        ``out``: (M, N) in a's dtype (or out's). Differentiable in a, b and bias for torch
        tensors (through the ``tessera::matmul`` custom op, also under torch.compile; the
        backward is two more matmuls: _register_op below).

    Example::

        import torch
        from tessera.ops import matmul
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        bias = torch.randn(4096, device="cuda", dtype=torch.float16)
        c = matmul(a, b, bias, activation="leaky_relu")
    """
    if out is None and torch_ops.wants_op(a, b, bias):  # autograd or torch.compile: the op
        return torch_ops.call(_register_op, "matmul", a, b, bias, activation)
    return matmul_forward(a, b, bias, activation, out)


def _strides(x) -> tuple:
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def matmul_forward(a, b, bias=None, activation: str = "", out=None, config=None):
    """:func:`matmul`'s launch, never through the custom op (what the op runs). ``config``
    (one of ``tuned_matmul_kernel.configs``) launches that config untuned (tests and
    benchmarks); a TMA config the inputs do not allow is a ValueError."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError(f"matmul: inner dimensions differ: a {tuple(a.shape)} @ b "
                         f"{tuple(b.shape)}")
    if out is None:
        out = np.empty((M, N), a.dtype) if isinstance(a, np.ndarray) else a.new_empty((M, N))
    tma, a_trans, b_trans = gemm_tma.tma_rules(a, b)
    mode = tessera.config.knobs.matmul_tma
    families = ("tma" if mode == "on" else "pointer+tma") if tma else "pointer"
    sms = gemm_tma.sm_count(a) if tma else 1
    kernel, meta = tuned_matmul_kernel, {}
    if config is not None:
        if family(config) == "tma" and not tma:  # the pointer kernel runs any inputs
            raise ValueError(f"matmul: config {config} is of the tma family, which these "
                             f"inputs do not allow (gemm_tma.tma_rules: "
                             f"{tuple(a.shape)} {a.dtype} strides {_strides(a)} @ "
                             f"{tuple(b.shape)} strides {_strides(b)})")
        kernel, meta = matmul_entry, config.all_kwargs()

    def grid(meta):
        tiles = tessera.cdiv(M, meta["BLOCK_M"]) * tessera.cdiv(N, meta["BLOCK_N"])
        return (min(sms, tiles) if meta.get("PERSISTENT") else tiles,)

    # The TMA family's tensor maps live in global scratch (128 bytes per map and program),
    # which its launches ask of the allocator: the caller's, else one on a's device.
    with default_allocator(gemm_tma.scratch_allocator(a) if tma and sms > 1 else None):
        kernel[grid](
            a, b, out, out if bias is None else bias, M, N, K, *_strides(a), *_strides(b),
            *_strides(out), HAS_BIAS=bias is not None, ACTIVATION=activation,
            FAMILIES=families, NUM_SMS=sms, A_TRANS=a_trans, B_TRANS=b_trans, **meta)
    return out


# ------------------------------------------------------------------------- the custom op
# What it shares with the norms' (wants_op, run, library): torch_ops.py. The module-level
# `matmul` is the public function; the op is `matmul_op`, whose backward is two more of it.

def _register_op():
    """Defines ``tessera::matmul`` and its autograd formula."""
    import torch
    from torch import Tensor

    def matmul_body(a: Tensor, b: Tensor, bias: Tensor | None, activation: str) -> Tensor:
        return torch_ops.run(matmul_forward, a, b, bias, activation)

    matmul_op = torch.library.custom_op("tessera::matmul", mutates_args=())(matmul_body)

    @matmul_op.register_fake
    def _(a, b, bias, activation):
        return a.new_empty((a.shape[0], b.shape[1]))

    def setup(ctx, inputs, output):
        a, b, bias, activation = inputs
        ctx.save_for_backward(a, b, output if activation else None)
        ctx.activation = activation
        ctx.bias_dtype = None if bias is None else bias.dtype

    def backward(ctx, dc):
        a, b, c = ctx.saved_tensors
        dz = dc
        if ctx.activation == "leaky_relu":  # the output has the pre-activation's sign
            dz = torch.where(c >= 0, dc, dc * LEAKY_SLOPE)
        elif ctx.activation:
            raise NotImplementedError(f"tessera::matmul: no gradient for activation "
                                      f"{ctx.activation!r}")
        dz = dz.to(a.dtype)
        da = matmul_op(dz, b.t(), None, "") if ctx.needs_input_grad[0] else None
        db = matmul_op(a.t(), dz, None, "") if ctx.needs_input_grad[1] else None
        dbias = None
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            dbias = dz.float().sum(0).to(ctx.bias_dtype)
        return da, db, dbias, None

    torch_ops.register_autograd(matmul_op, "matmul", matmul_body, backward, setup)
