"""``python -m telapa.cli`` = ``telapa``."""

import sys

from telapa.cli import main

sys.exit(main())
