"""triton.runtime's RemoteCacheBackend / RedisRemoteCacheBackend / TensorWrapper /
reinterpret and triton.testing's device helpers (get_dram_gbps, get_max_tensorcore_tflops,
get_max_simd_tflops, nvsmi, set_gpu_clock, cuda_memcheck), as Triton 3.6 has them."""
import numpy as np
import pytest

import tessera
import tessera.language as tl
from tessera import runtime, testing
from tessera.config import knobs
from tessera.runtime import remote_cache
from tessera.runtime.kernel_cache import KernelCache


class DictBackend(runtime.RemoteCacheBackend):
    store: dict = {}
    calls: list = []

    def __init__(self, key):
        super().__init__(key)

    def get(self, filenames):
        self.calls.append(("get", tuple(filenames)))
        return {f: self.store[self.key, f] for f in filenames if (self.key, f) in self.store}

    def put(self, filename, data):
        self.calls.append(("put", filename))
        self.store[self.key, filename] = data


class FailingBackend(runtime.RemoteCacheBackend):
    def get(self, filenames):
        raise ConnectionError("store down")

    def put(self, filename, data):
        raise ConnectionError("store down")


@pytest.fixture
def backend():
    DictBackend.store, DictBackend.calls = {}, []
    remote_cache.set_backend(DictBackend)
    yield DictBackend
    remote_cache.set_backend(None)


KEY = "ab" * 16


def test_remote_cache_round_trip(tmp_path, backend):
    files = {"kernel.ptx": np.random.default_rng().bytes(100), "metadata.json": b"{}"}
    KernelCache(str(tmp_path / "a")).put(KEY, files)
    assert backend.calls[-1] == ("put", "__entry__.json")  # the manifest goes last
    other = KernelCache(str(tmp_path / "b"))                # another machine's empty disk
    assert other.get(KEY) == files
    backend.calls.clear()
    assert other.get(KEY) == files and backend.calls == []  # now kept on its disk


def test_remote_cache_rejects_corrupted_and_partial_entries(tmp_path, backend):
    files = {"kernel.ptx": b"x" * 50}
    KernelCache(str(tmp_path / "a")).put(KEY, files)
    backend.store[KEY, "kernel.ptx"] = b"y" * 50
    assert KernelCache(str(tmp_path / "b")).get(KEY) is None
    del backend.store[KEY, "kernel.ptx"]
    assert KernelCache(str(tmp_path / "c")).get(KEY) is None


def test_failing_backend_warns_and_the_disk_cache_goes_on(tmp_path):
    remote_cache.set_backend(FailingBackend)
    try:
        cache = KernelCache(str(tmp_path))
        with pytest.warns(RuntimeWarning, match="FailingBackend failed"):
            cache.put(KEY, {"a.bin": b"1"})
        assert cache.get(KEY) == {"a.bin": b"1"}
    finally:
        remote_cache.set_backend(None)


def test_backend_from_the_knob(monkeypatch):
    monkeypatch.setenv("TESSERA_REMOTE_CACHE_BACKEND", f"{__name__}:DictBackend")
    assert remote_cache.backend_class() is DictBackend
    monkeypatch.setenv("TESSERA_REMOTE_CACHE_BACKEND", "no_such_module:X")
    with pytest.raises(RuntimeError, match="module:Class"):
        remote_cache.backend_class()


def test_redis_backend_needs_redis():
    try:
        import redis  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="pip install redis"):
            runtime.RedisRemoteCacheBackend(KEY)
    else:
        backend = runtime.RedisRemoteCacheBackend(KEY)
        assert backend._redis_key("f") == knobs.redis_key_format.format(key=KEY, filename="f")


@tessera.jit(interpret=True)
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) * 2.0, mask=mask)


def test_runtime_tensor_wrapper_and_reinterpret():
    rng = np.random.default_rng()
    n = int(rng.integers(100, 500))
    bits = rng.standard_normal(n).astype(np.float32).view(np.int32)
    wrapped = runtime.reinterpret(bits, tl.float32)
    assert isinstance(wrapped, runtime.TensorWrapper) and runtime.reinterpret is tessera.reinterpret
    out = np.zeros(n, np.float32)
    _copy[(tessera.cdiv(n, 128),)](wrapped, out, n, BLOCK=128)
    np.testing.assert_array_equal(out, bits.view(np.float32) * 2)
    clone = wrapped.clone()
    assert clone.dtype == tl.float32 and clone.base is not bits
    clone.copy_(runtime.reinterpret(np.zeros(n, np.int32), tl.float32))
    assert not clone.base.any() and bits.any()
    assert runtime.reinterpret(wrapped, wrapped.base.dtype) is bits


def test_dram_and_peak_flops_from_device_properties():
    from tessera.runtime.driver import active
    with knobs.scope(interpret=True):  # no GPU here: the interpreter's modeled device
        props = active.utils.get_device_properties(0)
        capability = active.get_current_target().arch
        gbps = testing.get_dram_gbps()
        clock = float(np.random.default_rng().integers(1_000_000, 2_000_000))
        tensor = {d: testing.get_max_tensorcore_tflops(d, clock)
                  for d in (tl.float16, tl.int8, np.float32, tl.float8e4nv)}
        simd = testing.get_max_simd_tflops(np.float32, clock)
        with pytest.raises(RuntimeError, match="dtype not supported"):
            testing.get_max_simd_tflops(tl.int8, clock)
    assert gbps == pytest.approx(props["mem_clock_rate"] * 1e3 * props["mem_bus_width"] / 8
                                 * 2 / 1e9)
    sub_cores = props["multiprocessor_count"] * 4
    assert capability >= 80
    expected = {tl.float16: 512, tl.int8: 1024, np.float32: 256, tl.float8e4nv: 1024}
    for dtype, ops in expected.items():
        assert tensor[dtype] == pytest.approx(sub_cores * clock * 1e3 * ops / 1e12)
    assert simd == pytest.approx(sub_cores * clock * 1e3 * 32 / 1e12)


def test_nvidia_smi_tools_say_when_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="nvidia-smi"):
        testing.nvsmi(["clocks.max.sm"])
    with pytest.raises(RuntimeError, match="nvidia-smi"):
        with testing.set_gpu_clock():
            pass


def test_nvsmi_parses_nvidia_smi(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '1980, 2619'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert testing.nvsmi(["clocks.max.sm", "clocks.max.mem"]) == [1980, 2619]


def test_cuda_memcheck(monkeypatch, tmp_path):
    ran = []

    @testing.cuda_memcheck(dtype="fp16")
    def case(request=None, dtype=None):
        ran.append(dtype)

    case(request=None, dtype="fp32")  # not selected: runs as is
    assert ran == ["fp32"]
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="compute-sanitizer"):
        case(request=None, dtype="fp16")
