"""``python -m dpcube``: the same as the ``dpcube`` command."""

import sys

from dpcube.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
