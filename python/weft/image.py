"""tf.image"""
