"""weft.onnx"""
