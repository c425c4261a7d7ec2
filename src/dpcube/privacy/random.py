"""Sources of randomness for the samplers.

Every sampler draws from a :class:`RandomSource`, which yields uniform 64-bit words and exact
uniform integers on ``[0, high)``. Three kinds:

- :class:`SystemRandomSource` (the default, ``random_state=None``): AES-256 in counter mode keyed
  with 32 bytes of OS entropy (``os.urandom``), through OpenSSL (the ``cryptography`` package). This
  is the CTR-DRBG construction: a cryptographically secure stream, far faster than reading the
  kernel's entropy for every word.
- :class:`SeededRandomSource` (``random_state=<int>`` or a numpy ``Generator``): numpy's PCG64.
  Reproducible, hence *not for publication*; a release made with it is marked ``seeded``.
- :data:`NO_NOISE`: samplers return zeros. For tests of exactness only; a release made with it is
  marked ``noiseless`` and is not private.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import ArrayLike, NDArray

_WORD = np.dtype("<u8")


class RandomSource(ABC):
    """Uniform 64-bit words, and exact uniform integers derived from them."""

    #: True when the stream is reproducible from a seed (not for publication).
    seeded: bool = False
    #: True when samplers must return zeros (noise switched off; not private).
    noiseless: bool = False

    @abstractmethod
    def words(self, n: int) -> NDArray[np.uint64]:
        """``n`` independent uniform 64-bit words."""

    def integers(self, high: ArrayLike) -> NDArray[np.int64]:
        """Exact uniform integers on ``[0, high)`` (elementwise; ``1 <= high < 2**63``).

        Below 2**32 this is Lemire's multiply-shift method (2019) on 32-bit words: with
        ``m = x * high``, ``m >> 32`` is exactly uniform once the words whose low half falls below
        ``2**32 mod high`` are rejected. Above, plain rejection on 64-bit words: a word is kept
        when ``x >= 2**64 mod high`` (the kept words are a multiple of ``high`` in number) and
        ``x mod high`` is returned. Each round keeps a word with probability above 1/2.
        """
        h = np.asarray(high, dtype=np.int64)
        if h.size and (h.min() < 1):
            raise ValueError("integers(high) needs high >= 1")
        hu = h.astype(np.uint64).ravel()
        out = np.empty(hu.shape, dtype=np.uint64)
        todo = np.arange(hu.size)
        if hu.size and int(hu.max()) < 2**32:
            while todo.size:
                hh = hu[todo]
                m = self.words32(todo.size).astype(np.uint64) * hh
                low = m & np.uint64(0xFFFFFFFF)
                ok = np.ones(todo.size, dtype=bool)
                near = np.flatnonzero(low < hh)
                if near.size:
                    hn = hh[near]
                    ok[near] = low[near] >= (np.uint64(2**32) - hn) % hn
                out[todo[ok]] = m[ok] >> np.uint64(32)
                todo = todo[~ok]
        else:
            reject_below = (np.uint64(0) - hu) % hu
            while todo.size:
                x = self.words(todo.size)
                ok = x >= reject_below[todo]
                out[todo[ok]] = x[ok] % hu[todo[ok]]
                todo = todo[~ok]
        return out.astype(np.int64).reshape(h.shape)

    def words32(self, n: int) -> NDArray[np.uint32]:
        """``n`` independent uniform 32-bit words."""
        return self.words((n + 1) // 2).view(np.uint32)[:n]

    def coins(self, n: int) -> NDArray[np.bool_]:
        """``n`` fair coins (64 per word)."""
        words = self.words((n + 63) // 64)
        bits = np.unpackbits(words.view(np.uint8), count=n)
        return bits.view(np.bool_)


class SystemRandomSource(RandomSource):
    """AES-256-CTR keystream keyed from ``os.urandom`` (cryptographically secure)."""

    #: Words encrypted per call to OpenSSL (the keystream is the encryption of zeros).
    _CHUNK_WORDS = 2**16

    def __init__(self) -> None:
        key = os.urandom(32)
        nonce = os.urandom(16)
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
        self._zeros = bytes(8 * self._CHUNK_WORDS)

    def words(self, n: int) -> NDArray[np.uint64]:
        # ``update_into`` writes the keystream straight into the result (no intermediate bytes);
        # it wants 15 spare bytes (one AES block) after the output.
        buf = np.empty(8 * n + 16, dtype=np.uint8)
        view = buf.data
        for start in range(0, n, self._CHUNK_WORDS):
            stop = min(n, start + self._CHUNK_WORDS)
            self._encryptor.update_into(self._zeros[: 8 * (stop - start)], view[8 * start :])
        return buf[: 8 * n].view(_WORD).astype(np.uint64, copy=False)


class SeededRandomSource(RandomSource):
    """numpy PCG64 from a seed: reproducible, so releases made with it are not for publication."""

    seeded = True

    def __init__(self, seed: int | np.random.SeedSequence | np.random.Generator) -> None:
        if isinstance(seed, np.random.Generator):
            self._bits = seed.bit_generator
        else:
            self._bits = np.random.PCG64(seed)

    def words(self, n: int) -> NDArray[np.uint64]:
        return np.asarray(self._bits.random_raw(n), dtype=np.uint64)


class _NoNoise(RandomSource):
    noiseless = True
    seeded = True

    def words(self, n: int) -> NDArray[np.uint64]:
        raise RuntimeError("the NO_NOISE source draws no random words")

    def __repr__(self) -> str:
        return "NO_NOISE"


#: Pass as ``random_state`` to switch noise off (tests of exactness only; not private).
NO_NOISE: RandomSource = _NoNoise()


def resolve_random_state(random_state: Any) -> RandomSource:
    """``None`` -> OS entropy; an int, SeedSequence or numpy Generator -> seeded; a source -> itself."""
    if random_state is None:
        return SystemRandomSource()
    if isinstance(random_state, RandomSource):
        return random_state
    if isinstance(random_state, bool):
        raise TypeError(
            "random_state must be None, an int seed, a numpy Generator or a RandomSource"
        )
    if isinstance(random_state, int | np.integer | np.random.SeedSequence | np.random.Generator):
        return SeededRandomSource(
            random_state if not isinstance(random_state, np.integer) else int(random_state)
        )
    raise TypeError("random_state must be None, an int seed, a numpy Generator or a RandomSource")
