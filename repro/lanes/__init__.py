"""Pinned container lanes (images) and the matrix of lanes x repros x GPUs on a scheduler."""
