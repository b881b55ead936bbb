"""Counter-based random numbers that work in numba kernels, in the simulator and in torch.

A draw is a pure function of ``(key, counter, lane)``: no generator object, no
hidden state. The counter lives in device memory and is advanced on the device
(by the kernel that consumes a draw, or by an in-place ``add_``), so replaying
a captured CUDA graph gives new draws each time while the host never touches a
changing Python scalar.

The mixer is Wellons' "lowbias32" 32-bit integer hash. Every intermediate is
kept below 2**63 (32-bit words, multiplications split into 16-bit halves), so
the same source gives the same bits on int64 numba scalars, on numpy scalars in
the simulator, and on int64 torch tensors, with no overflow anywhere.
"""

from __future__ import annotations

from foxhunt.kernels.dual import device_function

__all__ = ["MASK32", "mul32", "mix32", "hash3", "uniform01", "TWO_POW_MINUS_24"]

MASK32 = 0xFFFFFFFF
_LOW16 = 0xFFFF
_GOLDEN = 0x9E3779B9  # breaks mix32's fixed point at zero
TWO_POW_MINUS_24 = 1.0 / 16777216.0


@device_function
def mul32(a, b):
    """``a * b mod 2**32`` for 32-bit words, without any product reaching 2**63."""
    low = a * (b & _LOW16)
    high = ((a * (b >> 16)) & _LOW16) << 16
    return (low + high) & MASK32


@device_function
def mix32(x):
    """Bijective avalanche hash of a 32-bit word (lowbias32)."""
    x = x & MASK32
    x = x ^ (x >> 16)
    x = mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


@device_function
def hash3(key, counter, lane):
    """A 32-bit word from (key, counter, lane); any one changing gives an unrelated word."""
    h = mix32((key + _GOLDEN) & MASK32)
    h = mix32(h ^ (counter & MASK32))
    h = mix32(h ^ ((counter >> 32) & MASK32))
    return mix32(h ^ (lane & MASK32))


@device_function
def uniform01(word):
    """A uniform float in [0, 1) from the top 24 bits of a 32-bit word (exact in float32)."""
    return (word >> 8) * TWO_POW_MINUS_24
