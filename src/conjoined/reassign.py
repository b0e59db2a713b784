"""Token reassignment: the dual-topic collapsed Gibbs sampler of CDP (its third step) and of DT2B.

Every unit count of a count matrix ``X`` is a *token* at its cell ``(i, j)``; each token carries a row topic ``k``
(0..K_r-1) and a column topic ``l`` (0..K_c-1). With ``theta ~ Dirichlet(lam)`` over the K_r*K_c pairs and the
topic distributions ``phi_r[k] ~ Dirichlet(a_r)`` over the n_R rows and ``phi_c[l] ~ Dirichlet(a_c)`` over the n_C
columns integrated out, the allocation ``z`` of all tokens has the collapsed probability

    P(z) ∝ prod_kl Gamma(n_kl + lam)
           * prod_k [prod_i Gamma(n_ik + a_r) / Gamma(n_k + n_R a_r)]
           * prod_l [prod_j Gamma(n_jl + a_c) / Gamma(n_l + n_C a_c)]

(``n_kl`` tokens with pair (k, l), ``n_ik`` tokens of row i with row topic k, ``n_k = sum_i n_ik``; likewise for
columns). Moving one token of cell (i, j) to (k, l) multiplies each Gamma by its argument, which gives the single
token conditional

    p(k, l | rest) ∝ (n_kl + lam) (n_ik + a_r) (n_jl + a_c) / ((n_k + n_R a_r) (n_l + n_C a_c))

with the counts excluding that token.

Block update of a cell. All ``c`` tokens of a cell are removed at once; ``p0`` is the conditional above computed
from the remaining counts. For ``c == 1`` the token is drawn from ``p0`` (plain Gibbs). For ``c > 1`` a new
allocation ``m'`` (``m_kl`` tokens of the cell on pair (k, l)) is proposed from ``Multinomial(c, p0)`` and accepted
with probability ``min(1, w(m') / w(m))``, where

    log w(m) = sum_kl [lgamma(n_kl + lam + m_kl) - lgamma(n_kl + lam) - m_kl log(n_kl + lam)]
             + sum_k  [lgamma(n_ik + a_r + m_k) - lgamma(n_ik + a_r) - m_k log(n_ik + a_r)]
             - sum_k  [lgamma(D_k + m_k) - lgamma(D_k) - m_k log D_k]          (D_k = n_k + n_R a_r)
             + the same two terms for the columns,

is the ratio of the exact conditional of the cell's allocation to the proposal (the multinomial coefficients and
the normaliser of ``p0`` cancel). This is an exact Metropolis-Hastings-within-Gibbs step, so the chain keeps the
collapsed posterior invariant. Only pairs, row topics and column topics with ``m > 0`` contribute to ``w``.

Drawing from ``p0`` without scanning all K_r * K_c pairs. Write ``D_k = n_k + n_R a_r`` and
``c_l = (n_jl + a_c) / (n_l + n_C a_c)``; then ``p0(k, l) ∝ (n_kl + lam) c_l n_ik / D_k + a_r (n_kl + lam) c_l / D_k``.
The first part lives on the few row topics the row already uses; the second has column marginal
``a_r c_l V_l`` with ``V_l = sum_k (n_kl + lam) / D_k``, which is kept up to date as tokens move (O(K_c) a token,
recomputed at every row so rounding cannot drift). A cell costs O(K_r + (s_i + c) K_c) for a row using s_i row
topics, instead of O(K_r K_c).

Deep cells. A cell with ``c >= K_r K_c`` tokens is updated on its allocation's tally instead: the proposal
``Multinomial(c, p0)`` is drawn by conditional binomials over the pairs (the same law as c independent draws),
``w`` is computed from the tallies, and ``V`` afresh: O(K_r K_c) and one integer pass over the cell's tokens.
So no cell costs more than O(min(c, K_r K_c) K_c) in draws, and a sweep is
O(nnz (K_r + s K_c) K_c) plus a pass over the tokens (about 4 ns a token, where a draw costs about 150 ns).

Tokens are stored as pair ids ``k * K_c + l`` grouped by cell in CSR order (``offsets`` is the cumulative sum of
the cell counts), as int32 (4 bytes a token; one dtype keeps numba to a single compilation).
"""

from __future__ import annotations

import math
import numbers
import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.special import gammaln
from sklearn.utils import check_random_state

from ._legacy_stream import legacy_generator
from ._validation import MAX_EXACT_TOTAL, check_int, check_matrix, check_positive

__all__ = ["TokenCounts", "check_token_total", "collapsed_log_probability", "reassign_tokens"]

_METHODS = ("gibbs", "paper-code")
_INITS = ("labels", "random")

BYTES_PER_TOKEN = 4  # an int32 pair id (module docstring)


def _physical_memory():
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_token_total(total):
    """Raise ValueError when a matrix holding ``total`` counts has more tokens than the reassignment can hold:
    more than ``MAX_EXACT_TOTAL``, or more than ``BYTES_PER_TOKEN`` bytes each fit in this machine's memory."""
    total = float(total)
    hint = " Counts this large are usually not raw counts (scaled or normalised data?)"
    if total > MAX_EXACT_TOTAL:
        shown = f"{total:,.0f}" if total < 1e24 else f"{total:.4g}"  # not 300 digits for a value of 1e300
        raise ValueError(f"X holds {shown} counts in total; at most 2**53 = {MAX_EXACT_TOTAL:,} are "
                         f"supported.{hint}")
    memory = _physical_memory()
    if memory is not None and total * BYTES_PER_TOKEN > memory:
        raise ValueError(
            f"X holds {total:.4g} counts in total: the token reassignment keeps {BYTES_PER_TOKEN} bytes per count "
            f"({total * BYTES_PER_TOKEN / 2**30:.3g} GiB), more than this machine's {memory / 2**30:.3g} GiB of "
            f"memory.{hint}"
        )


class TokenCounts(NamedTuple):
    """Token tallies of a topic allocation.

    n_kl : ndarray of int64, shape (K_r, K_c)
        Tokens whose (row topic, column topic) pair is (k, l).
    n_ik : ndarray of int64, shape (n_rows, K_r)
        Tokens of row i whose row topic is k.
    n_jl : ndarray of int64, shape (n_cols, K_c)
        Tokens of column j whose column topic is l.
    """

    n_kl: np.ndarray
    n_ik: np.ndarray
    n_jl: np.ndarray


# --------------------------------------------------------------------------------------------------------------
# numba kernels
# --------------------------------------------------------------------------------------------------------------


# Not inline="always" (the kernels around it are): numba pasted it into its ten call sites, 3.5 s of a first
# run's compilation, and the compiled calls run the sweeps as fast.
@njit(cache=True, nogil=True)
def _add_rising_excess(x, m, sign, log_part, scale):
    """Add ``sign * log(Gamma(x + m) / (Gamma(x) x**m))`` (= sign * sum_{t<m} log(1 + t/x)) to the running value
    ``log_part + log(scale)``; returns the new (log_part, scale).

    Short products go into ``scale`` so that a whole block weight costs about one log instead of one per term.
    """
    if m <= 1:
        return log_part, scale
    if m <= 16 and 1e-3 <= x <= 1e12:
        # prod_{t<m} (x + t) / x**(m-1): one division; both stay far inside the float64 range for these x, m.
        rising = 1.0
        power = 1.0
        for t in range(1, m):
            rising *= x + t
            power *= x
        scale = scale * rising / power if sign > 0 else scale * power / rising
        if scale > 1e100 or scale < 1e-100:
            return log_part + math.log(scale), 1.0
        return log_part, scale
    return log_part + sign * (math.lgamma(x + m) - math.lgamma(x) - m * math.log(x)), scale


@njit(cache=True, nogil=True, inline="always")
def _log_block_weight(
    tokens,
    start,
    stop,
    i,
    j,
    n_kl,
    n_ik,
    n_jl,
    n_k,
    n_l,
    a_r,
    a_c,
    lam,
    row_prior_mass,
    col_prior_mass,
    pair_tally,
    row_tally,
    col_tally,
):
    """log w(m) of the module docstring for the allocation ``tokens[start:stop]`` (pair ids) of cell (i, j).

    The counts exclude the cell. The tally arrays must be zero on entry and are zero again on return.
    """
    n_col_topics = n_kl.shape[1]
    for t in range(start, stop):
        pair = tokens[t]
        k = pair // n_col_topics
        pair_tally[pair] += 1
        row_tally[k] += 1
        col_tally[pair - k * n_col_topics] += 1
    log_part = 0.0
    scale = 1.0
    for t in range(start, stop):
        pair = tokens[t]
        k = pair // n_col_topics
        l = pair - k * n_col_topics
        m = pair_tally[pair]
        if m > 0:
            log_part, scale = _add_rising_excess(n_kl[k, l] + lam, m, 1, log_part, scale)
            pair_tally[pair] = 0
        m = row_tally[k]
        if m > 0:
            log_part, scale = _add_rising_excess(n_ik[i, k] + a_r, m, 1, log_part, scale)
            log_part, scale = _add_rising_excess(n_k[k] + row_prior_mass, m, -1, log_part, scale)
            row_tally[k] = 0
        m = col_tally[l]
        if m > 0:
            log_part, scale = _add_rising_excess(n_jl[j, l] + a_c, m, 1, log_part, scale)
            log_part, scale = _add_rising_excess(n_l[l] + col_prior_mass, m, -1, log_part, scale)
            col_tally[l] = 0
    return log_part + math.log(scale)


@njit(cache=True, nogil=True, inline="always")
def _add_to_counts(k, l, m, i, j, n_kl, n_ik, n_jl, n_k, n_l):
    """Add ``m`` tokens of cell (i, j) at pair (k, l) to the counts."""
    n_kl[k, l] += m
    n_ik[i, k] += m
    n_jl[j, l] += m
    n_k[k] += m
    n_l[l] += m


@njit(cache=True, nogil=True)
def _move_tracked(tokens, start, stop, i, j, sign, n_kl, n_ik, n_jl, n_k, n_l, lam, row_prior_mass, dense):
    """Add (sign=+1) or remove (sign=-1) the tokens ``tokens[start:stop]`` (pair ids) of cell (i, j), keeping
    ``dense[l] = sum_k (n_kl + lam) / (n_k + n_R a_r)`` up to date."""
    n_col_topics = n_kl.shape[1]
    for t in range(start, stop):
        pair = tokens[t]
        k = pair // n_col_topics
        l = pair - k * n_col_topics
        old = 1.0 / (n_k[k] + row_prior_mass)
        new = 1.0 / (n_k[k] + sign + row_prior_mass)
        for m in range(n_col_topics):
            dense[m] += (n_kl[k, m] + lam) * (new - old)
        dense[l] += sign * new
        _add_to_counts(k, l, sign, i, j, n_kl, n_ik, n_jl, n_k, n_l)


@njit(cache=True, nogil=True)
def _dense_column_sums(n_kl, n_k, lam, row_prior_mass, dense):
    """dense[l] = sum_k (n_kl + lam) / (n_k + n_R a_r), computed afresh (bounds the drift of the updates)."""
    dense[:] = 0.0
    for k in range(n_kl.shape[0]):
        inverse = 1.0 / (n_k[k] + row_prior_mass)
        for l in range(n_kl.shape[1]):
            dense[l] += (n_kl[k, l] + lam) * inverse


@njit(cache=True, nogil=True, inline="always")
def _draw_from_cumulative(rng, cumulative, n):
    """Index < n drawn with probabilities proportional to the increments of the non-decreasing
    ``cumulative[:n]``."""
    u = rng.random() * cumulative[n - 1]
    low = 0
    high = n - 1
    while low < high:
        middle = (low + high) >> 1
        if cumulative[middle] > u:
            high = middle
        else:
            low = middle + 1
    return low


@njit(cache=True, nogil=True)
def _draw_pair(rng, n_kl, n_k, lam, row_prior_mass, col_factor, col_cumulative, row_cumulative, sparse_topics,
               sparse_cumulative, n_sparse, dense_cumulative):
    """A pair id ``k * K_c + l`` from p0 (module docstring), split as

        p0(k, l) ∝ (n_kl + lam) c_l n_ik / D_k   +   a_r (n_kl + lam) c_l / D_k    (c_l: column factor)

    The first part has mass only on the row topics the row already uses (``sparse_topics``, cumulative weights
    ``sparse_cumulative``); the second (``dense_cumulative`` over l, from the tracked column sums) is drawn as a
    column topic, then a row topic given it. Either way one row of ``n_kl`` or one column is scanned.
    """
    n_row_topics, n_col_topics = n_kl.shape
    sparse_mass = sparse_cumulative[n_sparse - 1] if n_sparse else 0.0
    u = rng.random() * (sparse_mass + dense_cumulative[n_col_topics - 1])
    if u < sparse_mass:
        k = sparse_topics[_draw_from_cumulative(rng, sparse_cumulative, n_sparse)]
        total = 0.0
        for l in range(n_col_topics):
            total += (n_kl[k, l] + lam) * col_factor[l]
            col_cumulative[l] = total
        return k * n_col_topics + _draw_from_cumulative(rng, col_cumulative, n_col_topics)
    l = _draw_from_cumulative(rng, dense_cumulative, n_col_topics)
    total = 0.0
    for k in range(n_row_topics):
        total += (n_kl[k, l] + lam) / (n_k[k] + row_prior_mass)
        row_cumulative[k] = total
    return _draw_from_cumulative(rng, row_cumulative, n_row_topics) * n_col_topics + l


@njit(cache=True, nogil=True)
def _log_tally_weight(tally, i, j, n_kl, n_ik, n_jl, n_k, n_l, a_r, a_c, lam, row_prior_mass, col_prior_mass,
                      row_tally, col_tally):
    """log w(m) of the module docstring for the allocation ``tally`` (K_r * K_c,) of cell (i, j): the same as
    :func:`_log_block_weight` of its tokens, in O(K_r K_c). The scratch arrays ``row_tally`` and ``col_tally``,
    shared with :func:`_log_block_weight`, must be zero on entry and are zero again on return."""
    n_row_topics, n_col_topics = n_kl.shape
    log_part = 0.0
    scale = 1.0
    for k in range(n_row_topics):
        for l in range(n_col_topics):
            m = tally[k * n_col_topics + l]
            if m > 0:
                log_part, scale = _add_rising_excess(n_kl[k, l] + lam, m, 1, log_part, scale)
                row_tally[k] += m
                col_tally[l] += m
    for k in range(n_row_topics):
        if row_tally[k] > 0:
            log_part, scale = _add_rising_excess(n_ik[i, k] + a_r, row_tally[k], 1, log_part, scale)
            log_part, scale = _add_rising_excess(n_k[k] + row_prior_mass, row_tally[k], -1, log_part, scale)
    for l in range(n_col_topics):
        if col_tally[l] > 0:
            log_part, scale = _add_rising_excess(n_jl[j, l] + a_c, col_tally[l], 1, log_part, scale)
            log_part, scale = _add_rising_excess(n_l[l] + col_prior_mass, col_tally[l], -1, log_part, scale)
    row_tally[:] = 0
    col_tally[:] = 0
    return log_part + math.log(scale)


@njit(cache=True, nogil=True)
def _add_tally(tally, sign, i, j, n_kl, n_ik, n_jl, n_k, n_l):
    """Add (sign=+1) or remove (sign=-1) the allocation ``tally`` (K_r * K_c,) of cell (i, j)."""
    n_col_topics = n_kl.shape[1]
    for pair in range(tally.shape[0]):
        if tally[pair] != 0:
            k = pair // n_col_topics
            _add_to_counts(k, pair - k * n_col_topics, sign * tally[pair], i, j, n_kl, n_ik, n_jl, n_k, n_l)


@njit(cache=True, nogil=True)
def _deep_cell_update(rng, pairs, start, c, i, j, n_kl, n_ik, n_jl, n_k, n_l, a_r, a_c, lam, row_prior_mass,
                      col_prior_mass, dense, current, proposal, weights, row_tally, col_tally):
    """The block update of a cell with many tokens (``c`` >= K_r K_c), on its allocation's tally instead of its
    tokens: the proposal ``Multinomial(c, p0)`` is drawn by conditional binomials over the K_r K_c pairs, which
    is the law of c independent draws from p0, and the acceptance ratio is the same w(m') / w(m). Costs
    O(K_r K_c) and a pass over the tokens, instead of a draw and an update of ``dense`` per token."""
    n_row_topics, n_col_topics = n_kl.shape
    n_pairs = n_row_topics * n_col_topics
    current[:] = 0
    for t in range(start, start + c):
        current[pairs[t]] += 1
    _add_tally(current, -1, i, j, n_kl, n_ik, n_jl, n_k, n_l)
    total = 0.0
    for k in range(n_row_topics):
        row_factor = (n_ik[i, k] + a_r) / (n_k[k] + row_prior_mass)
        for l in range(n_col_topics):
            weight = (n_kl[k, l] + lam) * row_factor * (n_jl[j, l] + a_c) / (n_l[l] + col_prior_mass)
            weights[k * n_col_topics + l] = weight
            total += weight
    remaining = c
    for pair in range(n_pairs):
        if remaining == 0 or total <= 0.0:
            proposal[pair] = 0
            continue
        share = weights[pair] / total
        drawn = remaining if share >= 1.0 or pair == n_pairs - 1 else rng.binomial(remaining, share)
        proposal[pair] = drawn
        remaining -= drawn
        total -= weights[pair]
    proposal[n_pairs - 1] += remaining  # rounding left the last pairs no mass: what is left goes to the last
    log_ratio = _log_tally_weight(proposal, i, j, n_kl, n_ik, n_jl, n_k, n_l, a_r, a_c, lam, row_prior_mass,
                                  col_prior_mass, row_tally, col_tally) - \
        _log_tally_weight(current, i, j, n_kl, n_ik, n_jl, n_k, n_l, a_r, a_c, lam, row_prior_mass,
                          col_prior_mass, row_tally, col_tally)
    chosen = current
    if log_ratio >= 0.0 or rng.random() < math.exp(log_ratio):
        chosen = proposal
        t = start
        for pair in range(n_pairs):
            for _ in range(proposal[pair]):
                pairs[t] = pair
                t += 1
    _add_tally(chosen, 1, i, j, n_kl, n_ik, n_jl, n_k, n_l)
    _dense_column_sums(n_kl, n_k, lam, row_prior_mass, dense)


@njit(cache=True, nogil=True)
def _gibbs_sweep(
    indptr,
    indices,
    cell_counts,
    offsets,
    pairs,
    n_kl,
    n_ik,
    n_jl,
    n_k,
    n_l,
    a_r,
    a_c,
    lam,
    max_cell_count,
    rng,
):
    """One sweep of the per-cell block update over every cell with tokens, in CSR order; updates in place."""
    n_rows, n_row_topics = n_ik.shape
    n_col_topics = n_jl.shape[1]
    row_prior_mass = n_rows * a_r
    col_prior_mass = n_jl.shape[0] * a_c
    row_cumulative = np.empty(n_row_topics)
    col_cumulative = np.empty(n_col_topics)
    col_factor = np.empty(n_col_topics)
    dense = np.empty(n_col_topics)
    dense_cumulative = np.empty(n_col_topics)
    sparse_topics = np.empty(n_row_topics, np.int64)
    sparse_cumulative = np.empty(n_row_topics)
    proposal = np.empty(max_cell_count, dtype=pairs.dtype)
    pair_tally = np.zeros(n_row_topics * n_col_topics, dtype=np.int64)
    row_tally = np.zeros(n_row_topics, dtype=np.int64)
    col_tally = np.zeros(n_col_topics, dtype=np.int64)
    n_pairs = n_row_topics * n_col_topics
    deep_current = np.zeros(n_pairs, dtype=np.int64)
    deep_proposal = np.zeros(n_pairs, dtype=np.int64)
    deep_weights = np.empty(n_pairs)
    for i in range(n_rows):
        _dense_column_sums(n_kl, n_k, lam, row_prior_mass, dense)
        for cell in range(indptr[i], indptr[i + 1]):
            c = cell_counts[cell]
            if c == 0:
                continue
            j = indices[cell]
            start = offsets[cell]
            stop = start + c
            if c >= n_pairs:
                _deep_cell_update(rng, pairs, start, c, i, j, n_kl, n_ik, n_jl, n_k, n_l, a_r, a_c, lam,
                                  row_prior_mass, col_prior_mass, dense, deep_current, deep_proposal, deep_weights,
                                  row_tally, col_tally)
                continue
            _move_tracked(pairs, start, stop, i, j, -1, n_kl, n_ik, n_jl, n_k, n_l, lam, row_prior_mass, dense)
            total = 0.0
            for l in range(n_col_topics):
                col_factor[l] = (n_jl[j, l] + a_c) / (n_l[l] + col_prior_mass)
                total += a_r * col_factor[l] * dense[l]
                dense_cumulative[l] = total
            n_sparse = 0
            total = 0.0
            for k in range(n_row_topics):
                if n_ik[i, k] > 0:
                    weight = 0.0
                    for l in range(n_col_topics):
                        weight += (n_kl[k, l] + lam) * col_factor[l]
                    total += weight * n_ik[i, k] / (n_k[k] + row_prior_mass)
                    sparse_topics[n_sparse] = k
                    sparse_cumulative[n_sparse] = total
                    n_sparse += 1
            draw_args = (rng, n_kl, n_k, lam, row_prior_mass, col_factor, col_cumulative, row_cumulative,
                         sparse_topics, sparse_cumulative, n_sparse, dense_cumulative)
            if c == 1:
                pairs[start] = _draw_pair(*draw_args)
            else:
                for t in range(c):
                    proposal[t] = _draw_pair(*draw_args)
                log_ratio = _log_block_weight(
                    proposal,
                    0,
                    c,
                    i,
                    j,
                    n_kl,
                    n_ik,
                    n_jl,
                    n_k,
                    n_l,
                    a_r,
                    a_c,
                    lam,
                    row_prior_mass,
                    col_prior_mass,
                    pair_tally,
                    row_tally,
                    col_tally,
                ) - _log_block_weight(
                    pairs,
                    start,
                    stop,
                    i,
                    j,
                    n_kl,
                    n_ik,
                    n_jl,
                    n_k,
                    n_l,
                    a_r,
                    a_c,
                    lam,
                    row_prior_mass,
                    col_prior_mass,
                    pair_tally,
                    row_tally,
                    col_tally,
                )
                if log_ratio >= 0.0 or rng.random() < math.exp(log_ratio):
                    for t in range(c):
                        pairs[start + t] = proposal[t]
            _move_tracked(pairs, start, stop, i, j, 1, n_kl, n_ik, n_jl, n_k, n_l, lam, row_prior_mass, dense)


@njit(cache=True, nogil=True, inline="always")
def _leave_one_out_label(rng, label_counts, own_label):
    """A label drawn from ``label_counts`` minus one token of ``own_label``; ``own_label`` if no other token."""
    n_others = label_counts.sum() - 1
    if n_others <= 0:
        return own_label
    u = rng.random() * n_others
    running = 0.0
    for label in range(label_counts.shape[0]):
        running += label_counts[label] - (1 if label == own_label else 0)
        if u < running:
            return label
    return own_label


@njit(cache=True, nogil=True)
def _paper_code_pass(indptr, indices, cell_counts, offsets, pairs, n_cols, n_row_topics, n_col_topics, rng):
    """The authors' reassignment, one pass: every token's row topic is redrawn from the row topics of its
    column's other tokens, and its column topic from the column topics of its row's other tokens (their code's
    per-column vectors of row labels and per-row vectors of column labels; all draws use the labels from before
    the pass). Updates ``pairs`` in place; the caller recounts."""
    n_rows = indptr.shape[0] - 1
    column_row_topics = np.zeros((n_cols, n_row_topics))
    row_column_topics = np.zeros((n_rows, n_col_topics))
    for i in range(n_rows):
        for cell in range(indptr[i], indptr[i + 1]):
            j = indices[cell]
            for t in range(offsets[cell], offsets[cell] + cell_counts[cell]):
                column_row_topics[j, pairs[t] // n_col_topics] += 1
                row_column_topics[i, pairs[t] % n_col_topics] += 1
    for i in range(n_rows):
        for cell in range(indptr[i], indptr[i + 1]):
            j = indices[cell]
            for t in range(offsets[cell], offsets[cell] + cell_counts[cell]):
                k = pairs[t] // n_col_topics
                l = pairs[t] - k * n_col_topics
                new_k = _leave_one_out_label(rng, column_row_topics[j], k)
                new_l = _leave_one_out_label(rng, row_column_topics[i], l)
                pairs[t] = new_k * n_col_topics + new_l


@njit(cache=True, nogil=True)
def _tally(indptr, indices, cell_counts, offsets, pairs, n_kl, n_ik, n_jl):
    """Fill the (zeroed) count arrays from the token pair ids."""
    n_col_topics = n_kl.shape[1]
    for i in range(n_ik.shape[0]):
        for cell in range(indptr[i], indptr[i + 1]):
            j = indices[cell]
            for t in range(offsets[cell], offsets[cell] + cell_counts[cell]):
                k = pairs[t] // n_col_topics
                l = pairs[t] - k * n_col_topics
                n_kl[k, l] += 1
                n_ik[i, k] += 1
                n_jl[j, l] += 1


# --------------------------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------------------------


def _check_labels(labels, n_items, n_clusters, name, items):
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n_items:
        raise ValueError(
            f"{name} must be a 1-d array with one label per {items} ({n_items}), got shape {labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.number) or not np.all(labels == np.round(labels)):
        raise ValueError(f"{name} must hold integers")
    labels = labels.astype(np.int64)
    bad = np.flatnonzero((labels < -1) | (labels >= n_clusters))
    if bad.size:
        raise ValueError(
            f"{name} must lie in 0..{n_clusters - 1} (or -1 for a {items} set aside); "
            f"{name}[{bad[0]}] = {labels[bad[0]]}"
        )
    return labels


def _empty_counts(n_rows, n_cols, n_row_clusters, n_column_clusters):
    return TokenCounts(
        np.zeros((n_row_clusters, n_column_clusters), dtype=np.int64),
        np.zeros((n_rows, n_row_clusters), dtype=np.int64),
        np.zeros((n_cols, n_column_clusters), dtype=np.int64),
    )


def _integers(rng, high, size):
    """``size`` integers uniform on 0..high-1 from a RandomState or a Generator."""
    if isinstance(rng, np.random.Generator):
        return rng.integers(0, high, size=size, dtype=np.int64)
    return rng.randint(0, high, size=size, dtype=np.int64)


def _uniform_pairs(rng, n_pairs, n_tokens, chunk=2**20):
    """(n_tokens,) int32 pair ids uniform on 0..n_pairs-1, drawn in chunks so that no int64 array of all the tokens
    is made (the draws are those of one ``_integers`` call)."""
    pairs = np.empty(n_tokens, np.int32)
    for start in range(0, n_tokens, chunk):
        stop = min(start + chunk, n_tokens)
        pairs[start:stop] = _integers(rng, n_pairs, stop - start)
    return pairs


def _random_generator(random_state):
    """The sampler's source of randomness: a Generator as it is, else scikit-learn's RandomState for None, an int
    seed in [0, 2**32 - 1] or a RandomState; ValueError naming ``random_state`` otherwise."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    is_seed = isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
    if (random_state is None or isinstance(random_state, np.random.RandomState)
            or (is_seed and 0 <= random_state <= np.iinfo(np.uint32).max)):
        return check_random_state(random_state)
    raise ValueError("random_state must be None, an int seed in [0, 2**32 - 1], a RandomState or a Generator, "
                     f"got {random_state!r}")


def reassign_tokens(
    X,
    row_labels,
    column_labels,
    n_row_clusters,
    n_column_clusters,
    *,
    a_r,
    a_c,
    lam,
    n_sweeps,
    n_average=0,
    method="gibbs",
    init="labels",
    random_state=None,
    callback=None,
):
    """Allocate every token of ``X`` to a (row topic, column topic) pair and resample the allocation.

    Parameters
    ----------
    X : array-like or sparse matrix of non-negative integer counts, shape (n_rows, n_cols)
    row_labels : array-like of int, shape (n_rows,)
        Row cluster of each row in 0..n_row_clusters-1, or -1 for a row set aside: its tokens are left out of the
        model. With ``init="random"`` only the -1 entries matter.
    column_labels : array-like of int, shape (n_cols,)
        Likewise for the columns.
    n_row_clusters, n_column_clusters : int >= 1
        K_r and K_c.
    a_r, a_c, lam : float > 0
        Dirichlet hyperparameters of phi_r, phi_c and theta. ``n_R`` and ``n_C`` in the priors are the full
        numbers of rows and columns of ``X`` (set-aside rows/columns included, with no tokens).
    n_sweeps : int >= 0
        Number of sweeps over all cells (0 returns the initial allocation).
    n_average : int in 0..n_sweeps, default=0
        With ``n_average > 0`` the returned counts are the means of the allocations after each of the last
        ``n_average`` sweeps: estimates of the posterior means of n_kl, n_ik and n_jl where one allocation is a
        single draw (a one-token row's n_ik is 0 or 1 in any draw). The means are taken within the chain, whose
        topics keep the identities of the labels it starts from over a few sweeps of real data; the posterior
        itself is symmetric in the topics, so over very long runs on tiny data they may switch.
    method : {"gibbs", "paper-code"}
        "gibbs": the exact collapsed sampler of the module docstring. "paper-code": the reassignment of the
        authors' published code, for comparison only: per sweep, one leave-one-out draw per token of its row topic
        from the row topics of its column's other tokens, and of its column topic from the column topics of its
        row's other tokens (their code tabulates the row labels of each column's tokens and the column labels of
        each row's; no prior, no link between the two sides). Their code makes one such pass.
    init : {"labels", "random"}
        "labels": a token at (i, j) starts at pair (row_labels[i], column_labels[j]). "random": uniform pairs
        (DT2B).
    random_state : None, int, RandomState or Generator
        Same seed, same result. The draws come from this state alone: numba's global random stream, which a
        user's own jitted ``np.random`` calls draw from, is left as it was.
    callback : callable, optional
        Called as ``callback(sweep, counts)`` after each sweep (sweep = 0, 1, ...) with a copy of the current
        :class:`TokenCounts`.

    Returns
    -------
    TokenCounts
        Counts of the final allocation: n_kl (K_r, K_c), n_ik (n_rows, K_r), n_jl (n_cols, K_c), all int64; with
        ``n_average > 0`` their means over the last ``n_average`` sweeps, float64.
    """
    X = check_matrix(X, name="X", counts=True)
    X = X if sp.issparse(X) else sp.csr_matrix(X)
    check_token_total(X.sum())
    n_rows, n_cols = X.shape
    n_row_clusters = check_int(n_row_clusters, "n_row_clusters", minimum=1)
    n_column_clusters = check_int(n_column_clusters, "n_column_clusters", minimum=1)
    n_pairs = n_row_clusters * n_column_clusters
    if n_pairs > np.iinfo(np.int32).max:
        raise ValueError(
            f"n_row_clusters * n_column_clusters = {n_pairs} is too large (max {np.iinfo(np.int32).max})"
        )
    row_labels = _check_labels(row_labels, n_rows, n_row_clusters, "row_labels", "row")
    column_labels = _check_labels(column_labels, n_cols, n_column_clusters, "column_labels", "column")
    a_r = check_positive(a_r, "a_r")
    a_c = check_positive(a_c, "a_c")
    lam = check_positive(lam, "lam")
    n_sweeps = check_int(n_sweeps, "n_sweeps", minimum=0)
    n_average = check_int(n_average, "n_average", minimum=0)
    if n_average > n_sweeps:
        raise ValueError(f"n_average must be at most n_sweeps = {n_sweeps}, got {n_average}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if init not in _INITS:
        raise ValueError(f"init must be one of {_INITS}, got {init!r}")
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None, got {callback!r}")
    rng = _random_generator(random_state)

    indptr = X.indptr.astype(np.int64)
    indices = X.indices.astype(np.int64)
    cell_rows = np.repeat(np.arange(n_rows), np.diff(indptr))
    in_model = (row_labels[cell_rows] >= 0) & (column_labels[indices] >= 0)
    cell_counts = np.where(in_model, X.data, 0).astype(np.int64)
    offsets = np.zeros(cell_counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(cell_counts, out=offsets[1:])
    if init == "labels":
        cell_pairs = row_labels[cell_rows] * n_column_clusters + column_labels[indices]
        pairs = np.repeat(cell_pairs.astype(np.int32), cell_counts)
    else:
        pairs = _uniform_pairs(rng, n_pairs, int(offsets[-1]))

    counts = _empty_counts(n_rows, n_cols, n_row_clusters, n_column_clusters)
    _tally(indptr, indices, cell_counts, offsets, pairs, *counts)
    max_cell_count = int(cell_counts.max(initial=0))
    seeds = _integers(rng, np.iinfo(np.int32).max, n_sweeps)
    sums = TokenCounts(*(np.zeros(a.shape) for a in counts)) if n_average else None
    for sweep in range(n_sweeps):
        if method == "gibbs":
            n_k = counts.n_kl.sum(axis=1)
            n_l = counts.n_kl.sum(axis=0)
            _gibbs_sweep(
                indptr,
                indices,
                cell_counts,
                offsets,
                pairs,
                *counts,
                n_k,
                n_l,
                a_r,
                a_c,
                lam,
                max_cell_count,
                legacy_generator(seeds[sweep]),
            )
        else:
            _paper_code_pass(
                indptr, indices, cell_counts, offsets, pairs, n_cols, n_row_clusters, n_column_clusters,
                legacy_generator(seeds[sweep]),
            )
            counts = _empty_counts(n_rows, n_cols, n_row_clusters, n_column_clusters)
            _tally(indptr, indices, cell_counts, offsets, pairs, *counts)
        if sweep >= n_sweeps - n_average:
            for total, count in zip(sums, counts):
                total += count
        if callback is not None:
            callback(sweep, TokenCounts(*(a.copy() for a in counts)))
    if n_average:
        return TokenCounts(*(total / n_average for total in sums))
    return counts


def collapsed_log_probability(counts, *, a_r, a_c, lam):
    """log P(z) of the module docstring, up to an additive constant that depends only on the matrix shape, K_r,
    K_c and the hyperparameters (so values are comparable across allocations of the same data).

    Parameters
    ----------
    counts : TokenCounts
    a_r, a_c, lam : float > 0

    Returns
    -------
    float
    """
    n_kl, n_ik, n_jl = (np.asarray(a, dtype=np.float64) for a in counts)
    n_rows, n_cols = n_ik.shape[0], n_jl.shape[0]
    return float(
        gammaln(n_kl + lam).sum()
        + gammaln(n_ik + a_r).sum()
        - gammaln(n_ik.sum(axis=0) + n_rows * a_r).sum()
        + gammaln(n_jl + a_c).sum()
        - gammaln(n_jl.sum(axis=0) + n_cols * a_c).sum()
    )
