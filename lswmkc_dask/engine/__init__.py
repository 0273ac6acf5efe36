"""Where and how one fit runs: the route (:mod:`.route`), the cluster (:mod:`.cluster`,
:mod:`.where`), the row-block runners (:mod:`.runners`), the loop (:mod:`.solver`), the
gathered step (:mod:`._gathered`), the resident GPU iteration (:mod:`.device_route`,
:mod:`.device_fit`), and K* -> labels (:mod:`.postprocess`). :mod:`.fit` is the entry.
"""
