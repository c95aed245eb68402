"""`python -m corpus_assets.tasks ...` is `corpus tasks ...`."""

import sys

from corpus_assets.cli import main

if __name__ == "__main__":
    main(["tasks", *sys.argv[1:]])
