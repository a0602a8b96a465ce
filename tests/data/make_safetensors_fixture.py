#!/usr/bin/env python3
"""Writes tests/data/fixture.safetensors with the Python safetensors package
(the file tests/check_safetensors.c reads and checks value by value):

    pip install safetensors numpy ml_dtypes
    python3 tests/data/make_safetensors_fixture.py tests/data/fixture.safetensors
"""
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

tensors = {
    "fc.weight": (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0),
    "fc.bias": np.array([1.5, -2.25, 65504.0], dtype=np.float16),
    "emb.weight": np.array([[1.0, 3.140625], [-0.0078125, 256.0]],
                           dtype=ml_dtypes.bfloat16),
    "ids": np.array([7, -1, 0, 2147483647], dtype=np.int32),
    "q": np.array([-127, 0, 5, 127], dtype=np.int8),
}
save_file(tensors, sys.argv[1], metadata={"model": "mlp", "widths": "784-256-10"})
