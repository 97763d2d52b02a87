"""The paper's learning-rate schedule (section 5.3, equation 3)."""

import keras
from keras import ops

from keras_transformer.checks import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`.

    Section 5.3: the rate rises linearly for the first `warmup_steps` steps
    and then decays with the inverse square root of the step number. The
    paper's step numbers start at 1; Keras' optimizer counts iterations from
    0, so the schedule evaluates the formula at `step_num = iterations + 1`.

    Args:
        d_model: int, the model width.
        warmup_steps: int, 4000 in the paper.
        scale: float, a multiplier on the whole formula (1.0 in the paper).
        steps_per_update: int, the optimizer's `gradient_accumulation_steps`
            (1: none). Keras calls the schedule with the micro-batch count;
            the paper's steps are updates, so the formula takes
            `iterations // steps_per_update`.

    Example:
    >>> schedule = WarmupSchedule(d_model=512)
    >>> float(schedule(3999))  # the peak, at step_num 4000
    0.000698771...
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0, steps_per_update=1):
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        check_positive_int("steps_per_update", steps_per_update)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.steps_per_update = steps_per_update

    @classmethod
    def from_peak(cls, d_model, warmup_steps, peak, steps_per_update=1):
        """The schedule of the same shape whose rate at the end of warmup
        is `peak` (the paper's base model peaks at 512^-0.5 * 4000^-0.5 =
        6.99e-4; the unscaled formula gives small models with short warmups
        far higher peaks, e.g. 8.8e-3 for d_model 64 and 200 steps)."""
        if not peak > 0:
            raise ValueError(f"`peak` must be positive. Received: peak={peak!r}")
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        unscaled = float(d_model) ** -0.5 * float(warmup_steps) ** -0.5
        return cls(d_model, warmup_steps, scale=peak / unscaled,
                   steps_per_update=steps_per_update)

    @property
    def peak(self):
        """The highest rate, reached at step_num = `warmup_steps`."""
        return self.scale * float(self.d_model) ** -0.5 * float(self.warmup_steps) ** -0.5

    def __call__(self, step):
        step_num = ops.cast(ops.floor_divide(step, self.steps_per_update), "float32") + 1.0
        rising = step_num * float(self.warmup_steps) ** -1.5
        decaying = ops.rsqrt(step_num)
        return (self.scale * float(self.d_model) ** -0.5) * ops.minimum(
            rising, decaying
        )

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "steps_per_update": self.steps_per_update,
        }
