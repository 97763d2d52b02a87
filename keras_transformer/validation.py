"""Argument checks shared by the layers, the model and the schedules.

Each raises a `ValueError` that names the argument, the value received and
what is allowed, before any weight is created.
"""


def check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        0.0 <= value < 1.0
    ):
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")

