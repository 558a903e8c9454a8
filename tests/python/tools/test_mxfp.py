"""tessera.tools.mxfp (Triton's triton.tools.mxfp): E2M1 codes and E8M0 scales against
values computed here from the format's definition in float64."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tessera.tools.mxfp import MXFP4Tensor, MXScaleTensor  # noqa: E402


def e2m1_value(code: int) -> float:
    """The OCP definition: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0."""
    sign = -1.0 if code & 0x8 else 1.0
    e, m = (code >> 1) & 0x3, code & 0x1
    return sign * (m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m * 0.5))


def e2m1_round(x: float) -> int:
    """Nearest code, ties to the even mantissa, saturating at 6, NaN/inf to +-6."""
    sign = 0x8 if math.copysign(1.0, x) < 0 else 0
    mag = 6.0 if not math.isfinite(x) else min(abs(x), 6.0)
    best = min(range(8), key=lambda c: (abs(e2m1_value(c) - mag), c & 1))
    return sign | best


def test_decode_all_sixteen_codes():
    codes = torch.arange(16, dtype=torch.uint8)
    t = MXFP4Tensor(size=16)
    t.data = codes
    got = t.to(torch.float32).numpy()
    want = np.array([e2m1_value(c) for c in range(16)], np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[8])  # 0b1000 is -0.0


def test_encode_random_and_tie_values():
    rng = np.random.default_rng()
    x = np.concatenate([rng.uniform(-8, 8, 997),
                        [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, 7.0, 1e9, -0.0],
                        [np.inf, -np.inf]]).astype(np.float32)
    got = MXFP4Tensor(torch.from_numpy(x)).data.numpy()
    want = np.array([e2m1_round(float(v)) for v in x], np.uint8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, dim", [((6, 7), 1), ((5, 4), 0), ((3, 9, 2), 1)])
def test_pack_unpack_round_trip(shape, dim):
    t = MXFP4Tensor(size=shape).random()
    packed = t.to_packed_tensor(dim)
    assert packed.shape[dim] == (shape[dim] + 1) // 2
    codes = t.data.numpy()
    pk = np.moveaxis(packed.numpy(), dim, -1)
    src = np.moveaxis(codes, dim, -1)
    np.testing.assert_array_equal(pk & 0xF, src[..., 0::2])
    high = src[..., 1::2]
    np.testing.assert_array_equal(pk[..., :high.shape[-1]] >> 4, high)
    back = t.unpack_packed_tensor(packed, dim, shape)
    np.testing.assert_array_equal(back.numpy(), codes)


def test_random_covers_all_codes():
    data = MXFP4Tensor(size=(4096,)).random().data.numpy()
    assert set(np.unique(data)) == set(range(16))


def test_scales_encode_decode():
    rng = np.random.default_rng()
    x = np.concatenate([2.0 ** rng.uniform(-140, 127, 500), [0.0, -1.0, np.nan, np.inf, 1.0, 3.0]])
    x = x.astype(np.float32)
    s = MXScaleTensor(torch.from_numpy(x))
    want = []
    for v in x.astype(np.float64):
        if not np.isfinite(v) or v <= 0:
            want.append(255)
        else:
            want.append(int(min(max(math.floor(math.log2(v)) + 127, 0), 254)))
    np.testing.assert_array_equal(s.data.numpy(), np.array(want, np.uint8))
    decoded = s.to(torch.float32).numpy()
    finite = s.data.numpy() != 255
    exponents = s.data.numpy()[finite].astype(np.float64) - 127
    np.testing.assert_array_equal(decoded[finite], np.exp2(exponents).astype(np.float32))
    assert np.isnan(decoded[~finite]).all()


def test_scale_random_range():
    s = MXScaleTensor(size=(2000,)).random(low=0.25, high=64.0)
    assert s.data.min().item() >= 125 and s.data.max().item() <= 133
    with pytest.raises(AssertionError):
        MXScaleTensor(size=3).random(low=8.0, high=2.0)


def test_needs_data_or_size():
    with pytest.raises(ValueError):
        MXFP4Tensor()
    with pytest.raises(ValueError):
        MXScaleTensor()
