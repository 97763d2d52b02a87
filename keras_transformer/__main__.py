from keras_transformer.cli import run

run()
