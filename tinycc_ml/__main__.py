"""`python -m tinycc_ml`: the command line."""

from tinycc_ml.console import run

run()
