"""Test reader: random samples shaped like the example model's input."""

import numpy as np


class ImageReader:
    def __init__(self, count=4, scale=1.0, **_ignored):
        rng = np.random.default_rng(0)
        self.samples = [{"input": (scale * rng.uniform(size=(1, 3, 32, 32))).astype(np.float32)} for _ in range(int(count))]

    def get_next(self):
        return self.samples.pop() if self.samples else None
