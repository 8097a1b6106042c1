"""`python -m tinycc_ml`: the command line."""

import sys

from tinycc_ml.cli import main

sys.exit(main())
