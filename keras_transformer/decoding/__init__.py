"""Incremental decoding: cached greedy and beam search, compiled once per
input shape on every backend."""

from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.greedy_search import greedy_search
