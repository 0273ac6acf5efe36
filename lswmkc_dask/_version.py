"""The package's version: its one source (pyproject reads it, modules import it)."""

__version__: str = "0.1.0"
