"""`python -m tinycc_ml`: the command line."""

import os
import sys

try:
    from tinycc_ml.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line is still being imported: one line, like later
    sys.stderr.write("tinycc-ml: error: interrupted\n")
    sys.stderr.flush()
    os._exit(130)

try:
    status = main()
    if status == 130:  # interrupted: the one line is out and nothing is half-written; no second chance for Ctrl-C
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
except KeyboardInterrupt:  # a second Ctrl-C right after the first one's line
    os._exit(130)
sys.exit(status)
