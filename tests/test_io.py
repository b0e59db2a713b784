import errno
import gzip
import json
import os
import shutil
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import conjoined.io
from conjoined._validation import check_matrix
from conjoined.io import (
    atomic_output_dir,
    atomic_output_file,
    atomic_output_files,
    check_not_input,
    read_matrix,
    write_json,
    write_table_csv,
    writing_results,
)

anndata = pytest.importorskip("anndata")
pd = pytest.importorskip("pandas")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def counts():
    """A 5 x 4 count matrix (rows = genes, columns = cells) with names."""
    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, size=(5, 4)).astype(np.int64)
    X[0, 0] = 7
    genes = np.array([f"gene{i}" for i in range(5)])
    cells = np.array([f"cell{j}" for j in range(4)])
    return X, genes, cells


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


@pytest.mark.parametrize("name, sep", [("m.csv", ","), ("m.tsv", "\t"), ("m.csv.gz", ",")])
def test_table_with_row_names(tmp_path, counts, name, sep):
    X, genes, cells = counts
    pd.DataFrame(X, index=genes, columns=cells).to_csv(tmp_path / name, sep=sep)
    result = read_matrix(tmp_path / name)
    np.testing.assert_array_equal(result.X, X)
    np.testing.assert_array_equal(result.row_names, genes)
    np.testing.assert_array_equal(result.column_names, cells)
    assert result.source_format == name.split(".")[1]


@pytest.mark.parametrize("name, sep", [("m.csv", ","), ("m.tsv.gz", "\t")])
def test_table_with_numeric_row_names_under_an_empty_header(tmp_path, counts, name, sep):
    # what pandas' to_csv writes for a default index, or numeric gene IDs: names, not a column of counts
    X, _, cells = counts
    pd.DataFrame(X, index=[101, 102, 103, 104, 105], columns=cells).to_csv(tmp_path / name, sep=sep)
    result = read_matrix(tmp_path / name)
    np.testing.assert_array_equal(result.X, X)
    assert result.row_names.tolist() == ["101", "102", "103", "104", "105"]
    np.testing.assert_array_equal(result.column_names, cells)
    # a numeric first column with a header of its own is counts
    pd.DataFrame(X, columns=cells).to_csv(tmp_path / "named.csv", index=False)
    assert read_matrix(tmp_path / "named.csv").X.shape == X.shape


@pytest.mark.parametrize("header, ids, evidence", [
    ("GeneID", np.arange(5), "has a header that names identifiers"),
    ("GeneIDs", np.arange(5), "has a header that names identifiers"),
    ("doc_id", np.array([7, 3, 9, 1, 4]), "has a header that names identifiers"),
    ("index", np.arange(5), "has a header that names identifiers"),
    ("geneid", np.array([7157, 672, 1956, 3845, 5290]), "has a header that names identifiers"),
    ("Unnamed: 0", np.array([4, 0, 2, 1, 3]), "has a header that names identifiers"),  # pandas' unnamed column
    ("X", np.array([4, 0, 2, 1, 3]), "has a header that names identifiers"),  # R's read.csv, then write.csv
    ("sample0", 1000 + np.arange(12), r"holds integers that rise strictly over its 12 lines \(1000, 1001, 1002, "
                                      r"\.\.\., 1011\)"),
])
def test_a_numeric_first_column_that_looks_like_identifiers_is_refused_not_guessed(tmp_path, header, ids,
                                                                                   evidence):
    """Read as counts, an ID column becomes a sample (a document or cell of huge counts) and the fit goes on
    silently wrong; read as names, a column of counts is lost. first_column says which."""
    values = np.random.default_rng(1).poisson(2.0, size=(len(ids), 3))
    frame = pd.DataFrame(values, columns=["a", "b", "c"])
    frame.insert(0, header, ids)
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=rf"t\.csv: the first column, '{header}', is numeric and {evidence}: row "
                                         r"names, or counts\? Say which: first_column='names' or 'counts' "
                                         r"\(--first-column names, or counts\)"):
        read_matrix(tmp_path / "t.csv")
    as_names = read_matrix(tmp_path / "t.csv", first_column="names")
    np.testing.assert_array_equal(as_names.X, values)
    assert as_names.row_names.tolist() == [str(i) for i in ids] and as_names.column_names.tolist() == ["a", "b", "c"]
    as_counts = read_matrix(tmp_path / "t.csv", first_column="counts")
    np.testing.assert_array_equal(as_counts.X, np.column_stack([ids, values]))
    assert as_counts.row_names is None and as_counts.column_names.tolist() == [header, "a", "b", "c"]


def test_a_numeric_first_column_of_counts_is_read_as_counts(tmp_path):
    # a header of its own, no identifier in it, counts that do not rise line after line (or too few lines to
    # tell), or fall (a table sorted by its first sample, top genes first)
    for first in ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9], list(range(60, 0, -4))):
        frame = pd.DataFrame({"cell0": first, "cell1": np.ones(len(first), dtype=int)})
        frame.to_csv(tmp_path / "t.csv", index=False)
        result = read_matrix(tmp_path / "t.csv")
        assert result.X[:, 0].tolist() == first and result.row_names is None
    # words that only contain "id" or "index", a sample named like the next, or numbers that are not whole
    for first, second, values in [("tidal", "x", [1, 2]), ("indexer", "x", [1, 2]), ("squid", "x", [1, 2]),
                                  ("genes_1", "x", [1, 2]), ("ID1", "ID2", [1, 2]), ("ID_rep1", "ID_rep2", [1, 2]),
                                  ("Index_B", "x", [0.5, 2.25])]:
        pd.DataFrame({first: values, second: [5, 6]}).to_csv(tmp_path / "w.csv", index=False)
        assert read_matrix(tmp_path / "w.csv").X.tolist() == [[values[0], 5], [values[1], 6]], first


def test_a_quoted_first_column_of_numbers_is_names(tmp_path):
    # R's write.csv(row.names=FALSE) quotes a column of IDs held as text, not the counts
    (tmp_path / "q.csv").write_text('"gene","c1","c2"\n"101",3,0\n"205",1,2\n')
    result = read_matrix(tmp_path / "q.csv")
    assert result.X.tolist() == [[3, 0], [1, 2]] and result.row_names.tolist() == ["101", "205"]
    assert result.column_names.tolist() == ["c1", "c2"]
    # every field quoted (Python's csv.QUOTE_ALL): the quotes say nothing, the numbers are counts
    (tmp_path / "all.csv").write_text('"c0","c1","c2"\n"101","3","0"\n"205","1","2"\n')
    assert read_matrix(tmp_path / "all.csv").X.tolist() == [[101, 3, 0], [205, 1, 2]]


def test_first_column_errors(tmp_path, counts):
    X, genes, cells = counts
    pd.DataFrame(X, index=genes, columns=cells).to_csv(tmp_path / "named.csv")
    with pytest.raises(ValueError, match=r"named\.csv: column 1 \(no header\) is not numeric \(first_column="
                                         r"'counts', --first-column counts: no column holds names\)"):
        read_matrix(tmp_path / "named.csv", first_column="counts")
    (tmp_path / "gap.csv").write_text("g,c1,,c2\n1,2,x,4\n2,3,4,5\n")
    with pytest.raises(ValueError, match=r"gap\.csv: column after 'c1' \(no header\) is not numeric"):
        read_matrix(tmp_path / "gap.csv")
    # R's write.table: the header one field short says the first field of each line is a name
    (tmp_path / "r.tsv").write_text("a\tb\n10\t1\t2\n20\t3\t4\n")
    with pytest.raises(ValueError, match=r"r\.tsv: first_column='counts' \(--first-column counts\), but the lines "
                                         r"below the header have one field more than it: a row name first"):
        read_matrix(tmp_path / "r.tsv", first_column="counts")
    assert read_matrix(tmp_path / "r.tsv", first_column="names").row_names.tolist() == ["10", "20"]
    with pytest.raises(ValueError, match=r"first_column must be None, 'names' or 'counts', got 'rows'"):
        read_matrix(tmp_path / "r.tsv", first_column="rows")
    (tmp_path / "only.csv").write_text("gene_id\n1\n2\n")
    with pytest.raises(ValueError, match=r"only\.csv: the first column \(the table's only column\), 'gene_id'"):
        read_matrix(tmp_path / "only.csv")
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    with pytest.raises(ValueError, match=r"m\.npz: first_column= \(--first-column\) applies to \.csv and \.tsv "
                                         r"files only"):
        read_matrix(tmp_path / "m.npz", first_column="names")


def test_table_headers_as_r_writes_them_and_a_header_called_na(tmp_path):
    # R's write.table: row names, and a header one field short
    (tmp_path / "r.tsv").write_text("a\tb\tc\n10\t1\t2\t3\n20\t4\t5\t6\n")
    result = read_matrix(tmp_path / "r.tsv")
    assert result.X.tolist() == [[1, 2, 3], [4, 5, 6]] and result.row_names.tolist() == ["10", "20"]
    assert result.column_names.tolist() == ["a", "b", "c"]
    # numbers as column names, quoted or not, in a header one field short, are names
    for header in ['"1"\t"2"\t"3"', "1\t2\t3"]:
        (tmp_path / "n.tsv").write_text(f"{header}\n10\t1\t2\t3\n20\t4\t5\t6\n")
        result = read_matrix(tmp_path / "n.tsv")
        assert result.X.tolist() == [[1, 2, 3], [4, 5, 6]] and result.column_names.tolist() == ["1", "2", "3"]
    # a column named "NA" is a column of counts, not a first column without a header
    (tmp_path / "na.csv").write_text("NA,a\n1,2\n3,4\n")
    result = read_matrix(tmp_path / "na.csv")
    assert result.X.tolist() == [[1, 2], [3, 4]] and result.row_names is None
    # a header two or more fields short is not a table of counts with names
    (tmp_path / "short.csv").write_text("# made by x\n,a,b\n1,2,3\n")
    with pytest.raises(ValueError, match=r"short.csv: the header has 1 fields, and the lines below it 3"):
        read_matrix(tmp_path / "short.csv")


def test_table_without_row_names(tmp_path, counts):
    X, _, cells = counts
    pd.DataFrame(X, columns=cells).to_csv(tmp_path / "m.csv", index=False)
    result = read_matrix(tmp_path / "m.csv")
    np.testing.assert_array_equal(result.X, X)
    assert result.row_names is None
    np.testing.assert_array_equal(result.column_names, cells)


@pytest.mark.parametrize("text, message", [
    ("name,a,b\nx,1,2\ny,3,oops\n", "column 'b' is not numeric"),
    # pandas keeps a whole number beyond int64 as text
    ("name,a,b\nx,1,2\ny,3,99999999999999999999999\n", r"column 'b' holds 99999999999999999999999, a whole number "
                                                     r"beyond 64-bit integers \(counts must be at most 2\*\*53\)"),
    ("name,a,b\nx,1,-99999999999999999999999\ny,3,oops\n", "column 'b' is not numeric"),
    ("", "the file is empty"),
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00", r"not a text table \(it holds bytes that are not UTF-8 text: a binary "
                                           r"file, or text in another encoding, such as Latin-1, to be saved as "
                                           r"UTF-8\)"),
    ("name,a\ncaf\xe9,1\n".encode("latin-1"), r"not a text table \(.* such as Latin-1, to be saved as UTF-8"),
    ("name,a,b\nx,1,2\ny,3\n", r"a missing value .*, first at \(row, col\) = \(1, 1\): row 'y', column 'b'"),
    ("a,b\n1,2\n,4\n", r"a missing value .*, first at \(row, col\) = \(1, 0\): column 'a'"),
])
def test_table_errors(tmp_path, text, message):
    if isinstance(text, bytes):
        (tmp_path / "bad.csv").write_bytes(text)
    else:
        (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(ValueError, match=rf"bad\.csv: {message}"):
        read_matrix(tmp_path / "bad.csv")


@pytest.mark.parametrize("compress", [False, True])
def test_mtx_with_name_files(tmp_path, counts, compress):
    X, genes, cells = counts
    path = tmp_path / "m.mtx"
    scipy.io.mmwrite(path, sp.coo_matrix(X))
    if compress:
        with open(path, "rb") as src, gzip.open(tmp_path / "m.mtx.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        path = tmp_path / "m.mtx.gz"
    (tmp_path / "rows.txt").write_text("\n".join(genes) + "\n")
    result = read_matrix(path, row_names=tmp_path / "rows.txt", column_names=list(cells))
    assert sp.isspmatrix_csr(result.X)
    np.testing.assert_array_equal(result.X.toarray(), X)
    np.testing.assert_array_equal(result.row_names, genes)
    np.testing.assert_array_equal(result.column_names, cells)
    assert result.source_format == "mtx"
    unnamed = read_matrix(path)
    assert unnamed.row_names is None and unnamed.column_names is None


def test_a_byte_order_mark_is_not_read_into_the_first_name(tmp_path, counts):
    X, genes, cells = counts
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    (tmp_path / "genes.txt").write_text("\n".join(genes) + "\n", encoding="utf-8-sig")
    with gzip.open(tmp_path / "cells.txt.gz", "wt", encoding="utf-8-sig") as handle:
        handle.write("\n".join(cells) + "\n")
    result = read_matrix(tmp_path / "m.npz", row_names=tmp_path / "genes.txt", column_names=tmp_path / "cells.txt.gz")
    assert list(result.row_names) == list(genes) and list(result.column_names) == list(cells)


def test_a_table_with_another_separator_says_so(tmp_path):
    (tmp_path / "semicolons.csv").write_text("gene;c1;c2\ng1;1;2\ng2;3;4\n")
    with pytest.raises(ValueError, match=r"holds no values .*its lines hold ';': is that its separator\?"):
        read_matrix(tmp_path / "semicolons.csv")


def test_lines_ending_with_a_separator(tmp_path):
    # every line ends with a tab (as some tools write them): the empty last field is no column
    (tmp_path / "trailing.tsv").write_text("gene\tc1\tc2\t\ng1\t1\t2\t\ng2\t3\t4\t\n")
    result = read_matrix(tmp_path / "trailing.tsv")
    np.testing.assert_array_equal(result.X, [[1, 2], [3, 4]])
    assert list(result.row_names) == ["g1", "g2"] and list(result.column_names) == ["c1", "c2"]
    # only the lines below the header do: the error says so rather than only naming a column as missing
    (tmp_path / "shifted.tsv").write_text("gene\tc1\tc2\ng1\t1\t2\t\ng2\t3\t4\t\n")
    with pytest.raises(ValueError, match="empty on every line: do the lines below the header end with a separator"):
        read_matrix(tmp_path / "shifted.tsv")


def test_names_of_wrong_length(tmp_path, counts):
    X, genes, _ = counts
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    with pytest.raises(ValueError, match="3 row names given for a matrix with 5 rows"):
        read_matrix(tmp_path / "m.npz", row_names=genes[:3])
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_matrix(tmp_path / "m.npz", column_names=tmp_path / "nope.txt")
    # a blank line would be a row named "" or " " (read back as a missing value); trailing empty lines are no names
    (tmp_path / "rows.txt").write_text("g0\ng1\n \t\ng3\ng4\n\n")
    with pytest.raises(ValueError, match=r"rows\.txt: line 3 holds no name: every line must name its item"):
        read_matrix(tmp_path / "m.npz", row_names=tmp_path / "rows.txt")


@pytest.mark.parametrize(
    "names",
    [5, {"gene0", "gene1"}, np.array([list("abcde")]), [None] * 5, [b"gene"] * 5],
    ids=["int", "set", "2-d array", "None", "bytes"],
)
def test_names_of_the_wrong_type(tmp_path, counts, names):
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(counts[0]))
    with pytest.raises(TypeError, match="row_names must be a names file .* or a sequence of names"):
        read_matrix(tmp_path / "m.npz", row_names=names)


def test_names_as_a_tuple_an_index_numbers_or_a_generator(tmp_path, counts):
    X, genes, cells = counts
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    result = read_matrix(tmp_path / "m.npz", row_names=tuple(genes), column_names=pd.Index(cells))
    np.testing.assert_array_equal(result.row_names, genes)
    np.testing.assert_array_equal(result.column_names, cells)
    result = read_matrix(tmp_path / "m.npz", row_names=range(len(genes)),
                         column_names=(name for name in cells))
    np.testing.assert_array_equal(result.row_names, [str(i) for i in range(len(genes))])
    np.testing.assert_array_equal(result.column_names, cells)


def _damaged_gz(path, how):
    """A .gz of names cut short ("truncated") or with flipped bytes in its compressed stream ("corrupt")."""
    data = bytearray(gzip.compress("".join(f"id{i}\tgene{i}\n" for i in range(2000)).encode()))
    if how == "truncated":
        data = data[: len(data) // 2]
    else:
        data[30:60] = bytes(b ^ 0xFF for b in data[30:60])
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_damaged_gz_names_are_a_value_error_naming_the_file(tmp_path, counts, how):
    X = counts[0]
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    names = _damaged_gz(tmp_path / "names.txt.gz", how)
    with pytest.raises(ValueError, match=r"names\.txt\.gz: cannot read names: the \.gz file is truncated"):
        read_matrix(tmp_path / "m.npz", row_names=names)
    folder = tmp_path / "tenx"
    folder.mkdir()
    scipy.io.mmwrite(folder / "matrix.mtx", sp.coo_matrix(X))
    _damaged_gz(folder / "features.tsv.gz", how)
    with pytest.raises(ValueError, match=r"features\.tsv\.gz: cannot read names: the \.gz file is truncated"):
        read_matrix(folder)


def _write_gz(path, text):
    with gzip.open(path, "wt") as handle:
        handle.write(text)


def test_10x_folder_gz(tmp_path, counts):
    X, _genes, cells = counts
    folder = tmp_path / "filtered_feature_bc_matrix"
    folder.mkdir()
    scipy.io.mmwrite(folder / "matrix.mtx", sp.coo_matrix(X))  # 10x stores genes x cells
    with open(folder / "matrix.mtx", "rb") as src, gzip.open(folder / "matrix.mtx.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (folder / "matrix.mtx").unlink()
    symbols = ["A", "B", "A", "C", "D"]  # a repeated symbol is made unique
    _write_gz(
        folder / "features.tsv.gz",
        "".join(f"ENSG{i:05d}\t{s}\tGene Expression\n" for i, s in enumerate(symbols)),
    )
    _write_gz(folder / "barcodes.tsv.gz", "".join(f"{c}\n" for c in cells))
    with pytest.warns(UserWarning, match=r"features\.tsv\.gz: 1 repeated name\(s\) made unique by a suffix -1, "
                                         r"-2, \.\.\. in the results \(the second 'A' is 'A-1'\)"):
        result = read_matrix(folder)
    assert result.source_format == "10x"
    assert sp.isspmatrix_csr(result.X) and result.X.shape == (5, 4)
    np.testing.assert_array_equal(result.X.toarray(), X)
    np.testing.assert_array_equal(result.row_names, ["A", "B", "A-1", "C", "D"])
    np.testing.assert_array_equal(result.column_names, cells)


def test_10x_folder_plain_genes_tsv(tmp_path, counts):
    X, genes, cells = counts
    scipy.io.mmwrite(tmp_path / "matrix.mtx", sp.coo_matrix(X))
    (tmp_path / "genes.tsv").write_text("".join(f"id{i}\t{g}\n" for i, g in enumerate(genes)))
    (tmp_path / "barcodes.tsv").write_text("".join(f"{c}\n" for c in cells[:3]))  # one barcode short
    with pytest.raises(ValueError, match="barcodes.tsv: 3 names but matrix.mtx has 4 columns"):
        read_matrix(tmp_path)
    (tmp_path / "barcodes.tsv").write_text("".join(f"{c}\n" for c in cells))
    result = read_matrix(tmp_path)
    np.testing.assert_array_equal(result.row_names, genes)


def test_10x_folder_leaves_out_features_other_than_gene_expression(tmp_path, counts):
    # CITE-seq output: antibody counts beside the genes' in one matrix, told apart by features.tsv's third column
    X, genes, cells = counts
    scipy.io.mmwrite(tmp_path / "matrix.mtx", sp.coo_matrix(X))
    types = ["Antibody Capture", "Gene Expression", "Gene Expression", "CRISPR Guide Capture", "Gene Expression"]
    symbols = ["CD3", "A", "B", "sg1", "CD3"]  # an antibody named as a gene: left out, so no repeat to rename
    (tmp_path / "features.tsv").write_text("".join(f"id{i}\t{s}\t{t}\n" for i, (s, t) in enumerate(zip(symbols,
                                                                                                       types))))
    (tmp_path / "barcodes.tsv").write_text("".join(f"{c}\n" for c in cells))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = read_matrix(tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'features.tsv'}: 2 of 5 features are not \"Gene Expression\" (1 Antibody Capture, 1 CRISPR "
        "Guide Capture) and are left out, as scanpy.read_10x_mtx leaves them out; to bicluster them, give their "
        "rows as a .mtx file with --row-names"]
    np.testing.assert_array_equal(result.X.toarray(), X[[1, 2, 4]])
    np.testing.assert_array_equal(result.row_names, ["A", "B", "CD3"])
    np.testing.assert_array_equal(result.column_names, cells)
    # every feature of one type other than gene expression (peaks, say): all kept, without a warning
    (tmp_path / "features.tsv").write_text("".join(f"id{i}\t{g}\tPeaks\n" for i, g in enumerate(genes)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(read_matrix(tmp_path).X.toarray(), X)
    # a features file one line short is refused before anything is left out
    (tmp_path / "features.tsv").write_text("".join(f"id{i}\t{s}\t{t}\n" for i, (s, t) in enumerate(zip(symbols,
                                                                                                       types[:4]))))
    with pytest.raises(ValueError, match="features.tsv: 4 names but matrix.mtx has 5 rows"):
        read_matrix(tmp_path)


def test_10x_folder_without_names_files_warns_and_its_matrix_file_reads_as_the_folder(tmp_path, counts):
    X, genes, cells = counts
    scipy.io.mmwrite(tmp_path / "matrix.mtx", sp.coo_matrix(X))
    with pytest.warns(UserWarning, match=r"no features\.tsv\(\.gz\) or genes\.tsv\(\.gz\) and no "
                                         r"barcodes\.tsv\(\.gz\): its genes and cells are unnamed"):
        assert read_matrix(tmp_path).row_names is None
    (tmp_path / "features.tsv").write_text("".join(f"ENSG{i}\t{g}\tGene Expression\n" for i, g in enumerate(genes)))
    with pytest.warns(UserWarning, match=r"no barcodes\.tsv\(\.gz\): its cells are unnamed"):
        read_matrix(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_matrix(tmp_path, column_names=cells)  # named by the caller: nothing to warn of
        # a matrix.mtx beside a names file but no barcodes is no 10x folder's: a MatrixMarket file
        assert read_matrix(tmp_path / "matrix.mtx").source_format == "mtx"
    (tmp_path / "barcodes.tsv").write_text("".join(f"{c}\n" for c in cells))
    # the folder's matrix file, named as the input: the folder, names and all (a bare .mtx has none)
    result = read_matrix(tmp_path / "matrix.mtx")
    assert result.source_format == "10x"
    np.testing.assert_array_equal(result.row_names, genes)
    np.testing.assert_array_equal(result.column_names, cells)
    # a features file given as row names: the symbols, as the folder's reader takes them
    shutil.copy(tmp_path / "matrix.mtx", tmp_path / "alone.mtx")
    named = read_matrix(tmp_path / "alone.mtx", row_names=tmp_path / "features.tsv")
    assert named.source_format == "mtx"
    np.testing.assert_array_equal(named.row_names, genes)


def test_folder_without_matrix(tmp_path):
    with pytest.raises(ValueError, match="10x output"):
        read_matrix(tmp_path)


def test_npz_round_trip(tmp_path, counts):
    X, _, _ = counts
    sp.save_npz(tmp_path / "m.npz", sp.csc_matrix(X))
    result = read_matrix(tmp_path / "m.npz")
    assert sp.isspmatrix_csr(result.X) and result.source_format == "npz"
    np.testing.assert_array_equal(result.X.toarray(), X)
    np.savez(tmp_path / "dense.npz", X=X)
    with pytest.raises(ValueError, match=r"dense\.npz: not a scipy.sparse \.npz"):
        read_matrix(tmp_path / "dense.npz")
    # any other file: said to be no zip archive, not given NumPy's advice to load it as a pickle
    (tmp_path / "text.npz").write_text("gene,cell\n")
    with pytest.raises(ValueError, match=r"text\.npz: not a scipy.sparse \.npz file .*\(not a zip archive") as info:
        read_matrix(tmp_path / "text.npz")
    assert "pickle" not in str(info.value)


@pytest.mark.parametrize("name", ["m.mtx", "m.npz"])
def test_sparse_files_keep_duplicate_entries_for_the_count_check(tmp_path, name):
    """Duplicate entries are summed by the count check, in float64: not by the reader in the file's dtype (8-bit
    integers wrap around), and not before the check has seen a negative entry that the sum would hide."""
    def save(rows, cols, values):
        matrix = sp.coo_matrix((values, (rows, cols)), shape=(2, 3))
        if name.endswith(".mtx"):
            scipy.io.mmwrite(tmp_path / name, matrix)
        else:
            sp.save_npz(tmp_path / name, matrix)
        return read_matrix(tmp_path / name).X

    X = save([0, 0, 1], [1, 1, 2], np.array([200, 100, 7], dtype=np.uint8 if name.endswith(".npz") else np.int64))
    np.testing.assert_array_equal(check_matrix(X, counts=True).toarray(), [[0, 300, 0], [0, 0, 7]])
    X = save([0, 0, 1], [1, 1, 2], np.array([-1, 2, 7]))
    assert X.toarray()[0, 1] == 1  # the matrix the file holds
    with pytest.raises(ValueError, match=r"negative values.*\(0, 1\)"):
        check_matrix(X, counts=True)


def test_table_names_are_read_as_written(tmp_path):
    """Row and column names keep their text: no number, boolean or missing value read into them, no column
    label invented; repeated names are made unique alike on both sides."""
    values = np.arange(8).reshape(4, 2)
    rows, columns = ["001", "NA", "TRUE", "1.50"], ["", "x"]
    write_table_csv(tmp_path / "t.csv", values, rows, columns)
    with pytest.warns(UserWarning, match=r"column 2 of the header has no name: it is named '' in the results"):
        result = read_matrix(tmp_path / "t.csv")  # kept, and said: pandas would read it back as missing
    np.testing.assert_array_equal(result.X, values)
    assert result.row_names.tolist() == rows and result.column_names.tolist() == columns
    write_table_csv(tmp_path / "d.csv", values, ["a", "a", "b", "a"], ["x", "x"])
    with pytest.warns(UserWarning) as record:
        result = read_matrix(tmp_path / "d.csv")
    assert [str(w.message) for w in record] == [
        f"{tmp_path / 'd.csv'}, row names: 2 repeated name(s) made unique by a suffix -1, -2, ... in the results "
        "(the second 'a' is 'a-1')",
        f"{tmp_path / 'd.csv'}, column names: 1 repeated name(s) made unique by a suffix -1, -2, ... in the "
        "results (the second 'x' is 'x-1')"]
    assert result.row_names.tolist() == ["a", "a-1", "b", "a-2"] and result.column_names.tolist() == ["x", "x-1"]


def test_tables_are_written_with_unix_line_ends(tmp_path):
    # csv's default \r\n left a \r on every last field for cut, awk and grep
    write_table_csv(tmp_path / "t.csv", np.array([[1, 2], [3, 4]]), ["a", "b"], ["x", "y"])
    assert (tmp_path / "t.csv").read_bytes() == b",x,y\na,1,2\nb,3,4\n"


def test_a_header_one_name_short_after_an_empty_first_field_is_refused_not_shifted(tmp_path):
    """An empty first field names the row names' column; a header that has it and still lacks a field is missing
    a column's name, and the names read from it would all move by one. Empty row names are kept and said."""
    (tmp_path / "short.csv").write_text(",a,b\nr1,1,2,3\nr2,4,5,6\n")
    with pytest.raises(ValueError, match=r"short\.csv: the header has 3 fields, the first of them empty .* and the "
                                         r"lines below it 4: a column's name is missing"):
        read_matrix(tmp_path / "short.csv")
    (tmp_path / "r.csv").write_text("a,b,c\nr1,1,2,3\nr2,4,5,6\n")  # R's write.table: no empty first field
    assert read_matrix(tmp_path / "r.csv").column_names.tolist() == ["a", "b", "c"]
    (tmp_path / "trailing.csv").write_text(",a,b,c\nr1,1,2,3,\nr2,4,5,6,\n")
    with pytest.raises(ValueError, match="end with a separator the header does not"):
        read_matrix(tmp_path / "trailing.csv")
    (tmp_path / "row.csv").write_text(",a,b\n,1,2\nr2,4,5\n")
    with pytest.warns(UserWarning, match=r"row\.csv: line 2 holds no row name: it is named ''"):
        assert read_matrix(tmp_path / "row.csv").row_names.tolist() == ["", "r2"]


def test_a_first_line_of_numbers_only_is_refused_not_guessed(tmp_path, counts):
    """numpy's savetxt writes counts without a header; pandas writes numeric column labels (years) as one: the
    same first line. Either guess would silently lose a line of counts or read names as counts."""
    X, _, _ = counts
    np.savetxt(tmp_path / "m.csv", X, delimiter=",", fmt="%d")
    pd.DataFrame(X, columns=2019 + np.arange(X.shape[1])).to_csv(tmp_path / "years.csv", index=False)
    for name in ("m.csv", "years.csv"):
        with pytest.raises(ValueError, match=rf"{name}: the first line holds numbers only: column names, or a "
                                             "first line of counts without a header\\? Add a header line"):
            read_matrix(tmp_path / name)


def test_write_table_csv_writes_all_or_nothing(tmp_path):
    class Unprintable:
        def __str__(self):
            raise RuntimeError("no text")

    (tmp_path / "t.csv").write_text("earlier\n")
    with pytest.raises(RuntimeError, match="no text"):
        write_table_csv(tmp_path / "t.csv", np.ones((3, 2)), ["a", "b", Unprintable()])
    assert (tmp_path / "t.csv").read_text() == "earlier\n" and os.listdir(tmp_path) == ["t.csv"]


def test_h5ad_orientation_and_layers(tmp_path, counts):
    X, genes, cells = counts
    # AnnData is cells x genes
    adata = anndata.AnnData(
        X=sp.csr_matrix(X.T.astype(np.float32)),
        obs=pd.DataFrame(index=cells),
        var=pd.DataFrame(index=genes),
    )
    adata.layers["doubled"] = sp.csr_matrix(2 * X.T)
    adata.write_h5ad(tmp_path / "a.h5ad")
    result = read_matrix(tmp_path / "a.h5ad")
    assert result.source_format == "h5ad"
    assert sp.isspmatrix_csr(result.X) and result.X.shape == (5, 4)
    np.testing.assert_array_equal(result.X.toarray(), X)
    np.testing.assert_array_equal(result.row_names, genes)
    np.testing.assert_array_equal(result.column_names, cells)
    np.testing.assert_array_equal(read_matrix(tmp_path / "a.h5ad", layer="doubled").X.toarray(), 2 * X)
    with pytest.raises(ValueError, match="no layer 'absent'; available: X .*doubled"):
        read_matrix(tmp_path / "a.h5ad", layer="absent")


def test_h5ad_dense_and_log_normalised_with_raw(tmp_path, counts):
    X, genes, cells = counts
    adata = anndata.AnnData(
        X=X.T.astype(np.float64), obs=pd.DataFrame(index=cells), var=pd.DataFrame(index=genes)
    )
    adata.raw = adata.copy()
    adata.X = np.log1p(adata.X)
    adata.write_h5ad(tmp_path / "log.h5ad")
    with pytest.raises(
        ValueError, match=r"log\.h5ad: X holds non-integer values .*\.raw exists: try the layer raw \(layer='raw', "
                          r"--layer raw\)"
    ):
        read_matrix(tmp_path / "log.h5ad")
    raw = read_matrix(tmp_path / "log.h5ad", layer="raw")
    assert isinstance(raw.X, np.ndarray) and raw.X.flags.c_contiguous
    np.testing.assert_array_equal(raw.X, X)
    np.testing.assert_array_equal(raw.row_names, genes)


def test_h5ad_repeated_names_are_made_unique(tmp_path, counts):
    # as the 10x reader makes them: anndata only warns, and results named g, g would not say which is which
    X, _, _ = counts
    with pytest.warns(UserWarning, match="names are not unique"):  # anndata's
        anndata.AnnData(X=X.T.astype(np.float64), obs=pd.DataFrame(index=["c", "c", "d", "c"]),
                        var=pd.DataFrame(index=["g", "h", "g", "g", "k"])).write_h5ad(tmp_path / "dup.h5ad")
    with pytest.warns(UserWarning) as record:
        result = read_matrix(tmp_path / "dup.h5ad")
    assert [str(w.message).split("dup.h5ad, ")[1] for w in record] == [
        "gene names (var_names): 2 repeated name(s) made unique by a suffix -1, -2, ... in the results (the second "
        "'g' is 'g-1')",
        "cell names (obs_names): 2 repeated name(s) made unique by a suffix -1, -2, ... in the results (the second "
        "'c' is 'c-1')"]
    assert result.row_names.tolist() == ["g", "h", "g-1", "g-2", "k"]
    assert result.column_names.tolist() == ["c", "c-1", "d", "c-2"]
    # a suffixed name that is a name already is skipped, as anndata skips it
    assert conjoined.io.unique_names(["g", "g", "g-1", "h", "g"]).tolist() == ["g", "g-2", "g-1", "h", "g-3"]


def test_h5ad_nan_is_left_to_the_matrix_check(tmp_path, counts):
    """NaN is not a sign of normalised data: read_matrix returns it, for the matrix check to report."""
    X, genes, cells = counts
    values = X.T.astype(np.float64)
    values[1, 2] = np.nan
    values[0, 3] = np.inf
    anndata.AnnData(X=values, obs=pd.DataFrame(index=cells), var=pd.DataFrame(index=genes)).write_h5ad(
        tmp_path / "nan.h5ad"
    )
    result = read_matrix(tmp_path / "nan.h5ad")
    assert np.isnan(result.X[2, 1]) and np.isinf(result.X[3, 0])


def test_mat_variable_selection(tmp_path, counts):
    X, _, _ = counts
    scipy.io.savemat(tmp_path / "one.mat", {"counts": sp.csc_matrix(X), "labels": np.arange(4)[None, :]})
    result = read_matrix(tmp_path / "one.mat")  # the 1 x 4 vector is not a candidate
    assert sp.isspmatrix_csr(result.X) and result.source_format == "mat" and result.variable == "counts"
    np.testing.assert_array_equal(result.X.toarray(), X)

    scipy.io.savemat(tmp_path / "two.mat", {"counts": X, "other": X + 1})
    with pytest.raises(ValueError, match=r"two\.mat: 2 matrix variables \(counts, other\); choose one"):
        read_matrix(tmp_path / "two.mat")
    np.testing.assert_array_equal(read_matrix(tmp_path / "two.mat", variable="other").X, X + 1)
    with pytest.raises(ValueError, match="no variable 'missing'; matrix variables: counts, other"):
        read_matrix(tmp_path / "two.mat", variable="missing")
    with pytest.raises(ValueError, match="'labels' is a 1 x 4 array, too narrow to bicluster"):
        read_matrix(tmp_path / "one.mat", variable="labels")

    scipy.io.savemat(tmp_path / "text.mat", {"counts": X, "note": "hello"})
    with pytest.raises(ValueError, match="'note' is not a 2-d numeric matrix"):
        read_matrix(tmp_path / "text.mat", variable="note")


def test_mat_names_come_from_the_string_vectors_that_fit(tmp_path, counts):
    X, genes, _ = counts
    cells = ["a", "bb", "c c", "dddd"]
    contents = {
        "counts": X,
        "genes": np.array(list(genes), dtype=object),  # a cell array of strings
        "cells": np.array(cells),  # a char matrix, rows padded with spaces
        "title": "five genes, four cells",
        "groups": np.arange(4)[None, :],
    }
    scipy.io.savemat(tmp_path / "named.mat", contents)
    result = read_matrix(tmp_path / "named.mat")
    assert result.row_names.tolist() == list(genes) and result.column_names.tolist() == cells
    renamed = read_matrix(tmp_path / "named.mat", row_names=[f"g{i}" for i in range(5)])
    assert renamed.row_names.tolist() == [f"g{i}" for i in range(5)]
    assert renamed.column_names.tolist() == cells

    # two string vectors fit the rows: no guess; the columns' one still names them
    scipy.io.savemat(tmp_path / "two.mat", {**contents, "aliases": np.array(list(genes), dtype=object)})
    with pytest.warns(UserWarning, match=r"two\.mat: list\(s\) of names '(genes|aliases)' \(5\), '(genes|aliases)' "
                                         r"\(5\) left unused"):
        result = read_matrix(tmp_path / "two.mat")
    assert result.row_names is None and result.column_names.tolist() == cells

    # a square matrix: rows and columns cannot be told apart
    scipy.io.savemat(tmp_path / "square.mat", {"counts": X[:4], "genes": np.array(list(genes[:4]), dtype=object)})
    with pytest.warns(UserWarning, match="the matrix is square: which side they name cannot be told"):
        result = read_matrix(tmp_path / "square.mat")
    assert result.row_names is None and result.column_names is None

    # a list of neither length (a word dropped): said, not silently left out
    scipy.io.savemat(tmp_path / "short.mat", {"counts": X, "genes": np.array(list(genes[:3]), dtype=object)})
    with pytest.warns(UserWarning, match=r"short\.mat: list\(s\) of names 'genes' \(3\) left unused \(the matrix has 5 "
                                         r"rows and 4 columns"):
        result = read_matrix(tmp_path / "short.mat")
    assert result.row_names is None and result.column_names is None


def test_mat_names_of_the_newsgroups_file():
    if not (DATA / "20news_w100.mat").is_file():
        pytest.skip("20news_w100.mat not found in ../shared/data")
    result = read_matrix(DATA / "20news_w100.mat")  # wordlist (100) names the words; no vector of 16,242 strings
    assert result.row_names[:3].tolist() == ["aids", "baseball", "bible"] and result.column_names is None


def test_missing_unknown_and_garbled_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"absent\.csv: no such file"):
        read_matrix(tmp_path / "absent.csv")
    (tmp_path / "m.xlsx").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"m\.xlsx: unknown file type; supported: \.csv"):
        read_matrix(tmp_path / "m.xlsx")
    for name, message in [
        ("g.mtx", "cannot parse as MatrixMarket"),
        ("g.npz", "not a scipy.sparse .npz"),
        ("g.h5ad", "cannot read as AnnData"),
        ("g.mat", "cannot parse as a MATLAB file"),
        # HDF5, as MATLAB v7.3 writes (after its 512-byte header) or bare
        ("h.mat", "an HDF5 file, as MATLAB v7.3 writes them: not supported; save with -v7"),
        ("b.mat", "an HDF5 file, as MATLAB v7.3 writes them: not supported; save with -v7"),
    ]:
        junk = {"h.mat": b"MATLAB 7.3 MAT-file".ljust(512) + b"\x89HDF\r\n\x1a\n" + bytes(64),
                "b.mat": b"\x89HDF\r\n\x1a\n" + bytes(600)}.get(name, bytes(range(256)) * 4)
        (tmp_path / name).write_bytes(junk)
        with pytest.raises(
            ValueError, match=name.replace(".", r"\.") + ": " + message.replace(".", r"\.")
        ) as info:
            read_matrix(tmp_path / name)
        assert "\n" not in str(info.value)


def test_option_for_the_wrong_format(tmp_path, counts):
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(counts[0]))
    with pytest.raises(ValueError, match=r"layer= \(--layer\) applies to \.h5ad files only"):
        read_matrix(tmp_path / "m.npz", layer="counts")


def test_atomic_output_dir_success_and_refusal(tmp_path):
    out = tmp_path / "results"
    with atomic_output_dir(out) as staging:
        assert staging.parent == tmp_path and not out.exists()
        write_json(staging / "summary.json", {"k": np.int64(3), "theta": np.array([[0.5, 0.5]])})
    assert json.loads((out / "summary.json").read_text()) == {"k": 3, "theta": [[0.5, 0.5]]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]

    with pytest.raises(FileExistsError, match="results already exists"), atomic_output_dir(out):
        pytest.fail("the block must not run")
    assert (out / "summary.json").exists()


def test_atomic_output_dir_names_the_folders_a_killed_run_left(tmp_path):
    """A run killed while writing leaves its hidden staging folder; the next run writing there says so and leaves
    it alone (another run may still be writing into it)."""
    killed = tmp_path / ".results.partial-0123456789ab"
    killed.mkdir()
    (tmp_path / ".other.partial-0123456789ab").mkdir()  # another output's
    (tmp_path / ".results.partial-notours").mkdir()
    with pytest.warns(conjoined.io.LeftoverWarning, match=r"1 hidden folder\(s\) left by an earlier run writing "
                      r"results .*\(\.results\.partial-0123456789ab\); remove them"):
        with atomic_output_dir(tmp_path / "results") as staging:
            write_json(staging / "a.json", {})
    assert killed.is_dir() and (tmp_path / "results" / "a.json").is_file()
    with warnings.catch_warnings():  # raised as an error: nothing made, not even a staging folder
        warnings.simplefilter("error", conjoined.io.LeftoverWarning)
        with pytest.raises(conjoined.io.LeftoverWarning), atomic_output_dir(tmp_path / "results", force=True):
            pytest.fail("the block must not run")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".other.partial-0123456789ab", ".results.partial-0123456789ab", ".results.partial-notours", "results"])


def test_atomic_output_dir_failure_leaves_nothing(tmp_path):
    out = tmp_path / "deep" / "er" / "results"
    with pytest.raises(RuntimeError, match="boom"), atomic_output_dir(out) as staging:
        (staging / "half.csv").write_text("1,2\n")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_errors_while_writing_results_are_said_of_the_output_not_of_the_hidden_folder(tmp_path):
    out = tmp_path / "deep" / "results"
    # a write to a full disk names no file; a failed open names the hidden folder's
    for error, said in [(OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
                        (PermissionError(errno.EACCES, "Permission denied", "STAGING/theta.csv"),
                         r"Permission denied \(writing theta.csv\)")]:
        with pytest.raises(type(error), match=rf"^cannot write the results to .*deep/results: {said}$") as caught, \
                atomic_output_dir(out) as staging, writing_results(staging, out):
            if error.filename:
                error.filename = str(staging / "theta.csv")
            raise error
        assert caught.value.errno == error.errno and caught.value.__cause__ is error
        assert list(tmp_path.iterdir()) == []
    # an error about a file elsewhere (a checkpoint, the input) is left as it is
    elsewhere = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "fit.npz"))
    with pytest.raises(OSError) as caught, atomic_output_dir(out) as staging, writing_results(staging, out):
        raise elsewhere
    assert caught.value is elsewhere


def test_atomic_output_dir_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "a file").write_text("mine")
    out = tmp_path / "a file" / "results"
    with pytest.raises(OSError, match=r"cannot write the results to .*a file/results: ") as caught, \
            atomic_output_dir(out):
        pass
    assert caught.value.errno is not None and os.listdir(tmp_path) == ["a file"]


def test_atomic_output_dir_force_replaces_only_after_success(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_output_dir(out, force=True) as staging:
        (staging / "new.txt").write_text("new")
        raise RuntimeError("fail")
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]
    with atomic_output_dir(out, force=True) as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def _only_old_files(path):
    if path.exists() and any(p.name != "old.txt" for p in path.iterdir()):
        raise ValueError(f"{path} holds files of the user's")


@pytest.mark.parametrize("force", [True, False])
def test_atomic_output_dir_keeps_both_when_the_folder_changes_during_the_block(tmp_path, force):
    out = tmp_path / "results"
    (tmp_path / "results.new").mkdir()  # taken: the results go to the next free name
    if force:
        out.mkdir()
        (out / "old.txt").write_text("old")
    with pytest.raises(FileExistsError) as raised, atomic_output_dir(out, force=force,
                                                                    replaceable=_only_old_files) as staging:
        (staging / "new.txt").write_text("new")
        out.mkdir(exist_ok=True)
        (out / "mine.txt").write_text("the user's")  # written while the results were computed
    kept = tmp_path / "results.new-2"
    reason = "holds files of the user's" if force else "was created while the results were computed"
    assert str(raised.value) == f"{out} {reason}; {out} is left as it is, and the results are in {kept}"
    assert (out / "mine.txt").read_text() == "the user's"
    assert [p.name for p in kept.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "results.new", "results.new-2"]


def test_atomic_output_dir_passes_over_a_name_taken_during_the_move(tmp_path, monkeypatch):
    out = tmp_path / "results"
    replace = os.replace

    def taken_meanwhile(source, target):
        if Path(target).name == "results.new":  # another run takes it between the look and the move
            (Path(target) / "other.txt").parent.mkdir()
            (Path(target) / "other.txt").write_text("another run's")
        return replace(source, target)

    monkeypatch.setattr(conjoined.io.os, "replace", taken_meanwhile)
    with pytest.raises(FileExistsError, match="the results are in .*results.new-2$"), atomic_output_dir(out) as staging:
        (staging / "new.txt").write_text("new")
        out.mkdir()
    assert [p.name for p in (tmp_path / "results.new").iterdir()] == ["other.txt"]
    assert [p.name for p in (tmp_path / "results.new-2").iterdir()] == ["new.txt"]


def test_atomic_output_dir_keeps_the_results_where_they_are_when_they_cannot_move(tmp_path, monkeypatch):
    out = tmp_path / "results"
    replace = os.replace

    def refused(source, target):
        if Path(target).name.startswith("results.new"):
            raise PermissionError(13, "Permission denied")
        return replace(source, target)

    monkeypatch.setattr(conjoined.io.os, "replace", refused)
    with pytest.raises(FileExistsError) as raised, atomic_output_dir(out) as staging:
        (staging / "new.txt").write_text("new")
        out.mkdir()
    assert str(raised.value).endswith(f"the results are in {staging}")
    assert (staging / "new.txt").read_text() == "new"


def test_atomic_output_dir_asks_replaceable_before_the_block(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "mine.txt").write_text("the user's")
    with (pytest.raises(ValueError, match="holds files of the user's"),
          atomic_output_dir(out, force=True, replaceable=_only_old_files)):
        raise AssertionError("the block must not run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.parametrize(
    "outdir, keep, message",
    [
        ("in.csv", ["in.csv"], "must not be, or hold, the input in.csv"),
        ("names", ["in.csv", "names/rows.txt"], "must not be, or hold, the input names/rows.txt"),
        ("names", ["alias.csv"], "must not be, or hold, the input alias.csv"),  # a symlink into names
        ("names", ["names/link.csv"], "must not be, or hold, the input names/link.csv"),  # a symlink in names
        ("names/out", ["names"], "must not be inside the input folder names"),  # a 10x folder, say
        (".", [], "must not be the current directory"),
        ("", [], "the output directory name is empty"),
    ],
)
def test_atomic_output_dir_refuses_to_replace_what_it_must_keep(tmp_path, monkeypatch, outdir, keep, message):
    (tmp_path / "in.csv").write_text("gene,a\n")
    (tmp_path / "names").mkdir()
    (tmp_path / "names" / "rows.txt").write_text("gene\n")
    (tmp_path / "names" / "real.csv").write_text("gene,a\n")
    os.symlink(tmp_path / "names" / "real.csv", tmp_path / "alias.csv")
    os.symlink(tmp_path / "in.csv", tmp_path / "names" / "link.csv")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message), atomic_output_dir(outdir, force=True, keep=keep):
        pytest.fail("the block must not run")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_atomic_output_dir_may_replace_a_symlink_to_the_folder_of_an_input(tmp_path):
    """Replacing a symlink moves the link only: the folder it points to, and the input there, stay."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.csv").write_text("gene,a\n")
    os.symlink(tmp_path / "data", tmp_path / "results")
    with atomic_output_dir(tmp_path / "results", force=True, keep=[tmp_path / "data" / "in.csv"]) as staging:
        (staging / "new.txt").write_text("new")
    assert (tmp_path / "data" / "in.csv").read_text() == "gene,a\n"
    assert not (tmp_path / "results").is_symlink() and (tmp_path / "results" / "new.txt").exists()


@pytest.mark.parametrize(
    "obj, error, message",
    [
        ({"strength": float("nan")}, ValueError, r"out\.json: cannot write as JSON \(Out of range float"),
        ({"strength": np.array([1.0, np.inf])}, ValueError, r"out\.json: cannot write as JSON"),
        ({"model": object()}, TypeError, "object is not JSON serialisable"),
    ],
)
def test_write_json_failure_keeps_the_previous_file(tmp_path, obj, error, message):
    path = tmp_path / "out.json"
    write_json(path, {"previous": [1, 2]})
    with pytest.raises(error, match=message):
        write_json(path, obj)
    assert json.loads(path.read_text()) == {"previous": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_atomic_output_file(tmp_path):
    path = tmp_path / "picture.png"
    path.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), atomic_output_file(path) as temporary:
        assert temporary.parent == tmp_path and temporary.suffix == ".png"
        temporary.write_bytes(b"half")
        raise KeyboardInterrupt
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["picture.png"]
    with atomic_output_file(path) as temporary:
        temporary.write_bytes(b"new")
    assert path.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["picture.png"]
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(IsADirectoryError, match=r"folder\.png is a directory"), atomic_output_file(
        tmp_path / "folder.png"
    ):
        pytest.fail("the block must not run")
    with pytest.raises(FileNotFoundError, match=r"x\.json: its folder .*nodir does not exist"):
        write_json(tmp_path / "nodir" / "x.json", {})


def test_atomic_output_files_replace_all_together_when_a_signal_arrives_in_between(tmp_path, monkeypatch):
    pair = [tmp_path / "pair.csv", tmp_path / "pair.truth.json"]
    for path in pair:
        path.write_text("old")
    replace = os.replace

    def replace_then_signal(source, target):
        replace(source, target)
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C right after the first file is in place

    monkeypatch.setattr(os, "replace", replace_then_signal)
    with pytest.raises(KeyboardInterrupt), atomic_output_files(pair) as temporaries:
        for temporary in temporaries:
            temporary.write_text("new")
    monkeypatch.undo()
    assert [path.read_text() for path in pair] == ["new", "new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pair.csv", "pair.truth.json"]


def test_atomic_output_files_put_the_old_files_back_when_one_cannot_be_replaced(tmp_path, monkeypatch):
    pair = [tmp_path / "pair.csv", tmp_path / "pair.truth.json"]
    pair[0].write_text("old")  # the truth file is new
    replace = os.replace

    def refused_for_the_truth(source, target):
        if Path(target) == pair[1]:
            raise PermissionError(errno.EACCES, "Permission denied", str(target))
        replace(source, target)

    monkeypatch.setattr(os, "replace", refused_for_the_truth)
    with pytest.raises(PermissionError), atomic_output_files(pair) as temporaries:
        for temporary in temporaries:
            temporary.write_text("new")
    monkeypatch.undo()
    assert pair[0].read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["pair.csv"]

    def refused(source, target):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    with pytest.raises(PermissionError), atomic_output_file(pair[0]) as temporary:  # one file: left as it was
        temporary.write_text("new")
        monkeypatch.setattr(os, "replace", refused)
    monkeypatch.undo()
    assert pair[0].read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["pair.csv"]


def test_atomic_output_file_errors_name_the_file_not_its_temporary_name(tmp_path):
    # as writing into a read-only folder says it: of the hidden temporary file
    with pytest.raises(PermissionError) as caught, atomic_output_file(tmp_path / "p.csv") as temporary:
        raise PermissionError(errno.EACCES, "Permission denied", str(temporary))
    assert str(caught.value) == f"[Errno 13] Permission denied: '{tmp_path / 'p.csv'}'"
    assert caught.value.errno == errno.EACCES and list(tmp_path.iterdir()) == []
    # a write to a full disk names no file: said of the files being written
    with pytest.raises(OSError) as caught, atomic_output_file(tmp_path / "p.csv"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert str(caught.value) == f"cannot write {tmp_path / 'p.csv'}: No space left on device"
    assert caught.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
    pair = [tmp_path / "m.csv", tmp_path / "m.json"]
    with pytest.raises(OSError, match=f"^cannot write {pair[0]} and {pair[1]}: No space left on device$"), \
            atomic_output_files(pair):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(OSError, match="^no errno$"), atomic_output_file(tmp_path / "p.csv"):
        raise OSError("no errno")  # not a system call's error: as it was


def test_a_read_only_file_system_is_said_of_the_file_not_of_the_clean_up(tmp_path, monkeypatch):
    """There, removing the temporary name, which was never created, fails too (EROFS, not ENOENT); that error
    replaced the one said of the user's file, and named the hidden temporary file."""
    def read_only(self, missing_ok=False):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(OSError) as caught, atomic_output_file(tmp_path / "p.csv") as temporary:
        raise OSError(errno.EROFS, "Read-only file system", str(temporary))
    assert str(caught.value) == f"[Errno 30] Read-only file system: '{tmp_path / 'p.csv'}'"


def test_atomic_output_file_writes_through_a_symlink_and_refuses_what_is_not_a_file(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old")
    (tmp_path / "link.csv").symlink_to(target)
    with atomic_output_file(tmp_path / "link.csv") as temporary:
        temporary.write_text("new")
    assert (tmp_path / "link.csv").is_symlink() and target.read_text() == "new"
    os.mkfifo(tmp_path / "pipe.csv")  # as /dev/stdout leads to: replaced, it would be a file nobody reads
    (tmp_path / "stdout").symlink_to(tmp_path / "pipe.csv")
    for path in ("pipe.csv", "stdout"):
        with pytest.raises(ValueError, match=f"{path} is not a regular file"), atomic_output_file(tmp_path / path):
            pytest.fail("the block must not run")
    (tmp_path / "folder").mkdir()
    (tmp_path / "to_folder").symlink_to(tmp_path / "folder")
    with pytest.raises(IsADirectoryError, match="to_folder is a directory"), atomic_output_file(
            tmp_path / "to_folder"):
        pytest.fail("the block must not run")
    assert (tmp_path / "to_folder").is_symlink() and (tmp_path / "pipe.csv").is_fifo()


def test_check_not_input(tmp_path):
    folder = tmp_path / "tenx"
    folder.mkdir()
    with pytest.raises(ValueError, match="matrix.mtx is inside the input .*tenx: choose another output file"):
        check_not_input(folder / "matrix.mtx", [tmp_path / "a.csv", folder])
    (tmp_path / "a.csv").write_text("")
    (tmp_path / "b.csv").symlink_to(tmp_path / "a.csv")
    with pytest.raises(ValueError, match="b.csv is the input .*a.csv"):
        check_not_input(tmp_path / "b.csv", [tmp_path / "a.csv"])
    check_not_input(tmp_path / "out.csv", [folder, tmp_path / "a.csv"])  # beside the inputs


def test_write_table_csv_round_trip(tmp_path):
    values = np.array([[0.25, 1.0, 3.5], [1e-12, 2.0, 0.0]])
    write_table_csv(tmp_path / "t.csv", values, ["a", "b"], ["x", "y", "z"])
    result = read_matrix(tmp_path / "t.csv")
    np.testing.assert_array_equal(result.X, values)
    np.testing.assert_array_equal(result.row_names, ["a", "b"])
    np.testing.assert_array_equal(result.column_names, ["x", "y", "z"])
    write_table_csv(tmp_path / "b.csv", np.array([[True, False]]))
    assert (tmp_path / "b.csv").read_text().splitlines() == [",0,1", "0,1,0"]
    with pytest.raises(ValueError, match="row names"):
        write_table_csv(tmp_path / "c.csv", values, ["a"], ["x", "y", "z"])
