"""tf.keras.callbacks: History, EarlyStopping, ModelCheckpoint, LambdaCallback, called after each epoch
from weft's fit loop (wf_fit_options.on_epoch_end)."""
import math
import os


class Callback:
    def __init__(self):
        self.model = None

    def set_model(self, model):
        self.model = model

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass


class History(Callback):
    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class CallbackList:
    def __init__(self, cbs, model):
        self.cbs = list(cbs)
        for c in self.cbs:
            c.set_model(model)
        self.model = model

    def append(self, c):
        c.set_model(self.model)
        self.cbs.append(c)

    def on_train_begin(self):
        for c in self.cbs:
            c.on_train_begin({})

    def on_train_end(self):
        for c in self.cbs:
            c.on_train_end({})

    def on_epoch_end(self, epoch, logs):
        for c in self.cbs:
            c.on_epoch_end(epoch, logs)


def _better(mode, monitor):
    if mode == "auto":
        mode = "max" if "acc" in monitor else "min"
    return (lambda a, b: a > b) if mode == "max" else (lambda a, b: a < b), mode


class EarlyStopping(Callback):
    """Stops fit when `monitor` has not improved by min_delta for `patience` epochs; with
    restore_best_weights the best epoch's weights come back at the end."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        self.verbose, self.baseline, self.restore_best_weights = verbose, baseline, restore_best_weights
        self.start_from_epoch = start_from_epoch
        self._cmp, self.mode = _better(mode, monitor)
        self.stopped_epoch = 0

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.best = self.baseline if self.baseline is not None else (math.inf if self.mode == "min" else -math.inf)
        self.best_weights = None
        self.stopped_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        v = (logs or {}).get(self.monitor)
        if v is None or epoch < self.start_from_epoch:
            return
        delta = -self.min_delta if self.mode == "min" else self.min_delta
        if self._cmp(v - delta, self.best):
            self.best, self.wait = v, 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = epoch
                self.model.stop_training = True
                if self.verbose:
                    print("Epoch %d: early stopping" % (epoch + 1))

    def on_train_end(self, logs=None):
        if self.restore_best_weights and self.best_weights is not None and self.stopped_epoch:
            self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Saves the weights (safetensors, wf_session_save) or the whole model (a SavedModel directory)
    after each epoch, or only when `monitor` improved with save_best_only. filepath may hold
    {epoch:02d} and the logs' names."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False, save_weights_only=False,
                 mode="auto", save_freq="epoch", **kw):
        super().__init__()
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        self.save_best_only, self.save_weights_only = save_best_only, save_weights_only
        self._cmp, self.mode = _better(mode, monitor)
        self.best = math.inf if self.mode == "min" else -math.inf

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.save_best_only:
            v = logs.get(self.monitor)
            if v is None or not self._cmp(v, self.best):
                return
            self.best = v
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)
        if self.verbose:
            print("Epoch %d: saved to %s" % (epoch + 1, path))


class LambdaCallback(Callback):
    def __init__(self, on_epoch_end=None, on_train_begin=None, on_train_end=None, **kw):
        super().__init__()
        self._e, self._b, self._t = on_epoch_end, on_train_begin, on_train_end

    def on_epoch_end(self, epoch, logs=None):
        if self._e:
            self._e(epoch, logs)

    def on_train_begin(self, logs=None):
        if self._b:
            self._b(logs)

    def on_train_end(self, logs=None):
        if self._t:
            self._t(logs)
