"""Triton's counter-based random numbers (`tl.rand` and family), bit for bit, in NumPy.

Philox 4x32-10 as `triton/language/random.py` computes it (the same in Triton 3.6 and 3.9): the
counter is (offset's low 32 bits, its high 32 bits for 64-bit offsets else 0, 0, 0), the key
(the seed's low and high 32 bits, the seed sign-extended to 64 bits first), ten rounds in uint32
arithmetic. A uint32 becomes a float in [0, 1) as `uint_to_uniform_float` does, and normals come
from Box-Muller on the first two words, in float32 throughout.

These functions run on the host (`td.philox.rand(seed, np.arange(n))` is what `td.rand(seed,
t.index)` gives inside a kernel, on every backend), and they are the NumPy backend's rules of
the `rand` ops. `randint` gives int32 holding the bits of Triton's uint32 (`.view(np.uint32)`
reads them as Triton does).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

from tiledsl.errors import ArgumentError

N_ROUNDS = 10
_ROUND_A, _ROUND_B = np.uint32(0xD2511F53), np.uint32(0xCD9E8D57)
_KEY_A, _KEY_B = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_SCALE = np.float32(4.6566127342e-10)  # the largest s with (2**31 - 1) * s < 1 in float32
_TWO_PI = np.float32(6.283185307179586)
_TINY = np.float32(1.0e-7)  # Box-Muller's lower bound on its first uniform (log(0) is -inf)

Words = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _umulhi(a: np.uint32, b: np.ndarray) -> np.ndarray:
    return ((np.uint64(a) * b.astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


def key(seed: Any) -> tuple[np.ndarray, np.ndarray]:
    """The key words of a seed: its low and high 32 bits once it is an int64 (Triton casts a
    seed to uint64, sign-extending a signed one)."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        if not -2**63 <= int(seed) < 2**64:
            raise ArgumentError(f"td.philox: a seed is a 64-bit integer, got {seed}")
        s = np.asarray(int(seed) % 2**64, dtype=np.uint64)
    else:
        s = np.asarray(seed)
        if s.dtype.kind not in "iu":
            raise ArgumentError(f"td.philox: a seed is an integer, got {s.dtype}")
        s = s.astype(np.int64 if s.dtype.kind == "i" else np.uint64).view(np.uint64)
    return (s & np.uint64(0xFFFFFFFF)).astype(np.uint32), (s >> np.uint64(32)).astype(np.uint32)


def rounds(k0: Any, k1: Any, c0: np.ndarray, c1: np.ndarray, c2: np.ndarray, c3: np.ndarray,
           n_rounds: int = N_ROUNDS) -> Words:
    """`n_rounds` rounds of Philox on the uint32 counter (c0, c1, c2, c3) and key (k0, k1), as
    Triton's `philox_impl`; the four words broadcast to one shape."""
    with np.errstate(over="ignore"):
        for _ in range(n_rounds):
            c0, c1, c2, c3 = (_umulhi(_ROUND_B, c2) ^ c1 ^ k0, _ROUND_B * c2,
                              _umulhi(_ROUND_A, c0) ^ c3 ^ k1, _ROUND_A * c0)
            k0, k1 = k0 + _KEY_A, k1 + _KEY_B
    shape = np.broadcast_shapes(*(np.shape(c) for c in (c0, c1, c2, c3, k0)))
    c0, c1, c2, c3 = (np.ascontiguousarray(np.broadcast_to(c, shape)) for c in (c0, c1, c2, c3))
    return c0, c1, c2, c3


def words(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> Words:
    """Four blocks of random uint32, as `tl.randint4x(seed, offsets)`: offsets of any integer
    dtype (64-bit ones feed their high word into the counter; narrower ones are sign-extended
    to 32 bits, as Triton casts them)."""
    o = np.asarray(offsets)
    if o.dtype.kind not in "iu":
        raise ArgumentError(f"td.philox: offsets are integers, got {o.dtype}",
                            hint="number the draws with integers, e.g. np.arange(n)")
    c0 = o.astype(np.uint32)  # modular, as Triton's cast to uint32
    c1 = (o >> 32).astype(np.uint32) if o.dtype.itemsize == 8 else np.zeros_like(c0)
    zero = np.zeros_like(c0)
    return rounds(*key(seed), c0, c1, zero, zero, n_rounds)


def _counter(c: Any, i: int) -> np.ndarray:
    """A counter word as Triton's `philox` takes it: its low 32 bits as uint32 (a Python int
    in int32's or uint32's range; see tiledsl.lang.random.philox_words for wider ints)."""
    if isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)):
        if not -2**31 <= int(c) < 2**32:
            raise ArgumentError(f"td.philox: counter c{i} = {c} is not a 32-bit integer")
        return np.asarray(int(c) % 2**32, dtype=np.uint32)
    a = np.asarray(c)
    if a.dtype.kind not in "iu":
        raise ArgumentError(f"td.philox: counter c{i} must be integers, got {a.dtype}",
                            hint="cast it: c.astype(np.uint32)")
    return a.view(np.uint32) if a.dtype.itemsize == 4 else a.astype(np.uint32)


def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any,
           n_rounds: int = N_ROUNDS) -> Words:
    """Triton's `tl.philox(seed, c0, c1, c2, c3, n_rounds)` on the host: the four uint32 words
    of Philox 4x32 keyed by the seed, at the counters (c0, c1, c2, c3; their low 32 bits),
    which broadcast.
    Inside a kernel, `td.philox(...)` draws the same words on every backend."""
    if not isinstance(n_rounds, (int, np.integer)) or n_rounds < 0:
        raise ArgumentError(f"td.philox: n_rounds is a non-negative int, got {n_rounds!r}")
    cs = [_counter(c, i) for i, c in enumerate((c0, c1, c2, c3))]
    return rounds(*key(seed), *cs, int(n_rounds))


def uniform(x: np.ndarray) -> np.ndarray:
    """uint32 to float32 in [0, 1), as Triton's `uint_to_uniform_float`: the bits as an int32,
    folded onto [0, 2**31) with `~`, times a scale."""
    i = np.ascontiguousarray(x).view(np.int32)
    i = np.where(i < 0, ~i, i)
    return i.astype(np.float32) * _SCALE


def normal(u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two float32 normals from two uniforms (Box-Muller, as Triton's `pair_uniform_to_normal`).
    Each step is one float32 NumPy ufunc on a contiguous array, as the Triton interpreter
    computes it, so the two agree bit for bit."""
    u1 = np.maximum(_TINY, u1)
    th = _TWO_PI * u2
    r = np.sqrt(np.float32(-2.0) * np.log(u1))
    return r * np.cos(th), r * np.sin(th)


def randint(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> np.ndarray:
    """`tl.randint(seed, offsets)`: the first word, as int32 with Triton's uint32 bits."""
    return words(seed, offsets, n_rounds)[0].view(np.int32)


def rand(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> np.ndarray:
    """`tl.rand(seed, offsets)`: float32 uniform in [0, 1)."""
    return uniform(words(seed, offsets, n_rounds)[0])


def randn(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> np.ndarray:
    """`tl.randn(seed, offsets)`: float32 standard normal, from the first two words."""
    w = words(seed, offsets, n_rounds)
    return normal(uniform(w[0]), uniform(w[1]))[0]


def rand4x(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> tuple[np.ndarray, ...]:
    """`tl.rand4x(seed, offsets)`: four float32 uniforms."""
    return tuple(uniform(w) for w in words(seed, offsets, n_rounds))


def randn4x(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> tuple[np.ndarray, ...]:
    """`tl.randn4x(seed, offsets)`: four float32 normals, two from each pair of words."""
    u = rand4x(seed, offsets, n_rounds)
    return normal(u[0], u[1]) + normal(u[2], u[3])


def randint4x(seed: Any, offsets: Any, n_rounds: int = N_ROUNDS) -> tuple[np.ndarray, ...]:
    """`tl.randint4x(seed, offsets)`: the four words, as int32 (see `randint`)."""
    return tuple(w.view(np.int32) for w in words(seed, offsets, n_rounds))


class _Module(ModuleType):
    """`td.philox` is this module (the host functions: `td.philox.rand(seed, offsets)`) and,
    called, Triton's `tl.philox`: inside a kernel it traces (tiledsl/lang/random.py), on the
    host it computes the words with NumPy."""

    def __call__(self, seed: Any, c0: Any, c1: Any, c2: Any, c3: Any,
                 n_rounds: int = N_ROUNDS) -> Any:
        from tiledsl.frontend.tracer import active
        if active() is not None:
            from tiledsl.lang.random import philox_words
            return philox_words(seed, c0, c1, c2, c3, n_rounds)
        return philox(seed, c0, c1, c2, c3, n_rounds)


sys.modules[__name__].__class__ = _Module
