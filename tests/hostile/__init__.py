"""Hostile inputs: each case a small generated file, refused cleanly within memory and time."""
