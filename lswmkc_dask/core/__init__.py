"""The paper's computation: its equations (:mod:`.equations`, written once against the
array API), the eigensolvers of the gathered step (:mod:`.eigen`, :mod:`.lapack`).

No module here imports Dask, distributed, zarr or the package's I/O (``tests/test_layout.py``).
"""
