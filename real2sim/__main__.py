import sys

from real2sim.apps.cli import main

sys.exit(main())
