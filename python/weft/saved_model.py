"""tf.saved_model"""
