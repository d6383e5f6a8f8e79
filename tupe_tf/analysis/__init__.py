"""Figures and comparisons: the evidence for choosing a positional encoding."""
