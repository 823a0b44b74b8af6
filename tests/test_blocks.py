"""Block-pair selection rules (remark after Algorithm ``alg-RSSM``) and user partitions."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2

import rssm
from rssm.blocks import (
    SELECTION_RULES,
    CyclicPairs,
    PairSelector,
    Partition,
    ShuffledPairs,
    UniformPairs,
    make_selector,
)
from rssm.problems import DPCP, L1Procrustes


def _draw(selector: PairSelector, ell: int, k: int, seed: int = 0) -> list[tuple[int, int]]:
    selector.bind(ell, np.random.default_rng(seed))
    return [selector.next_pair() for _ in range(k)]


def _chi_square(pairs: list[tuple[int, int]], ell: int) -> float:
    counts = Counter(pairs)
    obs = np.array([counts[p] for p in combinations(range(ell), 2)], dtype=float)
    expected = len(pairs) / obs.size
    return float(np.sum((obs - expected) ** 2) / expected)


@pytest.mark.parametrize("rule", sorted(SELECTION_RULES))
@pytest.mark.parametrize("ell", [2, 3, 5, 8])
def test_every_rule_visits_every_pair(rule, ell):
    n_pairs = ell * (ell - 1) // 2
    # cyclic and shuffled visit all pairs within one epoch; uniform within 40 epochs
    # (the chance of missing one of <= 28 pairs in 40 * 28 draws is below 1e-15).
    k = n_pairs if rule != "uniform" else 40 * n_pairs
    pairs = _draw(make_selector(rule), ell, k)
    assert set(pairs) == set(combinations(range(ell), 2))
    assert all(isinstance(i, int) and isinstance(j, int) and 0 <= i < j < ell for i, j in pairs)


def test_cyclic_is_lexicographic_and_periodic():
    pairs = _draw(CyclicPairs(), 4, 13)
    lex = list(combinations(range(4), 2))
    assert pairs == lex + lex + lex[:1]


def test_shuffled_is_a_fresh_permutation_each_epoch():
    ell, n_pairs = 6, 15
    pairs = _draw(ShuffledPairs(), ell, 4 * n_pairs, seed=3)
    epochs = [pairs[e * n_pairs : (e + 1) * n_pairs] for e in range(4)]
    for ep in epochs:
        assert sorted(ep) == list(combinations(range(ell), 2))  # each pair once per epoch
    assert len({tuple(ep) for ep in epochs}) == 4  # and the orders differ


@pytest.mark.parametrize("ell", [5, 8])
def test_uniform_sampling_is_uniform_chi_square(ell):
    """Pearson's chi-square over the binom(l, 2) pairs, 1e5 draws, seed 0.

    Under uniformity the statistic is chi-square with binom(l, 2) - 1 degrees of freedom;
    we require it below the 0.999 quantile (27.9 for l = 5, 55.5 for l = 8).
    """
    n_pairs = ell * (ell - 1) // 2
    pairs = _draw(UniformPairs(), ell, 100_000, seed=0)
    stat = _chi_square(pairs, ell)
    assert stat < chi2.ppf(0.999, n_pairs - 1)
    # Each pair's frequency is within 5 standard deviations of 1/binom(l, 2).
    q = 1.0 / n_pairs
    freq = np.array([Counter(pairs)[p] for p in combinations(range(ell), 2)]) / 1e5
    assert np.max(np.abs(freq - q)) < 5 * np.sqrt(q * (1 - q) / 1e5)


def test_chi_square_check_detects_a_biased_rule():
    """The uniformity check above can fail: a rule that favours pair (0, 1) by 5% fails it."""

    class Biased(UniformPairs):
        def next_pair(self):
            if self.rng.random() < 0.05:
                return 0, 1
            return super().next_pair()

    pairs = _draw(Biased(), 5, 100_000, seed=0)
    assert _chi_square(pairs, 5) > chi2.ppf(0.999, 9)


def test_uniform_sequence_depends_only_on_seed():
    a = _draw(UniformPairs(), 6, 3000, seed=42)
    b = _draw(UniformPairs(), 6, 3000, seed=42)
    c = _draw(UniformPairs(), 6, 3000, seed=43)
    assert a == b and a != c


def test_make_selector_by_name_or_object():
    for name, cls in SELECTION_RULES.items():
        sel = make_selector(name)
        assert type(sel) is cls and sel.name == name
    mine = CyclicPairs()
    assert make_selector(mine) is mine
    with pytest.raises(ValueError, match=r"one of \['cyclic', 'shuffled', 'uniform'\]"):
        make_selector("random")
    with pytest.raises(TypeError, match="selection must be one of .*, got 3"):
        make_selector(3)
    with pytest.raises(TypeError, match="got the class UniformPairs itself"):
        make_selector(rssm.blocks.UniformPairs)


@pytest.mark.parametrize("rule", sorted(SELECTION_RULES))
def test_rule_is_recorded_in_result(rule, small_dpcp):
    res = rssm.minimize(
        small_dpcp, method="rssm", max_iter=20, seed=0, options={"n_blocks": 4, "selection": rule}
    )
    assert res.selection == rule
    assert f"({rule})" in repr(res)
    rsm = rssm.minimize(small_dpcp, method="rsm", max_iter=2, seed=0)
    assert rsm.selection is None


def test_custom_selector_object_is_used_and_recorded():
    class Only01(PairSelector):
        name = "only01"

        def next_pair(self):
            return 0, 1

    prob = L1Procrustes.synthetic(m=100, n=10, p=6, seed=1)
    x0 = prob.initial_point()
    part = [[0, 1], [2, 3], [4, 5]]
    res = rssm.minimize(
        prob, x0,
            method="rssm", max_iter=30, seed=0, options={"partition": part, "selection": Only01()}
    )
    assert res.selection == "only01"
    np.testing.assert_array_equal(res.x[:, 4:], x0[:, 4:])  # blocks never drawn: untouched
    assert np.any(res.x[:, :4] != x0[:, :4])


@pytest.mark.parametrize("rule", sorted(SELECTION_RULES))
def test_unequal_user_partition_end_to_end(rule):
    """Blocks of sizes 1, 2, 3 and 4, interleaved, reach the planted solution."""
    prob = L1Procrustes.synthetic(m=200, n=20, p=10, seed=2)
    blocks = [[7], [0, 9], [1, 4, 8], [2, 3, 5, 6]]
    # the problem's hand-set geometric rule ("auto" does not converge with the cyclic
    # order on this instance: docs/stepsizes.md)
    res = rssm.minimize(
        prob, method="rssm", max_iter=3000, seed=3, stepsize=prob.reference_stepsize(),
        options={"partition": blocks, "selection": rule}
    )
    assert res.n_blocks == 4 and res.selection == rule
    assert [b.tolist() for b in res.partition] == blocks
    assert res.error < 1e-10
    assert res.feasibility < 1e-13


def test_unequal_user_partition_dpcp(small_dpcp):
    """DPCP (whose oracle keeps per-block statistics) with blocks of sizes 2, 3, 5, 6."""
    p = small_dpcp.p
    perm = np.random.default_rng(5).permutation(p)
    blocks = [perm[:2], perm[2:5], perm[5:10], perm[10:]]
    part = Partition(blocks, p)
    uniform = rssm.minimize(
        small_dpcp, method="rssm", max_iter=3000, seed=6, options={"n_blocks": 4}
    )
    res = rssm.minimize(
        small_dpcp, method="rssm", max_iter=3000, seed=6, options={"partition": part}
    )
    # The paper's schedule converges sublinearly: 5.4e-5 after 3000 steps with l = 4 equal
    # blocks; the unequal partition must do about as well.
    assert res.trace["error"][0] > 1e-2
    assert res.error < 2e-4 and res.error < 3 * uniform.error
    assert res.fun == pytest.approx(small_dpcp.cost(res.x), rel=1e-12)  # cache stays exact


def test_partition_validation():
    with pytest.raises(ValueError, match="every column 0..3 exactly once"):
        Partition([[0, 1], [1, 2, 3]], 4)
    with pytest.raises(ValueError, match="block 1 is empty"):
        Partition([[0, 1], []])
    with pytest.raises(ValueError, match="every column 0..15 exactly once; columns in no "
                                         "block: 3, 4, 5, 6, 7 and 8 more"):
        rssm.minimize(
            DPCP.synthetic(n=20, d=4, n_inliers=10, n_outliers=10, seed=0),
                method="rssm", stepsize=0.1,
            max_iter=1, options={"partition": [[0], [1, 2]]}
        )


def test_a_selector_of_your_own_must_draw_two_different_blocks(small_dpcp):
    """A custom PairSelector's pairs are checked (before: (0, 7) with l = 3 raised a raw
    IndexError, (0, 0) ran with duplicated columns, (-1, 0) wrapped around); a pair in
    reversed order is taken as the same pair."""
    from rssm.blocks import PairSelector

    def selector(pair):
        class Fixed(PairSelector):
            name = "fixed"

            def next_pair(self):
                return pair
        return Fixed()

    for bad in ((0, 7), (0, 0), (-1, 0), (0.0, 1)):
        with pytest.raises(ValueError, match=r"Fixed.next_pair must return two different "
                                             r"block numbers in 0..2, got"):
            rssm.minimize(small_dpcp, method="rssm", max_iter=3,
                          options={"n_blocks": 3, "selection": selector(bad)})
    a = rssm.minimize(small_dpcp, method="rssm", max_iter=5, tol=0,
                      options={"n_blocks": 3, "selection": selector((2, 0))})
    b = rssm.minimize(small_dpcp, method="rssm", max_iter=5, tol=0,
                      options={"n_blocks": 3, "selection": selector((0, 2))})
    np.testing.assert_array_equal(a.x_last, b.x_last)


def test_block_helpers_and_partitions_name_what_is_wrong():
    """A user's audit: pair_count(0) and pair_count(2.5) read as one block, "3" raised
    Python's comparison error; a partition with column 5 of p = 4 said "got 4 indices
    with 4 distinct"; BlockRule(search="no") and samples(check_finite="no") read as True."""
    from rssm.blocks import Partition, epoch_iterations, pair_count, pair_table
    from rssm.stepsizes import BlockRule, from_spec

    for bad in (0, -1, 2.5, True, "3"):
        for fn in (pair_count, epoch_iterations, pair_table):
            with pytest.raises((TypeError, ValueError), match="n_blocks"):
                fn(bad)
    assert pair_count(np.int64(5)) == 10 and epoch_iterations(1) == 1.0
    with pytest.raises(ValueError, match="columns outside 0..3: 5; in no block: 3"):
        Partition([[0, 1], [2, 5]], 4)
    with pytest.raises(ValueError, match="in more than one block: 1; in no block: 3"):
        Partition([[0, 1], [1, 2]], 4)
    # a mistyped huge p is named at once, in memory of the indices given (a review: the
    # first version built every column of p = 1e8 and ran out of memory)
    with pytest.raises(ValueError, match="in no block: 4, 5, 6, 7, 8 and 99999991 more"):
        Partition([[0, 1], [2, 3]], 10**8)
    for bad in ("no", 2, np.array([0.1])):
        with pytest.raises(TypeError, match="search must be True or False"):
            BlockRule(search=bad)
    assert from_spec("block_rule:search=false").search is False
    with pytest.raises(TypeError, match="check_finite must be True or False, got 'no'"):
        rssm.data.samples(np.ones((10, 3)), check_finite="no")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, 300), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_the_runs_of_a_mask_are_the_runs_of_its_indices(size, density, seed):
    """`_mask_runs` (a scan in Python up to `_SCAN_UPTO` columns, the data problems' stale
    rows every RSSM iteration) gives `_runs` of the mask's indices, on both sides of the
    threshold, with runs at either end."""
    from rssm.blocks import _mask_runs, _runs

    mask = np.random.default_rng(seed).random(size) < density
    assert _mask_runs(mask) == _runs(np.flatnonzero(mask))
