"""tf.keras"""
from . import mixed_precision
