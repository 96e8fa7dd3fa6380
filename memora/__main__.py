"""``python -m memora``: the terminal REPL."""

import sys

from memora.app.repl import main

sys.exit(main())
