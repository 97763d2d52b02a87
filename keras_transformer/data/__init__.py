"""Data: toy tasks, corpora, tokenizers and tf.data pipelines."""

from keras_transformer.data.copy_reverse import copy_reverse_task
