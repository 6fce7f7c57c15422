"""Torch code shared by the judge and the candidate: inputs, timing, the op recorder."""
