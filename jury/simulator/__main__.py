import sys

from jury.simulator.cli import main

raise SystemExit(main(sys.argv[1:]))
