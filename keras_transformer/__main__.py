import sys

from keras_transformer.cli import main

sys.exit(main())
