"""Bounds no real machine or cluster exceeds: what a probe writes and what a loaded report may hold."""

MAX_GPUS = 1024
"""GPUs one report may list: more than any single machine has (an NVL72 rack is 72)."""
MAX_NODES = 16384
"""SLURM nodes: more than the largest published training clusters (about 100k GPUs at 8 per node)."""
