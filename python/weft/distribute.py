"""tf.distribute"""
