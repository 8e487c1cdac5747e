"""``python -m robot_grinding_sim.cli``."""

import sys

from robot_grinding_sim.cli import main

sys.exit(main())
