"""`python -m glm53 ...`, the same as the `glm53` command."""

import sys

from .cli import main

sys.exit(main())
