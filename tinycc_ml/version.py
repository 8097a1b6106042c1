"""The package version, importable without importing the compiler."""

__version__ = "0.1.0"
