"""Base kernels: from feature matrices (:mod:`.features`: kernels, preprocessing) and the
checks of raw kernels in the first pass (:mod:`._scan`).
"""
