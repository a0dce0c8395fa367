import sys

from simulator.cli import main

raise SystemExit(main(sys.argv[1:]))
