"""Document memberships on 20 Newsgroups: one draw of the token allocation against its mean over sweeps.

CDP's memberships are the shares of each document's tokens in each column topic (``n_jl / n_j``). One allocation
of the tokens is a single posterior draw: a document with one token (of the 100 words) has a membership of 0 or
1 in every topic. CDP reports their mean over the last half of the reassignment's sweeps. This script fits CDP
(the paper's hyperparameters, 150 iterations) and re-runs the reassignment from the fitted clusters, one chain
with one seed, and scores its final allocation and its mean over the last ``n_average`` sweeps by how well
they predict each document's newsgroup:

- ``own = 0``: documents with no share in their own cluster's topic;
- ``accuracy``: the newsgroup with the largest share (a topic's newsgroup is its cluster's majority);
- ``AUC``: each newsgroup's share (the sum over its topics) ranking its documents, mean over the 4 groups;
- ``log loss``: minus the mean log of the true newsgroup's share (clipped at 1e-3).

    python benchmarks/memberships.py [PATH_TO_20news_w100.mat] [--config text|defaults] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from conjoined import ConjoinedDirichletProcess
from conjoined.datasets import load_20news_w100
from conjoined.extract import topic_parameters
from conjoined.reassign import reassign_tokens

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "20news_w100.mat"
PAPER_HYPERPARAMETERS = {"row_alpha": 10.0, "row_beta": 1.0, "column_alpha": 100.0, "column_beta": 1.0}
CONFIGURATIONS = {"text": {"column_likelihood": "multinomial"}, "defaults": {}}


def newsgroup_scores(membership, labels, groups):
    """``(own = 0, accuracy, AUC, log loss)`` of document memberships (n_docs, K_c) against the newsgroups."""
    scored = membership.sum(axis=1) > 0
    majority = np.array([np.bincount(groups[labels == l], minlength=4).argmax() if np.any(labels == l) else -1
                         for l in range(membership.shape[1])])
    shares = np.stack([membership[:, majority == g].sum(axis=1) for g in range(4)], axis=1)[scored]
    truth = groups[scored]
    own = membership[np.flatnonzero(scored), labels[scored]]
    return (int(np.sum(own == 0)),
            float(np.mean(shares.argmax(axis=1) == truth)),
            float(np.mean([roc_auc_score(truth == g, shares[:, g]) for g in range(4)])),
            float(-np.mean(np.log(np.clip(shares[np.arange(truth.size), truth], 1e-3, 1.0)))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--config", choices=sorted(CONFIGURATIONS), default="text")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load_20news_w100(args.path)
    model = ConjoinedDirichletProcess(**PAPER_HYPERPARAMETERS, **CONFIGURATIONS[args.config], n_iter=150,
                                      random_state=args.seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # all-zero documents are set aside
        model.fit(data.data)
    rows, columns = model.row_labels_, model.column_labels_
    documents = columns >= 0
    print(f"20 Newsgroups, configuration {args.config!r}, seed {args.seed}: fitted in "
          f"{time.perf_counter() - start:.1f} s, {model.n_row_clusters_} x {model.n_column_clusters_} clusters, "
          f"{documents.sum()} documents with tokens")
    print(f"{'allocation':<32} {'own = 0':>8} {'accuracy':>9} {'AUC':>7} {'log loss':>9}")
    n_sweeps = model.n_reassign
    for name, n_average in (("final draw", 0), (f"mean of the last {(n_sweeps + 1) // 2} sweeps", (n_sweeps + 1) // 2)):
        counts = reassign_tokens(data.data, rows, columns, model.n_row_clusters_, model.n_column_clusters_,
                                 a_r=model.a_r, a_c=model.a_c, lam=model.lam, n_sweeps=n_sweeps,
                                 n_average=n_average, random_state=args.seed)
        membership = topic_parameters(counts, a_r=model.a_r, a_c=model.a_c, lam=model.lam).column_membership
        own, accuracy, auc, log_loss = newsgroup_scores(membership[documents], columns[documents],
                                                        data.column_groups[documents])
        print(f"{name:<32} {own:>8} {accuracy:>9.3f} {auc:>7.4f} {log_loss:>9.3f}")


if __name__ == "__main__":
    main()
