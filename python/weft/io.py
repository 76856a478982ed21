"""tf.io"""
