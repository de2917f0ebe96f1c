"""`python -m tiledsl.cli`: the `tiledsl` command."""

import sys

from tiledsl.cli.commands import main

sys.exit(main())
