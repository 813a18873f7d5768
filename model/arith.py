"""Integer arithmetic for sizes up to 2**62: prime factors and divisors.

Sizes come from problem files, so they can be as large as the mapping grammar allows
(:data:`model.mapping.MAX_SIZE`).  Enumerating divisors by trying every candidate below ``n``
hangs on such sizes; :func:`divisors` builds them from the prime factorization instead
(trial division by small primes, then Miller-Rabin and Pollard's rho), which takes
milliseconds for any 64-bit ``n``.
"""

from __future__ import annotations

import math
from functools import lru_cache

_SMALL_PRIMES = [p for p in range(2, 1000) if all(p % q for q in range(2, int(p ** 0.5) + 1))]
#: Miller-Rabin with these bases is exact for every n < 3.3 * 10**24 (Sorenson and Webster).
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def is_prime(n: int) -> bool:
    """Deterministic primality for n < 3.3 * 10**24."""
    if n < 2:
        return False
    for p in _SMALL_PRIMES[:13]:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the composite odd ``n`` (Pollard's rho, Brent's cycle)."""
    for c in range(1, n):
        y, m, g, r, q = 2, 128, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise ArithmeticError(f"no factor of {n}")  # pragma: no cover - n is composite


@lru_cache(maxsize=4096)
def factorize(n: int) -> tuple[tuple[int, int], ...]:
    """The prime factorization of ``n >= 1``: ((prime, exponent), ...), primes ascending."""
    if n < 1:
        raise ValueError(f"factorize({n})")
    found: dict[int, int] = {}
    for p in _SMALL_PRIMES:
        while n % p == 0:
            found[p] = found.get(p, 0) + 1
            n //= p
    todo = [n] if n > 1 else []
    while todo:
        m = todo.pop()
        if is_prime(m):
            found[m] = found.get(m, 0) + 1
        else:
            d = _rho(m)
            todo += [d, m // d]
    return tuple(sorted(found.items()))


def divisors(n: int, up_to: int | None = None) -> list[int]:
    """Every divisor of ``n >= 1`` (at most ``up_to`` when given), ascending."""
    limit = n if up_to is None else min(n, up_to)
    out = [1]
    for p, e in factorize(n):
        out = [d * p ** k for d in out for k in range(e + 1) if d * p ** k <= limit]
    return sorted(out)


def round_up(n: int, align: int) -> int:
    """The least multiple of ``align`` at or above ``n``."""
    return -(-n // align) * align
