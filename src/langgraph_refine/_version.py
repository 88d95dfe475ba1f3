"""The package's version, in a module of its own so any module may read it."""

__version__ = "0.1.0"
