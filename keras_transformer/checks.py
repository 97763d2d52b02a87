"""Argument checks shared by the layers, models, schedules and searches.

Each raises a `ValueError` that names the argument, the value received and
what is allowed, before any weight is created.
"""

import dataclasses
import numbers
import typing


def check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_non_negative(name, value, also=None):
    """A real number >= 0 (NaN refused), or the string `also` if given."""
    if also is not None and isinstance(value, str) and value == also:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        allowed = "a number >= 0" + (f' or "{also}"' if also is not None else "")
        raise ValueError(f"`{name}` must be {allowed}. Received: {name}={value!r}")


def check_choice(name, value, choices):
    """`value` is one of `choices`, a sequence or a dict's keys."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, choices))}. "
                         f"Received: {name}={value!r}")


def check_max_length(value):
    """A sequence length with room for bos, one token and eos."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 3:
        raise ValueError(f"`max_length` must be an integer >= 3. Received: max_length={value!r}")


def check_fields(config, positive=(), non_negative=()):
    """Checks a program's settings, the dataclass `config`: the named
    fields are positive integers and numbers >= 0 (None, a default chosen
    later, passes), and each field typed `Literal[...]` holds one of its
    values (the command line checks those, Python callers are not)."""
    for names, check in ((positive, check_positive_int), (non_negative, check_non_negative)):
        for name in names:
            if getattr(config, name) is not None:
                check(name, getattr(config, name))
    types = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        annotation = types[field.name]
        if typing.get_origin(annotation) is typing.Literal:
            check_choice(field.name, getattr(config, field.name), typing.get_args(annotation))


def check_rate(name, value, zero=True):
    """A fraction in [0, 1), or in (0, 1) where 0 would leave nothing to do
    (`zero=False`: a masking rate that chooses no token)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        (value >= 0.0 if zero else value > 0.0) and value < 1.0
    ):
        allowed = "[0, 1)" if zero else "(0, 1)"
        raise ValueError(f"`{name}` must be in {allowed}. Received: {name}={value!r}")


def check_special_ids(pad_id, bos_id, eos_id, vocabulary_size):
    """Three different ids in `[0, vocabulary_size)`."""
    ids = {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id}
    for name, value in ids.items():
        if isinstance(value, bool) or not isinstance(value, int) or not (
            0 <= value < vocabulary_size
        ):
            raise ValueError(
                f"`{name}` must be a token id in [0, {vocabulary_size}). "
                f"Received: {name}={value!r}"
            )
    if len(set(ids.values())) < 3:
        raise ValueError(
            "`pad_id`, `bos_id` and `eos_id` must be three different ids. "
            f"Received: pad_id={pad_id}, bos_id={bos_id}, eos_id={eos_id}"
        )


def check_attention_sizes(num_heads, key_dim, value_dim=None):
    """`num_heads` and `key_dim` positive integers; `value_dim` one or None."""
    check_positive_int("num_heads", num_heads)
    check_positive_int("key_dim", key_dim)
    if value_dim is not None:
        check_positive_int("value_dim", value_dim)


def head_width(d_model, num_heads):
    """`d_k = d_model / h`, which must be a whole number."""
    if d_model % num_heads:
        raise ValueError(
            "`d_model` must be divisible by `num_heads` (so that "
            "d_k = d_model / h), or pass `key_dim` explicitly. "
            f"Received: d_model={d_model}, num_heads={num_heads}"
        )
    return d_model // num_heads
