"""Errors of the byte formats, raised alike by the Python format modules and the C helper.

They live below both (``cluster/_native`` maps the helper's error codes to them, and
``cluster/message/batch_format.py`` raises them itself), so neither has to import the other.
"""


class MalformedBatch(ValueError):
    """The batch body's item sizes do not add up: the client sent garbage."""


class DestinationTooSmall(Exception):
    """The batch's records do not fit in the space left; nothing was written."""
