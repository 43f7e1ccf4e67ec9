"""A generator evaluator: one score per evaluation sample, so search.prune can stop a trial early."""


def per_sample_top1(model_path):
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for _ in range(8):
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        yield float(np.argmax(session.run(None, {"input": x})[0]) == 0)
