"""Shared helpers of the compatibility kernels' checks (not part of the ported code)."""
import torch

BOUNDS = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 1e-2}


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; NaN or inf anywhere in ``out`` gives inf."""
    out = out.detach().double().cpu()
    ref = ref.detach().double().cpu()
    if not torch.isfinite(out).all():
        return float("inf")
    denom = ref.norm().item()
    return (out - ref).norm().item() / (denom if denom else 1.0)


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype, what: str, factor: float = 1.0):
    error = relative_error(out, ref)
    bound = BOUNDS[dtype] * factor
    assert error <= bound, f"{what}: relative error {error:.3g} > {bound:.3g}"


def generator(device, seed: int = 0) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g
