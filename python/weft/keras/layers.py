"""tf.keras.layers: configurations of weft's C layers (wf_layer). A layer object holds what the user
gave; the model turns it into a wf_layer when it builds (src/model/model.c does the work)."""
from .. import _lib, errors

ACTIVATIONS = {None: 0, "linear": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "softmax": 4, "elu": 5, "selu": 6,
               "gelu": 7, "softplus": 8, "leaky_relu": 9}

_INITS = {"zeros": 1, "ones": 2, "random_uniform": 4, "random_normal": 5, "truncated_normal": 6,
          "glorot_uniform": 7, "glorot_normal": 8, "he_uniform": 9, "he_normal": 10}

DENSE, CONV2D, MAXPOOL2D, AVGPOOL2D, FLATTEN, DROPOUT, BATCHNORM, LAYERNORM, EMBEDDING, ACTIVATION, RESHAPE = range(1, 12)


def _act(a):
    if callable(a) and not isinstance(a, str):
        a = getattr(a, "__name__", a)
    if a not in ACTIVATIONS:
        raise errors.UnimplementedError(message="activation %r is not in weft (%s)" %
                                        (a, ", ".join(k for k in ACTIVATIONS if k)))
    return ACTIVATIONS[a]


def _init(spec, field):
    if spec is None:
        return
    name = spec if isinstance(spec, str) else getattr(spec, "_name", None)
    if name not in _INITS:
        raise errors.UnimplementedError(message="initializer %r is not in weft (%s)" % (spec, ", ".join(_INITS)))
    field.kind = _INITS[name]
    for k in ("minval", "maxval", "mean", "stddev", "seed", "value"):
        v = getattr(spec, k, None)
        if v is not None:
            setattr(field, k, v)
    if name == "random_uniform" and getattr(spec, "minval", None) is None:
        field.minval, field.maxval = -0.05, 0.05
    if name in ("random_normal", "truncated_normal") and getattr(spec, "stddev", None) is None:
        field.stddev = 0.05


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Layer:
    """Base of the layers. input_shape (without the batch dim) on the first layer fixes the model's
    input, as in Keras; otherwise the model builds on its first data."""
    _kind = 0

    def __init__(self, name=None, input_shape=None, dtype=None, trainable=True, **kwargs):
        if "input_dim" in kwargs and input_shape is None and self._kind != EMBEDDING:
            input_shape = (kwargs.pop("input_dim"),)
        unknown = set(kwargs) - {"batch_input_shape", "autocast"}
        if unknown:
            raise TypeError("%s: unexpected arguments %s" % (type(self).__name__, sorted(unknown)))
        self.name = name
        self.input_shape = tuple(input_shape) if input_shape is not None else None
        self.dtype_policy = dtype
        self.trainable = trainable
        self._model = None

    def _fill(self, c):
        pass

    def to_c(self):
        c = _lib.Layer()
        _lib.lib.wf_layer_init(C_ref(c), self._kind)
        if self.name:
            self._name_b = self.name.encode()
            c.name = self._name_b
        if isinstance(self.dtype_policy, str) or hasattr(self.dtype_policy, "name"):
            from .mixed_precision import _policy_code
            c.policy = _policy_code(self.dtype_policy)
        self._fill(c)
        return c

    def get_config(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __repr__(self):
        return "<%s name=%s>" % (type(self).__name__, self.name)


def C_ref(x):
    import ctypes
    return ctypes.byref(x)


class InputLayer(Layer):
    _kind = -1

    def __init__(self, input_shape=None, shape=None, dtype=None, name=None, **kw):
        super().__init__(name=name, input_shape=shape if shape is not None else input_shape)
        self.input_dtype = dtype


def Input(shape=None, batch_size=None, name=None, dtype=None, **kw):
    """keras.Input(shape=...): in a Sequential, fixes the input shape (functional models are not in weft)."""
    return InputLayer(shape=shape, dtype=dtype, name=name)


class Dense(Layer):
    _kind = DENSE

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kw):
        super().__init__(**kw)
        self.units = int(units)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        _act(activation)

    def _fill(self, c):
        c.units = self.units
        c.activation = _act(self.activation)
        c.use_bias = int(bool(self.use_bias))
        if self.kernel_initializer != "glorot_uniform":
            _init(self.kernel_initializer, c.kernel_init)
        if self.bias_initializer != "zeros":
            _init(self.bias_initializer, c.bias_init)


class Conv2D(Layer):
    """Channels-last by default as in Keras: the model feeds weft's NCHW convolution by transposing
    its input once at the model's edge (data_format='channels_first' skips that)."""
    _kind = CONV2D

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kw):
        super().__init__(**kw)
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size)
        self.strides = _pair(strides)
        self.padding = padding.lower()
        self.data_format = data_format or "channels_last"
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        if self.padding not in ("valid", "same"):
            raise errors.InvalidArgumentError(message="Conv2D: padding must be 'valid' or 'same', got %r" % padding)
        _act(activation)

    def _fill(self, c):
        c.filters = self.filters
        c.kernel[0], c.kernel[1] = self.kernel_size
        c.strides[0], c.strides[1] = self.strides
        c.padding_same = int(self.padding == "same")
        c.activation = _act(self.activation)
        c.use_bias = int(bool(self.use_bias))
        if self.kernel_initializer != "glorot_uniform":
            _init(self.kernel_initializer, c.kernel_init)


class _Pool(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kw):
        super().__init__(**kw)
        self.pool_size = _pair(pool_size)
        self.strides = _pair(strides) if strides is not None else self.pool_size
        self.padding = padding.lower()
        self.data_format = data_format or "channels_last"

    def _fill(self, c):
        c.kernel[0], c.kernel[1] = self.pool_size
        c.strides[0], c.strides[1] = self.strides
        c.padding_same = int(self.padding == "same")


class MaxPooling2D(_Pool):
    _kind = MAXPOOL2D


class AveragePooling2D(_Pool):
    _kind = AVGPOOL2D


MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D


class Flatten(Layer):
    _kind = FLATTEN


class Dropout(Layer):
    _kind = DROPOUT

    def __init__(self, rate, noise_shape=None, seed=None, **kw):
        super().__init__(**kw)
        if not 0 <= rate < 1:
            raise errors.InvalidArgumentError(message="Dropout: rate must be in [0, 1), got %r" % rate)
        self.rate = float(rate)
        self.seed = seed

    def _fill(self, c):
        c.rate = self.rate
        if self.seed:
            c.seed = int(self.seed)


class BatchNormalization(Layer):
    _kind = BATCHNORM

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, **kw):
        super().__init__(**kw)
        self.axis, self.momentum, self.epsilon = axis, momentum, epsilon

    def _fill(self, c):
        c.momentum = self.momentum
        c.epsilon = self.epsilon


class LayerNormalization(Layer):
    _kind = LAYERNORM

    def __init__(self, axis=-1, epsilon=1e-3, **kw):
        super().__init__(**kw)
        self.axis, self.epsilon = axis, epsilon

    def _fill(self, c):
        c.epsilon = self.epsilon


class Embedding(Layer):
    _kind = EMBEDDING

    def __init__(self, input_dim, output_dim, **kw):
        super().__init__(**kw)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)

    def _fill(self, c):
        c.input_dim = self.input_dim
        c.output_dim = self.output_dim


class Activation(Layer):
    _kind = ACTIVATION

    def __init__(self, activation, **kw):
        super().__init__(**kw)
        self.activation = activation
        _act(activation)

    def _fill(self, c):
        c.activation = _act(self.activation)


class ReLU(Activation):
    def __init__(self, **kw):
        super().__init__("relu", **kw)


class Softmax(Activation):
    def __init__(self, axis=-1, **kw):
        super().__init__("softmax", **kw)


class Reshape(Layer):
    _kind = RESHAPE

    def __init__(self, target_shape, **kw):
        super().__init__(**kw)
        self.target_shape = tuple(target_shape)

    def _fill(self, c):
        c.target_rank = len(self.target_shape)
        for i, d in enumerate(self.target_shape):
            c.target[i] = d
