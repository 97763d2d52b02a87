"""The attention pictures' numbers: `attention_maps` returns the model's
real attention weights, token-aligned (the notebooks check the plots)."""

import numpy as np
import pytest

from keras_transformer import Translator
from keras_transformer.data.corpora import numbers_and_dates
from keras_transformer.data.tokenizer import load_tokenizer, train_tokenizer
from keras_transformer.models import Transformer
from keras_transformer.visualization import attention_maps, plot_attention
from tests.helpers import numpy_attention, to_numpy


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    pairs = numbers_and_dates(size=300)
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer.model")
    train_tokenizer([s for p in pairs for s in p], 120, path)
    return path


def test_attention_maps_are_the_models_weights(tokenizer_path):
    tokenizer = load_tokenizer(tokenizer_path)  # after the seed reset
    model = Transformer.from_preset("tiny", vocabulary_size=int(tokenizer.vocabulary_size()))
    translator = Translator(model, tokenizer, beam_size=1, max_extra_length=6)
    maps = attention_maps(translator, "three hundred and twelve")
    layers, heads = 2, 4  # the tiny preset
    s, t = len(maps["source_tokens"]), len(maps["target_tokens"])
    assert maps["source_tokens"][-1] == "</s>" and maps["target_tokens"][0] == "<s>"
    assert maps["encoder"].shape == (layers, heads, s, s)
    assert maps["decoder"].shape == (layers, heads, t, t)
    assert maps["cross"].shape == (layers, heads, t, s)
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(maps[kind].sum(-1), 1.0, atol=1e-5)
    # Masked self-attention: no weight on later target positions.
    assert np.abs(np.triu(maps["decoder"], k=1)).max() == 0.0

    # Layer 0 of the encoder against NumPy on the embedded source.
    source = np.asarray([translator.encode(["three hundred and twelve"])[0]], "int32")
    x = to_numpy(model.encoder_positions(model.source_embedding(source)))
    _, expected = numpy_attention(model.encoder_blocks[0].self_attention, x, x, None)
    np.testing.assert_allclose(maps["encoder"][0], expected[0], atol=1e-5)

    with pytest.raises(ValueError, match="must be one of 'encoder', 'decoder', 'cross'. "
                                         "Received: kind='self'"):
        plot_attention(maps, "self")
    figure = plot_attention(maps, "cross", layers=[1], heads=[0, 3])
    assert len(figure.axes) == 2
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == maps["source_tokens"]
