"""Errors a user can cause with the hardware catalog.

Every message says what is wrong (naming the file and the key where there is one) and what to
do; the CLI and the app print it as one line.
"""


class HardwareSpecError(ValueError):
    """A device file is invalid, a device id is unknown, or a what-if spec cannot be applied."""


class DeviceFileWarning(UserWarning):
    """A device file of the user's folder is unusable and was skipped; the others still load."""
