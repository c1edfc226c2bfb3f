"""Fitting the complexity scorer's weights: offline only.

Nothing here is imported when a prompt is scored; `route calibrate` and `route eval
--leave-one-out` import these modules on demand, and so do the benchmarks.
"""
