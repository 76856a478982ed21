"""TensorFlow's exception classes (tf.errors), raised with weft's message.

Each weft status code maps to the TensorFlow class of the same meaning; every class also derives from
the matching Python built-in where TensorFlow users would catch one (ValueError for bad arguments,
NotImplementedError for a missing kernel, MemoryError for out of memory, OSError for file errors), so
`except ValueError` works as well as `except tf.errors.InvalidArgumentError`.
"""

OK = 0


class OpError(Exception):
    """The base of weft's errors: `message` is weft's text, `error_code` its status code."""

    def __init__(self, node_def=None, op=None, message="", error_code=None, *args):
        if message == "" and isinstance(node_def, str) and op is None:
            message, node_def = node_def, None  # OpError("text")
        super().__init__(message)
        self.message = message
        self.op = op
        self.node_def = node_def
        self.error_code = error_code if error_code is not None else self.code

    code = 2

    def __str__(self):
        return self.message


def _cls(name, code, *bases):
    return type(name, (OpError,) + bases, {"code": code, "__module__": __name__})


CancelledError = _cls("CancelledError", 1)
UnknownError = _cls("UnknownError", 2)
InvalidArgumentError = _cls("InvalidArgumentError", 3, ValueError)
DeadlineExceededError = _cls("DeadlineExceededError", 4)
NotFoundError = _cls("NotFoundError", 5, LookupError)
AlreadyExistsError = _cls("AlreadyExistsError", 6)
PermissionDeniedError = _cls("PermissionDeniedError", 7)
ResourceExhaustedError = _cls("ResourceExhaustedError", 8, MemoryError)
FailedPreconditionError = _cls("FailedPreconditionError", 9, RuntimeError)
AbortedError = _cls("AbortedError", 10)
OutOfRangeError = _cls("OutOfRangeError", 11)
UnimplementedError = _cls("UnimplementedError", 12, NotImplementedError)
InternalError = _cls("InternalError", 13, RuntimeError)
UnavailableError = _cls("UnavailableError", 14, RuntimeError)
DataLossError = _cls("DataLossError", 15, OSError)
# weft's IO_ERROR (TensorFlow reports those as NotFound or Unknown): an OSError too
IOError_ = _cls("IOError", 2, OSError)

# weft's wf_code -> class
_BY_WEFT_CODE = {
    1: InvalidArgumentError, 2: NotFoundError, 3: AlreadyExistsError, 4: ResourceExhaustedError,
    5: UnimplementedError, 6: FailedPreconditionError, 7: InternalError, 8: UnavailableError,
    9: CancelledError, 10: IOError_, 11: DataLossError,
}


def from_code(weft_code, message):
    return _BY_WEFT_CODE.get(weft_code, UnknownError)(message=message)
