"""Hardware catalog: device specs as data, hypothetical devices, local calibration."""
