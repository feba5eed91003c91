"""Bundled measured data (``cpu_measurements.csv.gz``) and the script that builds it."""
