"""The paper's optimizer (section 5.3)."""

import keras

from keras_transformer.schedules.warmup_schedule import WarmupSchedule


def transformer_adam(d_model, warmup_steps=4000, scale=1.0, peak=None, **kwargs):
    """Adam with beta1=0.9, beta2=0.98, epsilon=1e-9 and the warmup schedule.

    Args:
        d_model: int, the model width (the schedule scales by
            `d_model^-0.5`).
        warmup_steps: int, 4000 in the paper.
        scale: float, a multiplier on the learning rate.
        peak: float, if given, the rate at the end of warmup (the scale is
            derived from it; see `WarmupSchedule.from_peak`).
        **kwargs: passed to `keras.optimizers.Adam` (e.g. `clipnorm`).

    Returns:
        A `keras.optimizers.Adam`.
    """
    if peak is None:
        schedule = WarmupSchedule(d_model, warmup_steps, scale)
    else:
        schedule = WarmupSchedule.from_peak(d_model, warmup_steps, peak)
    return keras.optimizers.Adam(
        learning_rate=schedule,
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **kwargs,
    )
