"""`python -m experiments.reproduce` (`make reproduce`)."""

import sys

from .run import main

sys.exit(main())
