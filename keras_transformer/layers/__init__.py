"""The Transformer's building blocks, one public layer per module."""

from keras_transformer.layers.decoder_block import DecoderBlock
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.encoder_block import EncoderBlock
from keras_transformer.layers.feed_forward import FeedForward, gelu_approximate
from keras_transformer.layers.masked_lm_head import MaskedLMHead
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.position_wise_dense import PositionWiseDense
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.token_embedding import TokenEmbedding
