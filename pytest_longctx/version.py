"""The plugin's version (``pytest_longctx.__version__``), in a module of its own so that any layer can read it
without importing the package's public face."""

__version__ = "0.1.0"
