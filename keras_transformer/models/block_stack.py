"""The two stages every model of the package runs: embedding the tokens,
then a stack of blocks."""

import keras


def embed(token_ids, embedding, positions, dropout, start_index=0, extra=None,
          norm=None, training=None):
    """`(batch, len)` ids --> `(batch, len, d_model)`: the token embeddings
    plus the positions from `start_index` (sections 3.4-3.5), plus `extra`
    (BERT's segment embeddings) if given, then `norm` (BERT's LayerNorm) if
    given, then dropout (section 5.4)."""
    x = embedding(token_ids)
    if extra is not None:
        x = x + extra
    x = positions(x, start_index=start_index)
    if norm is not None:
        x = norm(x)
    return dropout(x, training=training)


def build_stack(block_class, num_layers, block_name, norm_name, norm_first,
                layer_norm_epsilon, dtype=None, **block_kwargs):
    """`num_layers` blocks named `{block_name}_{i}`, and the LayerNorm a
    pre-norm stack ends in, named `norm_name` (None for the paper's
    post-norm, whose blocks already end in one).

    Returns:
        `(blocks, final_norm)`.
    """
    blocks = [
        block_class(norm_first=norm_first, layer_norm_epsilon=layer_norm_epsilon,
                    name=f"{block_name}_{i}", dtype=dtype, **block_kwargs)
        for i in range(num_layers)
    ]
    final_norm = None
    if norm_first:
        final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name=norm_name, dtype=dtype)
    return blocks, final_norm


def apply_blocks(blocks, x, final_norm=None, per_block=None,
                 return_attention_scores=False, query_positions=None, **shared):
    """Runs `x` through `blocks` in order, then `final_norm` if given.

    The encoder, the decoder and their incremental decoding are all this
    loop; what differs is what each block is called with.

    Args:
        blocks: a list of `EncoderBlock`s or `DecoderBlock`s.
        x: `(batch, seq, d_model)`, the stack's input.
        final_norm: a LayerNorm applied to the output (pre-norm stacks), or
            None (the paper's post-norm).
        per_block: None, or one dict of call arguments per block (e.g. its
            `self_attention_cache` and `cross_attention_cache`). A block
            given a `self_attention_cache` returns its updated cache.
        return_attention_scores: bool, collect each block's weights.
        query_positions: int `(batch, n)` or None. The last block computes
            only these positions (`EncoderBlock`'s argument): the output is
            `(batch, n, d_model)`, and the last block spends nothing on
            positions nobody reads.
        **shared: call arguments for every block (masks, the encoder
            output, `cache_index`, `training`).

    Returns:
        `(x, scores, caches)`: the output `(batch, seq or n, d_model)`, the list
        of per-block attention weights (empty unless requested) and the
        list of updated self-attention caches (empty without caches).
    """
    scores, caches = [], []
    last = len(blocks) - 1
    for i, (block, own) in enumerate(zip(blocks, per_block or [{}] * len(blocks))):
        if i == last and query_positions is not None:
            own = {**own, "query_positions": query_positions}
        outputs = block(
            x, return_attention_scores=return_attention_scores, **own, **shared
        )
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        x = outputs[0]
        if return_attention_scores:
            scores.append(outputs[1])
        if own.get("self_attention_cache") is not None:
            caches.append(outputs[-1])
    if final_norm is not None:
        x = final_norm(x)
    return x, scores, caches
