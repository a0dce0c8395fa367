import sys

try:
    from jury.simulator.cli import main
except KeyboardInterrupt:  # Ctrl-C while it imports: nothing started, nothing to say
    raise SystemExit(130) from None

raise SystemExit(main(sys.argv[1:]))
