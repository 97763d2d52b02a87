"""The paper's optimizer (section 5.3), and Muon on the same schedule."""

from keras_transformer.checks import check_positive_int
from keras_transformer.optimizers.adam import Adam
from keras_transformer.optimizers.muon import Muon
from keras_transformer.schedules.warmup_schedule import WarmupSchedule


def transformer_adam(d_model, warmup_steps=4000, scale=1.0, peak=None,
                     gradient_accumulation_steps=1, use_ema=False, ema_momentum=0.99,
                     learning_rate=None, **kwargs):
    """Adam with beta1=0.9, beta2=0.98, epsilon=1e-9 and the warmup schedule.

    Args:
        d_model: int, the model width (the schedule scales by
            `d_model^-0.5`).
        warmup_steps: int, 4000 in the paper.
        scale: float, a multiplier on the learning rate.
        peak: float, if given, the rate at the end of warmup (the scale is
            derived from it; see `WarmupSchedule.from_peak`).
        gradient_accumulation_steps: int, batches whose mean gradient makes
            one update (1: every batch updates). The schedule counts
            updates, as the paper's steps.
        use_ema, ema_momentum: a moving average of the weights that keeps
            `ema_momentum` of itself per update. Keras moves it after every
            batch, so under accumulation it gets the N-th root.
        learning_rate: float, a constant rate instead of the warmup
            schedule (`warmup_steps`, `scale` and `peak` then do nothing):
            Keras keeps it in a variable that a callback may set every
            batch, as `train`'s `BudgetDecay` does.
        **kwargs: passed to `Adam` (e.g. `clipnorm`).

    Returns:
        An `Adam`: Keras's, with a fused update on PyTorch.
    """
    return _on_schedule(Adam, d_model, warmup_steps, scale, peak, gradient_accumulation_steps,
                        use_ema, ema_momentum, learning_rate,
                        beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs)


def transformer_muon(d_model, warmup_steps=4000, scale=1.0, peak=None,
                     gradient_accumulation_steps=1, use_ema=False, ema_momentum=0.99,
                     learning_rate=None, weight_decay=None, **kwargs):
    """`Muon` on `transformer_adam`'s schedule: Muon's step (momentum 0.95,
    Nesterov, 5 Newton-Schulz iterations) for the hidden layers' matrices
    and the paper's Adam (0.9, 0.98, 1e-9) for the rest.

    Takes `transformer_adam`'s arguments; `weight_decay` (decoupled, none
    by default) applies to both parts, and `**kwargs` go to `Muon`.
    """
    return _on_schedule(Muon, d_model, warmup_steps, scale, peak, gradient_accumulation_steps,
                        use_ema, ema_momentum, learning_rate,
                        adam_beta_1=0.9, adam_beta_2=0.98, epsilon=1e-9,
                        weight_decay=weight_decay, adam_weight_decay=weight_decay, **kwargs)


def _on_schedule(optimizer_class, d_model, warmup_steps, scale, peak,
                 gradient_accumulation_steps, use_ema, ema_momentum, learning_rate, **kwargs):
    """`optimizer_class` on the warmup schedule (or `learning_rate`), with
    gradient accumulation and the moving average as `transformer_adam`
    documents them."""
    check_positive_int("gradient_accumulation_steps", gradient_accumulation_steps)
    n = gradient_accumulation_steps
    if learning_rate is not None:
        schedule = learning_rate
    elif peak is None:
        schedule = WarmupSchedule(d_model, warmup_steps, scale, steps_per_update=n)
    else:
        schedule = WarmupSchedule.from_peak(d_model, warmup_steps, peak, steps_per_update=n)
    return optimizer_class(
        learning_rate=schedule,
        gradient_accumulation_steps=n if n > 1 else None,
        use_ema=use_ema,
        ema_momentum=ema_momentum ** (1.0 / n),
        **kwargs,
    )
