"""`python -m tinycc_ml`: the command line."""

import sys

try:
    from tinycc_ml.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line is still being imported: one line, like later
    sys.stderr.write("tinycc-ml: error: interrupted\n")
    sys.exit(130)

sys.exit(main())
