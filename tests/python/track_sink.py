"""A stand-in for scripts/view/track.py's sinks (TensorBoard, wandb) that keeps what it is
given, so the tests of track.py's reader see exactly which (tag, step, value) it would log."""


class Recorder:
    def __init__(self):
        self.logged = []

    def begin(self):
        pass

    def log(self, values, step):
        self.logged.extend((tag, step, v) for tag, v in values.items())

    def flush(self):
        pass
