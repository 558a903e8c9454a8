"""The package's version (pyproject.toml reads it from here; ``tessera.__version__``), on the
ground floor: the launcher's compiler build id includes it."""
__version__ = "0.1.0"
