"""A feature CSV with pandas' row index (``DataFrame.to_csv()`` with its default
``index=True``) is refused, not read with the index as a feature: on data sorted by
class the index carries the labels into the clustering."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine

from lswmkc_dask import load_features, open_store
from lswmkc_dask.cli import main
from lswmkc_dask.errors import KernelInputError


def _wine():
    data = load_wine()
    return data.data, data.target, list(data.feature_names)


def _to_csv(path, x, y, names, index=True, header=True, index_name="", order=None):
    """The bytes ``pd.DataFrame(x, columns=names).assign(target=y).to_csv(path, index=index,
    header=header)`` writes (pandas is not a dependency: by hand, as pandas formats them:
    ``str`` of each float, an empty header cell above the unnamed index). ``order``: the
    row index values (a frame sorted by some column keeps its old index)."""
    idx = np.arange(x.shape[0]) if order is None else np.asarray(order)
    lines = []
    if header:
        lines.append(",".join(([index_name] if index else []) + names + ["target"]))
    for i, row, label in zip(idx, x, y):
        lines.append(",".join(([str(int(i))] if index else []) + [str(float(v)) for v in row] + [str(int(label))]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_pandas_default_to_csv_is_refused_and_index_columns_reads_it(tmp_path):
    x, y, names = _wine()  # 178 samples sorted by class
    path = _to_csv(tmp_path / "wine.csv", x, y, names)
    assert path.read_text().startswith(",alcohol,malic_acid,") and "\n0,14.23,1.71," in path.read_text()
    with pytest.raises(KernelInputError) as got:
        load_features(path, label_column=-1)
    msg = str(got.value)
    assert f"features in {path}: column 1 (header '': the row numbers 0..177) is a row index" in msg, msg
    assert "to_csv(path, index=False)" in msg and "index_columns=1 (--index-columns 1) to drop it" in msg, msg
    assert "labels" in msg  # says why it matters
    got_x, got_y = load_features(path, label_column=-1, index_columns=1)
    np.testing.assert_array_equal(got_x, x)
    np.testing.assert_array_equal(got_y, y)
    kept, _ = load_features(path, label_column=-1, index_columns=0)  # said to be a feature: kept
    assert kept.shape == (178, 14)
    np.testing.assert_array_equal(kept[:, 0], np.arange(178))
    # Written as advised (index=False): read as it is.
    got_x, _ = load_features(_to_csv(tmp_path / "plain.csv", x, y, names, index=False), label_column=-1)
    np.testing.assert_array_equal(got_x, x)


def test_other_row_index_signatures(tmp_path):
    x, y, names = _wine()
    n = x.shape[0]
    # Sorted by a column before writing: the index is a permutation under pandas' empty cell.
    order = np.random.default_rng(0).permutation(n)
    path = _to_csv(tmp_path / "perm.csv", x[order], y[order], names, order=order)
    with pytest.raises(KernelInputError, match=r"column 1 \(header '': distinct integers, one per row\)"):
        load_features(path, label_column=-1)
    # Read back and written again by pandas: two index columns, "" and "Unnamed: 0".
    path = tmp_path / "twice.csv"
    rows = [",Unnamed: 0," + ",".join(names) + ",target"]
    rows += [f"{i},{i}," + ",".join(str(float(v)) for v in x[i]) + f",{y[i]}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(KernelInputError) as got:
        load_features(path, label_column=-1)
    msg = str(got.value)
    assert ("column 1 (header '': the row numbers 0..177) and column 2 (header 'Unnamed: 0': the row numbers 0..177) "
            "are each a row index") in msg, msg
    assert "read_csv(path, index_col=0), then to_csv(path, index=False)" in msg and "index_columns=2" in msg, msg
    np.testing.assert_array_equal(load_features(path, label_column=-1, index_columns=2)[0], x)
    # No header (to_csv(header=False)), or numbered from 1 under any name: a row number all the same.
    path = _to_csv(tmp_path / "nohead.csv", x, y, names, header=False)
    with pytest.raises(KernelInputError, match=r"column 1 \(no header: the row numbers 0\.\.177\)"):
        load_features(path, label_column=-1)
    path = _to_csv(tmp_path / "id.csv", x, y, names, index_name="id", order=np.arange(1, n + 1))
    with pytest.raises(KernelInputError, match=r"column 1 \(header 'id': the row numbers 1\.\.178\)"):
        load_features(path, label_column=-1)
    # A named column of integers that are not the row numbers is a feature (wine's proline is one).
    path = _to_csv(tmp_path / "named.csv", x, y, names, index_name="batch", order=np.arange(n) % 3)
    assert load_features(path, label_column=-1)[0].shape == (n, 14)
    # Without a label column, and the label in the first column: the same rules.
    path = tmp_path / "nolabel.csv"
    path.write_text(",a,b\n" + "".join(f"{i},{i * 0.5 + 1},{i % 7}\n" for i in range(20)))
    with pytest.raises(KernelInputError, match=r"column 1 \(header ''"):
        load_features(path)
    path = tmp_path / "labelfirst.csv"
    path.write_text("label,a,b\n" + "".join(f"{i % 2},{i * 0.5 + 1},{i % 7}\n" for i in range(20)))
    assert load_features(path, label_column=0)[0].shape == (20, 2)
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(KernelInputError, match="index_columns must be an integer >= 0"):
            load_features(path, index_columns=bad)
    with pytest.raises(KernelInputError, match=r"label column \(column 1 of the file\) is one of the first 1 col"):
        load_features(path, label_column=0, index_columns=1)
    with pytest.raises(KernelInputError, match="index_columns=3 drops all its 3 feature columns: no features left"):
        load_features(tmp_path / "nolabel.csv", index_columns=3)


def test_cli_refuses_pandas_index_and_reads_it_with_index_columns(tmp_path, capsys):
    x, y, names = _wine()
    path = _to_csv(tmp_path / "wine.csv", x, y, names)
    out = tmp_path / "wine.zarr"
    assert main(["prepare", "--features", str(path), "--label-column", "-1", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is a row index" in err and "pass --index-columns 1 to drop it" in err, err
    assert "index_columns=" not in err  # the command line names its flags
    assert not out.exists()
    assert main(["prepare", "--features", str(path), "--label-column", "-1", "--index-columns", "1", str(out)]) == 0
    capsys.readouterr()
    store = open_store(out)
    assert store.n_samples == 178
    np.testing.assert_array_equal(store.labels, y)


def test_shuffled_index_without_header_is_refused(tmp_path, capsys):
    """``df.sample(frac=1).to_csv(path, header=False)``: no header, the shuffled row index
    first (``17,14.23,...``): a permutation of the row numbers, refused as the ordered
    index is; of a frame sorted by class it carries the labels."""
    x, y, names = _wine()
    n = x.shape[0]
    order = np.random.default_rng(1).permutation(n)
    path = _to_csv(tmp_path / "shuffled.csv", x[order], y[order], names, header=False, order=order)
    assert path.read_text().startswith(f"{order[0]},{x[order[0], 0]},")
    with pytest.raises(KernelInputError) as got:
        load_features(path, label_column=-1)
    msg = str(got.value)
    assert f"features in {path}: column 1 (no header: the row numbers 0..177 in another order) is a row index" in msg
    assert "index_columns=1 (--index-columns 1) to drop it" in msg and "index_columns=0 (--index-columns 0) keeps it " \
        "as a feature" in msg, msg
    got_x, got_y = load_features(path, label_column=-1, index_columns=1)
    np.testing.assert_array_equal(got_x, x[order])
    np.testing.assert_array_equal(got_y, y[order])
    assert load_features(path, label_column=-1, index_columns=0)[0].shape == (n, 14)  # said to be a feature
    # Features only (pd.DataFrame(x).sample(frac=1).to_csv(path, header=False)), index from 1, and a named header.
    plain = tmp_path / "plain.csv"
    plain.write_text("".join(f"{i + 1}," + ",".join(str(float(v)) for v in x[i]) + "\n" for i in order))
    with pytest.raises(KernelInputError, match=r"column 1 \(no header: the row numbers 1\.\.178 in another order\)"):
        load_features(plain)
    named = tmp_path / "named.csv"
    named.write_text("id," + ",".join(names) + "\n" + plain.read_text())
    with pytest.raises(KernelInputError, match=r"column 1 \(header 'id': the row numbers 1\.\.178 in another order\)"):
        load_features(named)
    # The command: refused naming the file and the flag, nothing written; --index-columns 1 reads it.
    out = tmp_path / "s.zarr"
    assert main(["prepare", "--features", str(path), "--label-column", "-1", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: column 1 (no header: the row numbers 0..177 in another order) is a row index" in err, err
    assert "pass --index-columns 1 to drop it" in err and not out.exists()
    assert main(["prepare", "--features", str(path), "--label-column", "-1", "--index-columns", "1", str(out)]) == 0
    np.testing.assert_array_equal(open_store(out).labels, y[order])
