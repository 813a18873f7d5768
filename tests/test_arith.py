"""Prime factors and divisors for sizes up to 2**62 (model/arith.py), against brute force."""

import itertools
import math

from hypothesis import given, settings, strategies as st

from tcplan.model.arith import divisors, factorize, is_prime


def brute_divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 20_000))
def test_divisors_equal_brute_force(n):
    assert divisors(n) == brute_divisors(n)
    cap = max(1, n // 3)
    assert divisors(n, up_to=cap) == [d for d in brute_divisors(n) if d <= cap]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2 ** 62))
def test_factorization_multiplies_back_to_n_with_primes(n):
    fs = factorize(n)
    assert math.prod(p ** e for p, e in fs) == n
    assert [p for p, _ in fs] == sorted({p for p, _ in fs})
    assert all(is_prime(p) and e >= 1 for p, e in fs)


def test_primality_on_known_numbers():
    primes = [2, 3, 5, 97, 7919, 2 ** 31 - 1, 2 ** 61 - 1, 1_000_000_007]
    composites = [1, 4, 561, 1105, 3215031751, 2 ** 32 + 1, (2 ** 31 - 1) * (2 ** 61 - 1),
                  3_825_123_056_546_413_051]  # Carmichael numbers and strong pseudoprimes
    assert all(is_prime(p) for p in primes)
    assert not any(is_prime(c) for c in composites)


def test_hard_sizes_factor_fast():
    """A prime near 2**61, a product of two 31-bit primes, 2**62, 3**39: each factors at once
    (range(2, n) would never end)."""
    cases = {2 ** 61 - 1: ((2 ** 61 - 1, 1),),
             (2 ** 31 - 1) * 2147483629: ((2147483629, 1), (2 ** 31 - 1, 1)),
             2 ** 62: ((2, 62),), 3 ** 39: ((3, 39),)}
    for n, want in cases.items():
        assert factorize(n) == want
        assert divisors(n) == sorted({math.prod(p ** k for (p, _), k in zip(want, ks))
                                      for ks in itertools.product(
                                          *[range(e + 1) for _, e in want])})
