"""Measurement: a short real training run (PyTorch), its file, and calibration of the estimate.

PyTorch is an optional extra (``pip install botec[measure]``); nothing here is imported by the
estimate. ``measurement.py`` (the file format) and ``calibrate.py`` need no PyTorch.
"""
