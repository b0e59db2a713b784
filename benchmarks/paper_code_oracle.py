"""The authors' post-processing fed the TRUE partitions: their one-pass reassignment and their extraction rule
(``reassign_method="paper-code"``, ``extraction="paper-code"``), with and without the row/column swap of their
published code, on the paper's four cases, unshuffled and shuffled.

Their code tabulates the row labels of each column's tokens and redraws each from the others (likewise the column
labels of each row's tokens); it then reads the per-column table as the rows' phi (and the per-row one as the
columns'): the swap. ``conjoined`` does not reproduce it (``conjoined.extract``'s docstring): a row's share of each row topic is counted over
its own tokens. The swap only lines up when a block's rows and columns have the same indices, as in the paper's
unshuffled simulations. Prints the mean Jaccard per case for: the library's pass and rule (no swap), this script's
own pass without the swap (a check: it should agree with the library's), and the same pass with the swap.

    python benchmarks/paper_code_oracle.py [--replicates 10]     # a few seconds
"""

from __future__ import annotations

import argparse

import numpy as np

from conjoined.datasets import make_cdp_case
from conjoined.extract import extract_biclusters
from conjoined.metrics import jaccard_score
from conjoined.reassign import TokenCounts, reassign_tokens


def true_labels(masks, n_items):
    """Labels 0..B-1 of the B true blocks, B for the background."""
    labels = np.full(n_items, masks.shape[0])
    for b, mask in enumerate(masks):
        labels[mask] = b
    return labels


def authors_pass(X, row_labels, column_labels, rng):
    """One leave-one-out draw per token, as their code: a token's row topic from the row topics of its column's
    other tokens, its column topic from the column topics of its row's other tokens. Returns the new row-topic
    counts per row and per column, and the new column-topic counts per column and per row."""
    n_row_topics, n_column_topics = row_labels.max() + 1, column_labels.max() + 1
    row_topics = np.eye(n_row_topics)[row_labels]  # (n_rows, K_r)
    column_topics = np.eye(n_column_topics)[column_labels]
    of_columns = X.T @ row_topics  # (n_cols, K_r): each column's tokens by row topic
    of_rows = X @ column_topics  # (n_rows, K_c)
    row_topic_by_row, row_topic_by_column = np.zeros(row_topics.shape), np.zeros(of_columns.shape)
    column_topic_by_column, column_topic_by_row = np.zeros((X.shape[1], n_column_topics)), np.zeros(of_rows.shape)
    for i, j in zip(*np.nonzero(X)):
        others = of_columns[j] - row_topics[i]
        drawn = rng.multinomial(X[i, j], others / others.sum()) if others.sum() > 0 else X[i, j] * row_topics[i]
        row_topic_by_row[i] += drawn
        row_topic_by_column[j] += drawn
        others = of_rows[i] - column_topics[j]
        drawn = rng.multinomial(X[i, j], others / others.sum()) if others.sum() > 0 else X[i, j] * column_topics[j]
        column_topic_by_column[j] += drawn
        column_topic_by_row[i] += drawn
    return row_topic_by_row, row_topic_by_column, column_topic_by_column, column_topic_by_row


def score(X, rows, columns, n_ik, n_jl):
    """Jaccard of the authors' rule on row-topic counts ``n_ik`` and column-topic counts ``n_jl``."""
    found = extract_biclusters(X, TokenCounts(np.zeros((n_ik.shape[1], n_jl.shape[1])), n_ik, n_jl),
                               rule="paper-code")
    return jaccard_score((found.rows, found.columns), (rows, columns))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=10)
    args = parser.parse_args()
    print(f"mean Jaccard over {args.replicates} replicates (data seeds 100..), true partitions")
    for shuffle in (False, True):
        for case in (1, 2, 3, 4):
            results = {"library (no swap)": [], "this script, no swap": [], "this script, their swap": []}
            for r in range(args.replicates):
                X, rows, columns = make_cdp_case(case, random_state=100 + r, shuffle=shuffle)
                row_labels, column_labels = true_labels(rows, X.shape[0]), true_labels(columns, X.shape[1])
                counts = reassign_tokens(X, row_labels, column_labels, row_labels.max() + 1, column_labels.max() + 1,
                                         a_r=0.1, a_c=0.1, lam=0.1, n_sweeps=1, method="paper-code", random_state=r)
                results["library (no swap)"].append(score(X, rows, columns, counts.n_ik, counts.n_jl))
                by_row, by_column, column_by_column, column_by_row = authors_pass(
                    X, row_labels, column_labels, np.random.default_rng(r))
                results["this script, no swap"].append(score(X, rows, columns, by_row, column_by_column))
                # the swap: column j's table read as row j's, row i's as column i's (the cases are square)
                results["this script, their swap"].append(score(X, rows, columns, by_column, column_by_row))
            shown = ", ".join(f"{name} {np.mean(values):.3f}" for name, values in results.items())
            print(f"{'shuffled' if shuffle else 'unshuffled'} case {case}: {shown}")


if __name__ == "__main__":
    main()
