"""`python -m tiledsl.cli`: the `tiledsl` command."""

import sys

from tiledsl.cli.main import main

sys.exit(main())
