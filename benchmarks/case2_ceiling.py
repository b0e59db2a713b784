"""How well can anything do on simulation case 2? Two ceilings, on fresh draws of the case.

Case 2 (20 x 20, 4000 tokens, half of them in the blocks) has a small 4 x 4 block (rows 1-4, columns
1-4) and a large 8 x 16 block (rows 5-12, columns 5-20); rows 13-20 are background.

(a) Oracle: it knows the true cell densities (block cells ``p N / #block cells``, other cells
    ``(1 - p) N / #other cells``) and classifies each row by MAP under independent Poisson counts,
    given the true column sets (classes small block / large block / background, prior 4/20, 8/20,
    8/20), and each column likewise given the true row sets (small block / large block, prior 4/20,
    16/20). Its mean Jaccard is what a classifier that knows everything but the memberships achieves.

(b) The model's own posterior: CDP's row DPMM (``PoissonGamma(shape=1).fitted(agg)``, alpha = 1) on
    the rows x 2 matrix ``agg`` of row sums over the TRUE column sets. The exact log posterior
    (``conjoined.dpmm.sampler.log_posterior``) of the true row partition is compared with that of the
    partition with the small block merged into the background. When the merged partition is more
    probable, a posterior-mode estimator loses the small block even with perfect columns (Jaccard 0.5
    at best: the large block alone).

(c) The mean and quartiles of log p(truth) - log p(merged), and the mean Jaccard of the oracle when it
    keeps only the large block in the draws where the posterior prefers the merged partition (an
    estimate of the ceiling of a posterior-mode estimator).

(d) The oracle of (a) with the class weights learned from the data by EM instead of the design's fixed shares:
    the ceiling of an estimator that knows the densities but, like any estimator of exchangeable memberships,
    must learn how many rows each class holds.

(e) The oracle with the two densities (one for every block cell, one for every other cell: the design gives both
    blocks one density) learned with the class weights by EM, started from the true classes: the ceiling of a
    plug-in estimator that knows the block structure and must learn every number.

(f) As (e) with the densities (Gamma(1, 0) priors) and the weights (uniform Dirichlet) integrated out: each row's
    class the most probable under its posterior marginal, from a collapsed Gibbs sampler started at the truth
    (600 sweeps, the first 100 discarded). The ceiling of a fully Bayesian estimator that knows the structure.

With ``--compare docs/results/jaccard_replicates.csv`` it also evaluates the case-2 replicates of a
``paper_tables.py`` run and splits CDP's scores by whether the posterior prefers the merged partition.

With ``--fit N`` it fits CDP with its defaults to N draws of the case with rows and columns shuffled, as
Table 2's replicates are (draw r from seed ``--seed + r``, fitted with the same seed), and prints its mean
Jaccard beside the oracle's on the same draws, and in how many draws no bicluster is the small block (cell
Jaccard below 0.5 with every bicluster found: lost, or merged with background rows).

    python benchmarks/case2_ceiling.py [--replicates 200] [--seed 5000] [--compare JACCARD_REPLICATES_CSV]
    python benchmarks/case2_ceiling.py --fit 1000 --seed 7000 --jobs 2    # about 3 minutes on 2 cores

``--n-tokens`` draws every matrix with that many tokens instead of the table's 4000: the paper's published CDP
score for this case (0.985) came from its authors' code, which drew 5000 (``--n-tokens 5000``).
"""

from __future__ import annotations

import argparse
import math
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from numba import njit
from paper_tables import replicate_data
from scipy.special import logsumexp, softmax

from conjoined import PoissonGamma
from conjoined.cdp import ConjoinedDirichletProcess
from conjoined.datasets import CDP_CASES, make_biclusters_counts
from conjoined.dpmm.priors import SufficientStats
from conjoined.dpmm.sampler import log_posterior
from conjoined.metrics import _cell_jaccard, jaccard_score

CASE = 2
ROW_PRIOR = np.array([4, 8, 8]) / 20  # small block, large block, background
COLUMN_PRIOR = np.array([4, 16]) / 20  # small block, large block
TABLE_TOKENS = CDP_CASES[CASE]["n_tokens"]  # the paper's table: 4000 (its authors' code drew 5000)


def cell_densities(rows, columns, n_tokens):
    """Expected count of a block cell and of any other cell in case 2 drawn with ``n_tokens`` tokens."""
    marked = (rows.T.astype(int) @ columns.astype(int)) > 0
    p = CDP_CASES[CASE]["p"]
    return p * n_tokens / marked.sum(), (1 - p) * n_tokens / (marked.size - marked.sum())


def draw_case(seed, n_tokens=TABLE_TOKENS, shuffle=False):
    """``(X, rows, columns)``: case 2 drawn from ``seed`` as ``make_cdp_case`` draws it, with ``n_tokens``
    tokens."""
    spec = CDP_CASES[CASE]
    return make_biclusters_counts(spec["shape"], spec["blocks"], n_tokens, spec["p"], random_state=seed,
                                  shuffle=shuffle)


def class_log_likelihoods(X, member_sets, block, other):
    """(n, C) log-likelihood of each row of X (n, m) under each class, independent Poisson counts: class c has
    rate ``block`` on the columns of ``member_sets[c]`` (bool (m,), None: no block), ``other`` elsewhere."""
    log_likelihood = []
    for members in member_sets:
        rate = np.full(X.shape[1], other) if members is None else np.where(members, block, other)
        log_likelihood.append(X @ np.log(rate) - rate.sum())
    return np.column_stack(log_likelihood)


def map_classes(X, member_sets, prior, block, other):
    """(n,) MAP class of each row of X under :func:`class_log_likelihoods` and the class probabilities
    ``prior`` (C,)."""
    return np.argmax(class_log_likelihoods(X, member_sets, block, other) + np.log(prior), axis=1)


def learned_weight_classes(X, member_sets, block, other, n_iter=1000, tol=1e-10):
    """(n,) most probable class of each row of X under :func:`class_log_likelihoods` with the class weights
    learned from the rows by EM (from equal weights), as an estimator must learn them: the design's fixed
    shares (four rows of twenty in the small block) are not known to it."""
    log_likelihood = class_log_likelihoods(X, member_sets, block, other)
    weights = np.full(log_likelihood.shape[1], 1 / log_likelihood.shape[1])
    for _ in range(n_iter):
        log_post = log_likelihood + np.log(weights)
        resp = np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))
        new = resp.mean(axis=0)
        converged = np.abs(new - weights).max() < tol
        weights = new
        if converged:
            break
    return np.argmax(log_likelihood + np.log(weights), axis=1)


def _block_counts(X, member_sets):
    """(n, C) count of each row of X (n, m) over the block columns of each class, and (C,) the classes' numbers
    of block columns (``member_sets`` as in :func:`class_log_likelihoods`)."""
    masks = np.array([np.zeros(X.shape[1], bool) if members is None else members for members in member_sets])
    return X @ masks.T.astype(float), masks.sum(axis=1).astype(float)


def learned_density_classes(X, member_sets, start, n_iter=1000, tol=1e-10):
    """(n,) most probable class of each row of X at the fixed point of an EM that learns the class weights and
    two densities, one for every block cell and one for every other cell, from the classes ``start`` (n,)."""
    in_block, block_size = _block_counts(X, member_sets)
    total, n_cells = X.sum(), X.size
    resp = np.eye(len(member_sets))[start]
    for _ in range(n_iter):
        block_count, block_cells = (resp * in_block).sum(), (resp * block_size).sum()
        block = block_count / block_cells
        other = (total - block_count) / (n_cells - block_cells)
        log_post = class_log_likelihoods(X, member_sets, block, other) + np.log(resp.mean(axis=0) + 1e-300)
        new = softmax(log_post, axis=1)
        converged = np.abs(new - resp).max() < tol
        resp = new
        if converged:
            break
    return resp.argmax(axis=1)


@njit(cache=True)
def _collapsed_marginals(in_block, row_total, block_size, n_columns, start, n_sweeps, burn_in, seed):
    """(n, C) posterior marginal class probabilities, Rao-Blackwellised, of a collapsed Gibbs sampler over the
    classes of n rows: weights under a uniform Dirichlet, the block and the other density under Gamma(1, 0)."""
    np.random.seed(seed)
    n, n_classes = in_block.shape
    labels = start.copy()
    class_size = np.zeros(n_classes)
    block_count, block_cells = 0.0, 0.0
    for i in range(n):
        class_size[labels[i]] += 1
        block_count += in_block[i, labels[i]]
        block_cells += block_size[labels[i]]
    total, n_cells = row_total.sum(), n * n_columns
    marginals = np.zeros((n, n_classes))
    prob = np.zeros(n_classes)
    for sweep in range(n_sweeps):
        for i in range(n):
            class_size[labels[i]] -= 1
            block_count -= in_block[i, labels[i]]
            block_cells -= block_size[labels[i]]
            for c in range(n_classes):
                count, cells = block_count + in_block[i, c], block_cells + block_size[c]
                # Gamma(1, 0) marginal of Poisson counts, up to the factorials: Gamma(1 + S) / cells^(1 + S)
                prob[c] = (np.log(class_size[c] + 1.0) + math.lgamma(1 + count) - (1 + count) * np.log(cells)
                           + math.lgamma(1 + total - count) - (1 + total - count) * np.log(n_cells - cells))
            prob = np.exp(prob - prob.max())
            prob /= prob.sum()
            c = min(np.searchsorted(np.cumsum(prob), np.random.random()), n_classes - 1)
            labels[i] = c
            class_size[c] += 1
            block_count += in_block[i, c]
            block_cells += block_size[c]
            if sweep >= burn_in:
                marginals[i] += prob
    return marginals / (n_sweeps - burn_in)


def integrated_classes(X, member_sets, start, seed, n_sweeps=600, burn_in=100):
    """(n,) class of each row of X most probable under its posterior marginal with the weights and densities of
    :func:`learned_density_classes` integrated out (:func:`_collapsed_marginals`), from the classes ``start``."""
    in_block, block_size = _block_counts(X, member_sets)
    marginals = _collapsed_marginals(in_block, X.sum(axis=1).astype(float), block_size, X.shape[1],
                                     np.asarray(start, np.int64), n_sweeps, burn_in, seed)
    return marginals.argmax(axis=1)


ORACLES = ("design", "shares", "densities", "integrated")


def oracle_biclusters(X, rows, columns, learns="design", seed=0):
    """(rows, columns) bool arrays of shape (2, n) found by the oracle's row and column classes (given the true
    column and row sets). ``learns``: ``"design"``, MAP at the design's densities (for the matrix's total, the
    number of tokens drawn) and class shares; ``"shares"``, the shares learned by EM
    (:func:`learned_weight_classes`); ``"densities"``, densities and shares learned by EM from the true classes
    (:func:`learned_density_classes`); ``"integrated"``, both integrated out (:func:`integrated_classes`,
    sampled from ``seed``)."""
    X = np.asarray(X, dtype=float)
    block, other = cell_densities(rows, columns, X.sum())
    row_sets, column_sets = [columns[0], columns[1], None], [rows[0], rows[1]]
    true_row_class = np.where(rows[0], 0, np.where(rows[1], 1, 2))
    true_column_class = np.where(columns[0], 0, 1)
    if learns == "design":
        row_class = map_classes(X, row_sets, ROW_PRIOR, block, other)
        column_class = map_classes(X.T, column_sets, COLUMN_PRIOR, block, other)
    elif learns == "shares":
        row_class = learned_weight_classes(X, row_sets, block, other)
        column_class = learned_weight_classes(X.T, column_sets, block, other)
    elif learns == "densities":
        row_class = learned_density_classes(X, row_sets, true_row_class)
        column_class = learned_density_classes(X.T, column_sets, true_column_class)
    elif learns == "integrated":
        row_class = integrated_classes(X, row_sets, true_row_class, seed)
        column_class = integrated_classes(X.T, column_sets, true_column_class, seed + 1)
    else:
        raise ValueError(f"learns must be one of {ORACLES}, got {learns!r}")
    return np.array([row_class == 0, row_class == 1]), np.array([column_class == 0, column_class == 1])


def row_log_posterior(agg, labels):
    """Exact log posterior (up to a constant) of a row partition under the row DPMM's model, alpha = 1."""
    prior = PoissonGamma(shape=1.0).fitted(agg)
    n_clusters = labels.max() + 1
    stats = SufficientStats(
        np.bincount(labels, minlength=n_clusters).astype(float),
        np.stack([agg[labels == k].sum(axis=0) for k in range(n_clusters)]),
    )
    return log_posterior(prior, 1.0, stats)


def oracle_scores(X, rows, columns, seed=0):
    """(4,) Jaccard of each oracle of :data:`ORACLES` on one draw (``seed`` for the integrated one's sampler)."""
    return np.array([jaccard_score(oracle_biclusters(X, rows, columns, learns, seed), (rows, columns))
                     for learns in ORACLES])


def evaluate(X, rows, columns, seed=0):
    """(log p(truth) - log p(merged), Jaccard of the design's oracle where it follows the posterior, then the
    four oracles' Jaccards (:func:`oracle_scores`))."""
    scores = oracle_scores(X, rows, columns, seed)
    agg = np.column_stack([X[:, columns[0]].sum(axis=1), X[:, columns[1]].sum(axis=1)]).astype(float)
    truth = np.where(rows[0], 0, np.where(rows[1], 1, 2))
    merged = np.where(rows[1], 1, 0)
    margin = row_log_posterior(agg, truth) - row_log_posterior(agg, merged)
    found_rows, found_columns = oracle_biclusters(X, rows, columns)
    large_only = jaccard_score((found_rows[1:], found_columns[1:]), (rows, columns))
    return margin, scores[0] if margin > 0 else large_only, *scores


def _oracle_means(scores):
    """The four oracles' mean Jaccards (``scores`` (draws, 4)), one phrase."""
    design, shares, densities, integrated = np.mean(scores, axis=0)
    return (f"oracle {design:.4f}, learning the shares {shares:.4f}, the densities too {densities:.4f}, both "
            f"integrated {integrated:.4f}")


def compare(path):
    """CDP's Jaccard on the case-2 replicates of a paper_tables.py run against the oracles, split by the
    posterior's choice."""
    fits = pd.read_csv(path)
    scores_by_method = fits[fits["case"] == CASE].pivot(index="replicate", columns="method", values="jaccard")
    replicates = scores_by_method.index
    evaluated = np.array([evaluate(*replicate_data(CASE, rep), seed=rep) for rep in replicates])
    margin, oracles = evaluated[:, 0], evaluated[:, 2:]
    merged = margin < 0
    print(f"{path}, case {CASE}: merged partition more probable in {merged.sum()}/{len(replicates)} "
          f"replicates; {_oracle_means(oracles)}")
    for method in ("cdp", "cdp-paper"):
        if method not in scores_by_method:
            continue
        scores = scores_by_method[method].to_numpy()
        below = scores < oracles[:, 0]
        differs = np.abs(scores[:, None] - oracles[:, 1:]) > 1e-12
        print(f"  {method}: mean Jaccard {scores.mean():.4f}; {scores[merged].mean():.3f} where the "
              f"merged partition is more probable, {scores[~merged].mean():.3f} elsewhere; below the "
              f"oracle in {below.sum()} replicates ({below[~merged].sum()} of them where the truth is "
              f"more probable), above it in {(scores > oracles[:, 0]).sum()}; differs from the oracles that "
              f"learn the shares, the densities, both integrated in {', '.join(map(str, differs.sum(axis=0)))}")


def fit_draw(seed, n_tokens=TABLE_TOKENS):
    """(CDP's Jaccard, whether a bicluster is the small block, the four oracles' Jaccards) on the shuffled draw
    of ``seed`` (:func:`draw_case`)."""
    X, rows, columns = draw_case(seed, n_tokens, shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ConjoinedDirichletProcess(random_state=seed).fit(X)
    found = (model.rows_, model.columns_)
    small_found = bool((_cell_jaccard(found, (rows[:1], columns[:1])) >= 0.5).any())
    return jaccard_score(found, (rows, columns)), small_found, *oracle_scores(X, rows, columns, seed)


def fit_cdp(n_draws, seed, jobs, n_tokens=TABLE_TOKENS):
    """CDP's defaults on ``n_draws`` shuffled draws against the oracles on the same draws."""
    with ProcessPoolExecutor(jobs) as pool:
        results = np.array(list(pool.map(fit_draw, range(seed, seed + n_draws), [n_tokens] * n_draws,
                                         chunksize=10)))
    cdp, small_found, oracles = results[:, 0], results[:, 1].astype(bool), results[:, 2:]
    sd, lost = cdp.std(ddof=1), (~small_found).sum()
    below, above = (cdp < oracles[:, 0] - 1e-12).sum(), (cdp > oracles[:, 0] + 1e-12).sum()
    print(f"CDP (defaults), {n_draws} shuffled draws of {n_tokens} tokens (seeds {seed}.."
          f"{seed + n_draws - 1}): mean Jaccard {cdp.mean():.4f} (sd {sd:.3f}, standard error "
          f"{sd / np.sqrt(n_draws):.4f}); on the same draws {_oracle_means(oracles)}; below the oracle in "
          f"{below} draws, above it in {above}; no bicluster is the small block in {lost} draws")
    gap = oracles[:, ORACLES.index("densities")] - cdp
    print(f"below the oracle that learns the densities: {gap[~small_found].sum():.2f} points in the {lost} draws "
          f"without the small block, {gap[small_found].sum():.2f} in the others")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--seed", type=int, default=5000, help="replicate r is drawn with seed + r")
    parser.add_argument("--compare", metavar="JACCARD_REPLICATES_CSV",
                        help="split the CDP scores of a paper_tables.py run by the posterior's choice")
    parser.add_argument("--fit", type=int, metavar="N",
                        help="only fit CDP's defaults to N shuffled draws and compare with the oracle")
    parser.add_argument("--jobs", type=int, default=1, help="processes for --fit")
    parser.add_argument("--n-tokens", type=int, default=TABLE_TOKENS,
                        help="tokens per draw (default: the table's 4000; the authors' code: 5000)")
    args = parser.parse_args()
    if args.n_tokens < 1:
        parser.error("--n-tokens must be >= 1")
    if args.fit:
        fit_cdp(args.fit, args.seed, args.jobs, args.n_tokens)
        return

    margin, capped, oracle, learned, densities, integrated = np.array(
        [evaluate(*draw_case(args.seed + rep, args.n_tokens), seed=rep) for rep in range(args.replicates)]).T
    n_merged = int((margin < 0).sum())
    q1, median, q3 = np.percentile(margin, [25, 50, 75])
    print(f"case {CASE}, {args.replicates} draws (seeds {args.seed}..{args.seed + args.replicates - 1})")
    print(f"(a) oracle (true densities and column/row sets, MAP): mean Jaccard {oracle.mean():.3f} "
          f"(sd {oracle.std(ddof=1):.3f}; exact in {np.mean(oracle == 1):.0%} of draws)")
    print(f"(b) row DPMM posterior, true columns: merged partition (small block in background) more "
          f"probable than the truth in {n_merged}/{args.replicates} draws ({n_merged / args.replicates:.1%})")
    print(f"(c) log p(truth) - log p(merged): mean {margin.mean():.2f}, quartiles {q1:.2f} / {median:.2f} / "
          f"{q3:.2f}; oracle that loses the small block where the posterior prefers the merged "
          f"partition: mean Jaccard {capped.mean():.3f}")
    print(f"(d) oracle with class weights learned from the data (EM), not the design's: mean Jaccard "
          f"{learned.mean():.3f} (sd {learned.std(ddof=1):.3f})")
    print(f"(e) oracle with the densities learned too (EM from the true classes): mean Jaccard "
          f"{densities.mean():.3f}")
    print(f"(f) oracle with the densities and the weights integrated (collapsed Gibbs): mean Jaccard "
          f"{integrated.mean():.3f}")
    if args.compare:
        compare(args.compare)


if __name__ == "__main__":
    main()
