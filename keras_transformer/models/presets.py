"""The model configurations in one place: the paper's (Table 3), and the
decoder-only (GPT) and encoder-only (BERT) families built from its blocks.

Each preset holds the `Transformer` constructor arguments (`config`), the
training label smoothing `epsilon_ls` it was trained with, and, for the
paper's rows, the figures Table 3 reports (`ppl` and `bleu` on newstest2013,
`params_millions` as printed). Table 3's blank cells mean "as base"; every
row below spells out only what differs from base.

`tiny`, `mini` and `small` are not from the paper: they are sized for
tests and for training on a laptop CPU.

`CAUSAL_LM_PRESETS` hold `CausalLM` arguments and `ENCODER_PRESETS`
`BidirectionalEncoder` arguments, with the published models' sizes; the
`*_tiny` and `*_mini` ones are sized for a CPU.
"""

from keras_transformer.layers.feed_forward import gelu_approximate

_BASE = dict(
    vocabulary_size=37000,  # the shared BPE vocabulary of section 5.1
    num_layers=6,  # N
    d_model=512,
    num_heads=8,  # h
    d_ff=2048,
    key_dim=64,  # d_k = d_model / h
    value_dim=64,  # d_v
    dropout_rate=0.1,  # P_drop
    max_length=512,
)


def _row(description, ppl, bleu, params_millions=None, epsilon_ls=0.1, **changes):
    return {
        "description": description,
        "config": {**_BASE, **changes},
        "epsilon_ls": epsilon_ls,
        "paper": {"ppl": ppl, "bleu": bleu, "params_millions": params_millions},
    }


def _cpu_row(description, num_layers, d_model, num_heads, d_ff, dropout_rate=0.1,
             num_decoder_layers=None):
    """A preset sized for a CPU: d_k = d_v = d_model / h, as in the paper."""
    config = dict(
        vocabulary_size=8000, num_layers=num_layers, num_decoder_layers=num_decoder_layers,
        d_model=d_model, num_heads=num_heads, d_ff=d_ff, key_dim=d_model // num_heads,
        value_dim=d_model // num_heads, dropout_rate=dropout_rate, max_length=256,
    )
    return {"description": description, "config": config, "epsilon_ls": 0.1, "paper": None}


PRESETS = {
    "tiny": _cpu_row("2 layers, d_model 64: for tests and quick CPU demos.",
                     num_layers=2, d_model=64, num_heads=4, d_ff=256),
    # No residual dropout of its own: `train` sets the rate for the epochs
    # its budget holds (BudgetDropout), as `mini` needs dropout only past
    # about 15 epochs of the shipped corpus. One encoder
    # layer: steps 15% shorter than 2 + 2 and a better translator in the
    # same minutes; a single decoder layer is far worse. d_model 128 over
    # 96: 0.3-1.8 BLEU more in the same minutes on three seeds, with
    # 12-16% fewer updates (docs/RESULTS.md).
    "mini": _cpu_row("1 encoder and 2 decoder layers, d_model 128: the demo's "
                     "translator, sized for 10 minutes of a 2-core CPU.",
                     num_layers=1, num_decoder_layers=2, d_model=128, num_heads=4,
                     d_ff=512, dropout_rate=0.0),
    "small": _cpu_row("3 layers, d_model 256: a translator trained on a CPU.",
                      num_layers=3, d_model=256, num_heads=4, d_ff=1024),
    "base": _row("Transformer (base), Table 3 first row.", 4.92, 25.8, 65),
    # (A) number of heads, keeping the amount of computation constant.
    "A1": _row("Table 3 (A): h=1, d_k=d_v=512.", 5.29, 24.9,
               num_heads=1, key_dim=512, value_dim=512),
    "A2": _row("Table 3 (A): h=4, d_k=d_v=128.", 5.00, 25.5,
               num_heads=4, key_dim=128, value_dim=128),
    "A3": _row("Table 3 (A): h=16, d_k=d_v=32.", 4.91, 25.8,
               num_heads=16, key_dim=32, value_dim=32),
    "A4": _row("Table 3 (A): h=32, d_k=d_v=16.", 5.01, 25.4,
               num_heads=32, key_dim=16, value_dim=16),
    # (B) smaller attention key size, d_v stays 64.
    "B1": _row("Table 3 (B): d_k=16.", 5.16, 25.1, 58, key_dim=16),
    "B2": _row("Table 3 (B): d_k=32.", 5.01, 25.4, 60, key_dim=32),
    # (C) model size.
    "C1": _row("Table 3 (C): N=2.", 6.11, 23.7, 36, num_layers=2),
    "C2": _row("Table 3 (C): N=4.", 5.19, 25.3, 50, num_layers=4),
    "C3": _row("Table 3 (C): N=8.", 4.88, 25.5, 80, num_layers=8),
    "C4": _row("Table 3 (C): d_model=256, d_k=d_v=32.", 5.75, 24.5, 28,
               d_model=256, key_dim=32, value_dim=32),
    "C5": _row("Table 3 (C): d_model=1024, d_k=d_v=128.", 4.66, 26.0, 168,
               d_model=1024, key_dim=128, value_dim=128),
    "C6": _row("Table 3 (C): d_ff=1024.", 5.12, 25.4, 53, d_ff=1024),
    "C7": _row("Table 3 (C): d_ff=4096.", 4.75, 26.2, 90, d_ff=4096),
    # (D) dropout and label smoothing.
    "D1": _row("Table 3 (D): P_drop=0.0.", 5.77, 24.6, dropout_rate=0.0),
    "D2": _row("Table 3 (D): P_drop=0.2.", 4.95, 25.5, dropout_rate=0.2),
    "D3": _row("Table 3 (D): epsilon_ls=0.0.", 4.67, 25.3, epsilon_ls=0.0),
    "D4": _row("Table 3 (D): epsilon_ls=0.2.", 5.47, 25.7, epsilon_ls=0.2),
    # (E) learned positional embedding instead of sinusoids.
    "E": _row("Table 3 (E): learned positional embedding.", 4.92, 25.7,
              learned_positions=True),
    "big": _row("Transformer (big), Table 3 last row.", 4.33, 26.4, 213,
                num_layers=6, d_model=1024, num_heads=16, d_ff=4096,
                key_dim=64, value_dim=64, dropout_rate=0.3),
}



def _lm_row(description, **config):
    return {"description": description, "config": config}


# GPT (Radford et al., 2018): post-norm decoder blocks without
# cross-attention, learned positions, unscaled tied embeddings, GELU.
# GPT-2 (2019) moved the LayerNorm before each sub-layer and added one at
# the top.
_GPT = dict(activation=gelu_approximate, learned_positions=True,
            scale_embeddings=False, layer_norm_epsilon=1e-5, dropout_rate=0.1)

CAUSAL_LM_PRESETS = {
    "gpt_tiny": _lm_row("2 layers, d_model 64: for tests.", **_GPT,
                        vocabulary_size=8000, num_layers=2, d_model=64,
                        num_heads=4, d_ff=256, max_length=256),
    "gpt_mini": _lm_row("4 layers, d_model 128: a language model trained on a CPU.",
                        **_GPT, vocabulary_size=8000, num_layers=4, d_model=128,
                        num_heads=4, d_ff=512, max_length=256),
    "gpt1": _lm_row("GPT: 12 layers, d_model 768, 512 positions, post-norm.",
                    **_GPT, vocabulary_size=40478, num_layers=12, d_model=768,
                    num_heads=12, d_ff=3072, max_length=512),
    "gpt2": _lm_row("GPT-2 small: as gpt1 but pre-norm, 1024 positions.",
                    **{**_GPT, "norm_first": True}, vocabulary_size=50257,
                    num_layers=12, d_model=768, num_heads=12, d_ff=3072,
                    max_length=1024),
}

# BERT (Devlin et al., 2019): post-norm encoder blocks, learned positions,
# two segments, a LayerNorm on the embeddings, GELU, a tanh pooler.
_BERT = dict(activation=gelu_approximate, max_length=512, num_segments=2,
             layer_norm_epsilon=1e-12, dropout_rate=0.1)

ENCODER_PRESETS = {
    "bert_tiny": _lm_row("2 layers, d_model 128 (BERT-Tiny's shape).", **_BERT,
                         vocabulary_size=8000, num_layers=2, d_model=128,
                         num_heads=2, d_ff=512),
    "bert_mini": _lm_row("4 layers, d_model 256 (BERT-Mini's shape).", **_BERT,
                         vocabulary_size=8000, num_layers=4, d_model=256,
                         num_heads=4, d_ff=1024),
    "bert_base": _lm_row("BERT-Base: 12 layers, d_model 768.", **_BERT,
                         vocabulary_size=30522, num_layers=12, d_model=768,
                         num_heads=12, d_ff=3072),
    "bert_large": _lm_row("BERT-Large: 24 layers, d_model 1024.", **_BERT,
                          vocabulary_size=30522, num_layers=24, d_model=1024,
                          num_heads=16, d_ff=4096),
}


def get_preset(name, presets=None):
    """`presets[name]` (default `PRESETS`), or a `ValueError` that lists the
    presets there are."""
    presets = PRESETS if presets is None else presets
    if name not in presets:
        raise ValueError(f"Unknown preset {name!r}. Available presets: {', '.join(presets)}")
    return presets[name]
