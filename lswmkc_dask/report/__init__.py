"""One fit's outputs: its record and files (:mod:`.record`), its scores (:mod:`.metrics`),
the KNN mechanism shared with the baselines (:mod:`.localise`).
"""
