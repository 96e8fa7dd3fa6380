"""``python -m memora.serve --processes N``: a big class, N Streamlit processes behind Caddy
(``memora.app.serve``)."""

import sys

from memora.app.serve import main

if __name__ == "__main__":
    sys.exit(main())
