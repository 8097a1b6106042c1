"""The package version, importable without importing the compiler."""

__version__ = "0.1.0"

# the address generated Arduino / PlatformIO libraries give as their project page (library.properties url=,
# library.json homepage): where tinycc-ml is published
PROJECT_URL = "https://pypi.org/project/tinycc-ml/"
