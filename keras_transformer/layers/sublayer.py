"""The residual connection around every sub-layer (paper section 3.1).

Post-norm (the paper): `LayerNorm(x + Dropout(Sublayer(x)))`.
Pre-norm (option):     `x + Dropout(Sublayer(LayerNorm(x)))`.

A block calls `sublayer_input` to get what its sub-layer reads, runs the
sub-layer, then `sublayer_output` to add the residual.
"""


def sublayer_input(x, norm, norm_first):
    """What the sub-layer sees: `LayerNorm(x)` in pre-norm, else `x`."""
    return norm(x) if norm_first else x


def sublayer_output(x, y, norm, dropout, norm_first, training):
    """`x + Dropout(y)`, then `LayerNorm` in post-norm."""
    x = x + dropout(y, training=training)
    return x if norm_first else norm(x)
