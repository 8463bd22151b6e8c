"""``python -m bench.dispatch``: run the benchmark (see the package docstring)."""

import sys

from bench.dispatch.cli import main

sys.exit(main())
