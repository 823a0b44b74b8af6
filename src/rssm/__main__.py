"""``python -m rssm``: the same as the ``rssm`` command."""

import sys

from rssm.cli import console

sys.exit(console())
