"""``python -m lswmkc_dask.cli``: the ``lswmkc`` command."""

import sys

from . import main

sys.exit(main())
