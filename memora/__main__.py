"""``python -m memora``: the terminal REPL."""

import sys

from memora.cli import main

sys.exit(main())
