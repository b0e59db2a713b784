"""How often the trend test on a chain's log posterior (``conjoined.dpmm.diagnostics.trend``, behind
``ChainNotSettledWarning``) calls a chain unsettled: on stationary traces, where every call is a false alarm, and on
real DPMM and CDP fits.

1. AR(1) traces of 50 to 500 samples at autocorrelation times 1 to 39, 2,000 each: the share with ``|z| > 2``, 3
   and 4 (the warning's threshold is 4), and the share called unsettled (also moving over the last half).
2. DPMM fits at the default 100 iterations (seeds 0-3) and at 1,000 (seeds 0-1) on scikit-learn's digits (pixels
   under ``Multinomial`` and ``NormalGamma``, 20 principal components under the default Normal-inverse-Wishart),
   ``make_blobs(600, centers=3, random_state=1)``, iris, the tests' 2-d grid of nine clusters and their 32-d
   mixture of six: the trend z after warm-up, the change in nats and K at its start and end.
3. CDP with its defaults on the replicates of ``benchmarks/paper_tables.py`` (rows and columns shuffled): the
   mixture fits that have not settled, of six per fit, and the median effective size.
4. Section 2's chains compared (``compare_chains``): split R-hat of the log posterior and K, and the ARI between the
   chains' partitions; and how often four stationary AR(1) chains have an R-hat above 1.01 and 1.05 (short chains
   of correlated samples do: R-hat also says there are too few samples to tell).

    python benchmarks/chain_diagnostics.py [--replicates 50] [--jobs 2]     # about 1 minute on 2 cores
"""

from __future__ import annotations

import argparse
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from dpmm_embeddings import digits_pca, gaussian_32d, grid_2d
from paper_tables import replicate_data, replicate_seeds
from scipy.signal import lfilter
from sklearn.datasets import load_digits, load_iris, make_blobs

from conjoined import DPMM, ConjoinedDirichletProcess, NormalGamma
from conjoined.dpmm.diagnostics import R_HAT_MAX, ChainNotSettledWarning, compare_chains, split_r_hat, trend

AR_LENGTHS = (50, 75, 150, 500)
AR_PHIS = (0.0, 0.5, 0.8, 0.9, 0.95)
AR_DRAWS = 2000


def ar1(rng, phi, n, burn=200):
    """An AR(1) trace with unit innovations, after ``burn`` steps from 0 (phi^200 < 1e-4 for phi <= 0.95): its
    autocorrelation time is (1 + phi) / (1 - phi)."""
    return lfilter([1.0], [1.0, -phi], rng.standard_normal(n + burn))[burn:]


def stationary_false_alarms():
    print("1. stationary AR(1) traces: share of draws with |z| above 2, 3 and 4, and called unsettled (|z| > 4 and")
    print("   the last half's z of the same sign and above 1)")
    print(f"{'samples':>8} {'tau':>5} {'>2':>7} {'>3':>7} {'>4':>7} {'unsettled':>9}")
    rng = np.random.default_rng(0)
    for n in AR_LENGTHS:
        for phi in AR_PHIS:
            results = [trend(ar1(rng, phi, n)) for _ in range(AR_DRAWS)]
            z = np.abs([result.z for result in results])
            unsettled = np.mean([result.settled is False for result in results])
            print(f"{n:>8} {(1 + phi) / (1 - phi):>5.0f} " + " ".join(f"{np.mean(z > t):>7.4f}" for t in (2, 3, 4))
                  + f" {unsettled:>9.4f}")


def dpmm_data():
    digits = load_digits().data
    return {
        "digits pixels, Multinomial": (digits.astype(np.int64), None),
        "digits pixels, NormalGamma": (digits, NormalGamma()),
        "digits 20 PCs, NIW": (digits_pca()[0], None),
        "blobs": (make_blobs(600, centers=3, random_state=1)[0], None),
        "iris": (load_iris().data, None),
        "2-d grid of 9": (grid_2d()[0], None),
        "32-d mixture of 6": (gaussian_32d()[0], None),
    }


def dpmm_fits():
    print("\n2. DPMM fits: trend of the log posterior after warm-up")
    print(f"{'data':<28} {'n_iter':>6} {'seed':>4} {'z':>7} {'late z':>7} {'change':>9} {'eff. size':>9} {'K':>9}  "
          "settled")
    chains = {}
    for name, (X, prior) in dpmm_data().items():
        for n_iter, seeds in ((100, range(4)), (1000, range(2))):
            for seed in seeds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ChainNotSettledWarning)
                    model = DPMM(prior=prior, n_iter=n_iter, random_state=seed, store_labels=False).fit(X)
                chains.setdefault((name, n_iter), []).append(model)
                result = model.log_posterior_trend_
                k = model.n_clusters_trace_[model.warmup_:]
                print(f"{name:<28} {n_iter:>6} {seed:>4} {result.z:>7.1f} {result.late_z:>7.1f} "
                      f"{result.change:>9.1f} "
                      f"{result.effective_size:>9.1f} {f'{k[0]} -> {k[-1]}':>9}  {result.settled}")
    return chains


def chains_compared(chains):
    print("\n4. section 2's chains compared: split R-hat of the log posterior and of K, ARI between their "
          "partitions")
    print(f"{'data':<28} {'n_iter':>6} {'chains':>6} {'R-hat lp':>8} {'R-hat K':>8} {'ARI':>11}  agree")
    for (name, n_iter), models in chains.items():
        comparison = compare_chains(models)
        between = comparison.label_agreement[np.triu_indices(len(models), 1)]
        print(f"{name:<28} {n_iter:>6} {len(models):>6} {comparison.r_hat_log_posterior:>8.3f} "
              f"{comparison.r_hat_n_clusters:>8.3f} {f'{between.min():.2f}-{between.max():.2f}':>11}  "
              f"{comparison.agree}")
    print(f"\n   four stationary AR(1) chains, {AR_DRAWS} draws each: share with R-hat above {R_HAT_MAX} and 1.05")
    print(f"{'samples':>8} {'tau':>5} {'>' + str(R_HAT_MAX):>7} {'>1.05':>7}")
    rng = np.random.default_rng(1)
    for n in AR_LENGTHS:
        for phi in AR_PHIS[:3]:
            r_hats = np.array([split_r_hat([ar1(rng, phi, n) for _ in range(4)]) for _ in range(AR_DRAWS)])
            print(f"{n:>8} {(1 + phi) / (1 - phi):>5.0f} {np.mean(r_hats > R_HAT_MAX):>7.3f} "
                  f"{np.mean(r_hats > 1.05):>7.3f}")


def cdp_trends(case, replicate):
    X, _, _ = replicate_data(case, replicate)
    _, fit_seed = replicate_seeds(case, replicate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ChainNotSettledWarning)
        model = ConjoinedDirichletProcess(random_state=fit_seed, n_jobs=1).fit(X)
    return case, replicate, [(fit.side, fit.trend) for fit in model.dpmm_trends_]


def cdp_fits(n_replicates, jobs):
    print(f"\n3. CDP defaults, {n_replicates} replicates a case: mixture fits that have not settled")
    tasks = [(case, r) for case in (1, 2, 3, 4) for r in range(n_replicates)]
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(cdp_trends, *zip(*tasks)))
    for case in (1, 2, 3, 4):
        trends = [(r, side, t) for c, r, fits in results if c == case for side, t in fits]
        unsettled = [(r, side, t) for r, side, t in trends if t.settled is False]
        largest = max(abs(t.z) for _, _, t in trends)
        size = np.median([t.effective_size for _, _, t in trends])
        print(f"case {case}: {len(unsettled)} of {len(trends)} mixture fits unsettled; largest |z| {largest:.2f}; "
              f"median effective size {size:.0f} of {trends[0][2].n_samples}")
        for r, side, t in unsettled:
            print(f"    replicate {r}, {side}: z {t.z:.1f}, last half's z {t.late_z:.1f}, "
                  f"change {t.change:.1f} nats")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    stationary_false_alarms()
    chains = dpmm_fits()
    cdp_fits(args.replicates, args.jobs)
    chains_compared(chains)


if __name__ == "__main__":
    main()
