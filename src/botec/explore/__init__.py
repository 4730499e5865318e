"""Exploring the space: sweeps, solvers, the layout search, uncertainty and sensitivity, all through
the quantity graph's formulas evaluated on numpy arrays (``pip install botec[array]``)."""
