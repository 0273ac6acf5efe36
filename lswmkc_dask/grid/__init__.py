"""Grids of fits: sweeps (:mod:`.sweep`, :mod:`._routes`, :mod:`.scoring`, :mod:`.results`,
:mod:`.selection`), comparisons with baselines (:mod:`.compare`, :mod:`.baselines`), the
resumable directory they share (:mod:`.points`) and their tables (:mod:`.tables`).
"""
