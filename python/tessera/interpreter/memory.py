"""A virtual global address space over the buffers a kernel can see (the interpreter's memory).

Each pointer argument gets a region 2**40 bytes apart, so a pointer value is an int64 that
addptr can move freely and every load/store can tell which buffer (if any) it lands in: a
pointer that runs off its buffer faults even where another buffer follows it in host memory.
The low 12 bits of a buffer's real address are kept, so alignment is what it is on the host.
Buffers are byte views of the caller's memory: stores land in the caller's arrays in place.

Virtual addresses start at 2**57, above every user-space host address (x86-64 and AArch64
keep those below 2**56 even with 5-level page tables), so an int64 is unambiguously either.
Integers are host addresses, as on the GPU: ptrtoint (and storing a pointer to memory) gives
the real address (what ``data_ptr()`` gives); inttoptr (and loading a pointer) maps a host
address inside a buffer back into that buffer's region. A host address inside no argument is
looked up among the live NumPy arrays and CPU tensors (host_buffers.py: the tensors whose
addresses a grouped GEMM passes in an int64 tensor); one inside none stays unmapped and any
access through it faults, naming the address.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .host_buffers import Finder, byte_extent, lookup

_REGION_SHIFT = 40
_FIRST_REGION = 1 << 17  # region numbers below this (host addresses, null) hold no buffer
VIRTUAL_BASE = _FIRST_REGION << _REGION_SHIFT  # 2**57
_LOWEST_HOST = 4096  # smaller integers (null, sizes, indices) are never taken for addresses


class AccessError(Exception):
    """A load or store outside every buffer, misaligned, or into a read-only buffer."""


class _RawBytes:
    """Exposes [address, address + size) of an owner's memory to NumPy as uint8."""

    def __init__(self, owner, address: int, size: int, readonly: bool) -> None:
        self.owner = owner  # keeps the memory alive as long as the view
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1",
                                    "data": (address, readonly), "version": 3}


@dataclass
class Buffer:
    arg_index: Optional[int]  # None: a host array found through a pointer read from memory
    name: str                 # "argument #0" or "argument 'x_ptr' (#0)", for messages
    description: str          # e.g. "float32 array of shape (1000,)"
    data: np.ndarray          # uint8, the whole extent the array's elements span
    base: int                 # virtual address of data[0]
    pointer: int              # virtual address of the array's first element (the argument)
    writable: bool
    host: int                 # host address of data[0]
    # For a strided view with gaps (a[:, ::2], a[:, :n]): which bytes of the extent belong to
    # its elements. The gaps are other data (not this argument's): touching one is an error.
    element_bytes: Optional[np.ndarray] = None
    typed: Dict[np.dtype, tuple] = field(default_factory=dict)

    def typed_view(self, dtype: np.dtype):
        """(first aligned byte offset, data viewed as dtype from there)."""
        view = self.typed.get(dtype)
        if view is None:
            skip = (-self.base) % dtype.itemsize
            count = (self.data.size - skip) // dtype.itemsize
            view = (skip, self.data[skip:skip + count * dtype.itemsize].view(dtype))
            self.typed[dtype] = view
        return view


def _is_dense(array: np.ndarray) -> bool:
    """Whether the elements tile their extent exactly: contiguous in some dimension order
    (C, Fortran, a transpose, negative strides), with no gaps and no overlap."""
    expected = array.itemsize
    for stride, extent in sorted((abs(s), n) for s, n in zip(array.strides, array.shape)
                                 if n > 1):
        if stride != expected:
            return False
        expected *= extent
    return True


def _element_bytes(array: np.ndarray, low: int, size: int) -> Optional[np.ndarray]:
    """None for a dense array; else a mask over the extent's bytes, True where an element
    lies (overlapping views such as np.broadcast_to's are masks too)."""
    if array.size == 0 or _is_dense(array):
        return None
    offsets = np.zeros((), np.int64)
    for extent, stride in zip(array.shape, array.strides):
        offsets = np.add.outer(offsets, np.arange(extent, dtype=np.int64) * stride)
    starts = offsets.reshape(-1) + (array.__array_interface__["data"][0] - low)
    mask = np.zeros(size, bool)
    for byte in range(array.itemsize):
        mask[starts + byte] = True
    return mask


class AddressSpace:
    """The buffers a launch can see, mapped to virtual addresses; loads and stores by address
    tensors; translation between virtual pointers and the host addresses integers hold."""

    def __init__(self) -> None:
        self.buffers: List[Buffer] = []
        self._by_extent: Dict[tuple, Buffer] = {}
        self._finder: Optional[Finder] = None  # made on the first address no buffer explains

    def add(self, array: np.ndarray, arg_index: Optional[int], name: str = "") -> int:
        """Maps an argument's memory; returns the pointer value the kernel receives."""
        start = array.__array_interface__["data"][0]
        low, size = byte_extent(array)
        known = self._by_extent.get((low, size))  # the same array passed twice: same pointer
        if known is None:
            writable = bool(array.flags.writeable)
            description = f"{array.dtype} array of shape {tuple(array.shape)}"
            gaps = _element_bytes(array, low, size)
            if gaps is not None:
                description += f" and strides {tuple(array.strides)} (a view with gaps)"
            known = self._map(array, low, size, writable, arg_index,
                              name or f"argument #{arg_index}", description, gaps)
            known.pointer = known.base + start - low
        return known.base + (start - low)

    def _map(self, owner, low: int, size: int, writable: bool, arg_index: Optional[int],
             name: str, description: str, gaps: Optional[np.ndarray] = None) -> Buffer:
        region = _FIRST_REGION + len(self.buffers)
        base = (region << _REGION_SHIFT) + low % 4096
        data = np.asarray(_RawBytes(owner, low, size, not writable))
        buffer = Buffer(arg_index, name, description, data, base, base, writable, low, gaps)
        self.buffers.append(buffer)
        self._by_extent[(low, size)] = buffer
        return buffer

    # -- pointers <-> integers -----------------------------------------------------------------

    def to_host(self, pointers) -> np.ndarray:
        """ptrtoint: the host address each pointer stands for (its buffer's real address plus
        the same byte offset, past the end too, as pointer arithmetic may go); values outside
        every region (null, unmapped host addresses) are already what they are."""
        values = np.asarray(pointers, np.int64)
        regions = (values >> _REGION_SHIFT) - _FIRST_REGION
        mapped = (regions >= 0) & (regions < len(self.buffers))
        if not np.any(mapped):
            return values
        shift = np.array([b.host - b.base for b in self.buffers], np.int64)
        return np.where(mapped, values + shift[np.where(mapped, regions, 0)], values)

    def to_virtual(self, integers) -> np.ndarray:
        """inttoptr: each host address inside a buffer the launch can see becomes a pointer into
        that buffer's region; arguments are searched first, then the live host arrays
        (host_buffers.py). Any other value (null, a freed or foreign address) is unchanged:
        it lies in no region, so an access through it faults."""
        values = np.asarray(integers, np.int64)
        host = (values >= _LOWEST_HOST) & (values < VIRTUAL_BASE)
        if not np.any(host):
            return values
        out = np.array(values, np.int64)
        flat = out.reshape(-1)
        where = np.flatnonzero(host.reshape(-1))
        for inside, at_end in ((True, False), (False, True)):  # inside one before past another
            for buffer in self.buffers:
                where = self._into(buffer, flat, where, inside, at_end)
                if where.size == 0:
                    return out
        finder = self._finder = self._finder or Finder()
        while True:  # what earlier searches found, then a wider search while any is unexplained
            table = finder.table()
            index = lookup(table, flat[where])
            for i in np.unique(index[index >= 0]).tolist():
                found = table[i]
                known = self._by_extent.get((found.low, found.size))
                if known is None:  # an argument spanning exactly this memory is that argument
                    known = self._map(found.owner, found.low, found.size, found.writable, None,
                                      f"host memory at {found.low:#x}", found.description +
                                      " (not an argument: reached through an address)")
                where = self._into(known, flat, where, True, True)
            if where.size == 0 or not finder.search_next():
                break
        return out

    @staticmethod
    def _into(buffer: Buffer, flat: np.ndarray, where: np.ndarray, inside: bool, at_end: bool):
        """Moves the host addresses flat[where] that lie inside buffer (an element's byte, not
        a gap of a strided view: that is another array's) or one past its end into its region;
        returns the positions still unexplained."""
        offset = flat[where] - buffer.host
        size = buffer.data.size
        hit = np.zeros(offset.shape, bool)
        if inside:
            hit = (offset >= 0) & (offset < size)
            if buffer.element_bytes is not None:
                hit[hit] = buffer.element_bytes[offset[hit]]
        if at_end:
            hit |= offset == size
        flat[where[hit]] = buffer.base + offset[hit]
        return where[~hit]

    def host_addresses(self, pointers: np.ndarray) -> List[int]:
        """The host addresses pointer values stand for, as unsigned ints (for device_print)."""
        return [v & 0xFFFFFFFFFFFFFFFF for v in self.to_host(pointers).reshape(-1).tolist()]

    # -- access --------------------------------------------------------------------------------

    def load(self, addresses: np.ndarray, mask: Optional[np.ndarray], dtype: np.dtype):
        """Values at the addresses where mask holds (flat, in element order)."""
        flat = addresses.reshape(-1)
        lanes = np.flatnonzero(mask.reshape(-1)) if mask is not None else None
        if lanes is not None:
            flat = flat[lanes]
        out = np.empty(flat.size, dtype)
        for buffer, select, index in self._resolve(flat, lanes, addresses.shape, dtype, "load"):
            out[select] = buffer.typed_view(dtype)[1][index]
        return out, lanes

    def store(self, addresses: np.ndarray, values: np.ndarray, mask: Optional[np.ndarray]):
        """Writes values where mask holds; for repeated addresses the last lane (in row-major
        element order) wins."""
        flat = addresses.reshape(-1)
        vals = values.reshape(-1)
        lanes = None
        if mask is not None:
            lanes = np.flatnonzero(mask.reshape(-1))
            flat, vals = flat[lanes], vals[lanes]
        for buffer, select, index in self._resolve(flat, lanes, addresses.shape, vals.dtype,
                                                   "store"):
            if not buffer.writable:
                raise AccessError(f"store into {buffer.name} "
                                  f"({buffer.description}), which is read-only (a read-only "
                                  "array, or a read-only DLPack export such as a JAX array); "
                                  "pass a writable array")
            chunk = vals if select is Ellipsis else vals[select]
            if index.size > 1 and not np.all(index[1:] > index[:-1]):
                # keep each index's last occurrence: NumPy leaves repeated writes unordered
                reverse_unique, first_in_reverse = np.unique(index[::-1], return_index=True)
                index, chunk = reverse_unique, chunk[index.size - 1 - first_in_reverse]
            buffer.typed_view(vals.dtype)[1][index] = chunk

    def _resolve(self, flat, lanes, shape, dtype: np.dtype, kind: str):
        """Splits addresses by buffer: yields (buffer, selection in flat, element indices),
        after checking bounds and alignment."""
        if flat.size == 0:
            return
        if np.any(flat < VIRTUAL_BASE):  # host addresses that pointer arithmetic led back in
            flat = self.to_virtual(flat)
        regions = (flat >> _REGION_SHIFT) - _FIRST_REGION
        first = int(regions[0])
        if np.all(regions == first):
            groups = [(first, Ellipsis)]
        else:
            groups = [(int(r), np.flatnonzero(regions == r)) for r in np.unique(regions)]
        for region, select in groups:
            addrs = flat[select]
            if not 0 <= region < len(self.buffers):
                raise AccessError(self._describe(kind, dtype, addrs, 0, select, lanes, shape,
                                                 None))
            buffer = self.buffers[region]
            offset = addrs - buffer.base
            size = dtype.itemsize
            bad_mask = (offset < 0) | (offset > buffer.data.size - size) | (addrs % size != 0)
            if np.any(bad_mask):
                bad = int(np.argmax(bad_mask))
                raise AccessError(self._describe(kind, dtype, addrs, bad, select, lanes, shape,
                                                 buffer))
            if buffer.element_bytes is not None:
                inside = np.ones(offset.shape, bool)
                for byte in range(size):
                    inside &= buffer.element_bytes[offset + byte]
                if not np.all(inside):
                    bad = int(np.argmin(inside))
                    raise AccessError(self._describe(kind, dtype, addrs, bad, select, lanes,
                                                     shape, buffer, gap=True))
            skip, _ = buffer.typed_view(dtype)
            yield buffer, select, (offset - skip) // size

    def _describe(self, kind, dtype, addrs, bad, select, lanes, shape, buffer,
                  gap: bool = False) -> str:
        """The message for the first bad address: which lane, which buffer, how far off."""
        position = bad if select is Ellipsis else int(select[bad])
        if lanes is not None:
            position = int(lanes[position])
        address = int(addrs[bad])
        host = int(self.to_host(np.int64(address))) & 0xFFFFFFFFFFFFFFFF
        where = f"{kind} of {dtype} at address {host:#x}"  # as data_ptr() and ptrtoint give
        if shape:
            where += f" (lane {tuple(int(i) for i in np.unravel_index(position, shape))})"
        if buffer is None:
            return (f"{where} does not point into any argument buffer, nor into any live NumPy "
                    "array or CPU tensor the interpreter can find (a null, uninitialised, freed "
                    "or corrupted pointer; docs/limits.md says which arrays it can find)")
        size = dtype.itemsize
        element = (address - buffer.pointer) / size
        element_text = f"{int(element)}" if element == int(element) else f"{element:.2f}"
        span = (f"{buffer.name} ({buffer.description}, {buffer.data.size} bytes "
                f"at {buffer.host:#x})")
        if gap:
            return (f"{where} falls between the elements of {span}: element offset "
                    f"{element_text} is not one of its elements. The kernel addresses it as "
                    "if it were contiguous; pass a contiguous copy (np.ascontiguousarray) or "
                    "pass its strides to the kernel and use them")
        if address % size:
            return f"{where} is not aligned to {size} bytes: element offset {element_text} " \
                   f"from {span}"
        return f"{where} is out of bounds: element offset {element_text} from {span}"
