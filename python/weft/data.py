"""tf.data"""
