"""``python -m botec``: the ``botec`` command (:func:`botec.cli.main`), as ``python -m botec.cli``."""

from botec.cli import main

main()
