"""``python -m botec.cli``."""

from botec.cli import main

main()
