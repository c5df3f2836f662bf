"""What the torch plan's steps share: the device a step owns, the model, the KV
cache as [layers, kv_heads, tokens, head_dim] tensors, and the metrics file."""

import json
import os
import time

import torch


def device():
    """cuda when the step owns a real GPU (the orchestrator says so in
    ORCHESTRATE_DEVICES and sets CUDA_VISIBLE_DEVICES), else cpu."""
    owned = json.loads(os.environ.get("ORCHESTRATE_DEVICES", "[]"))
    real_gpu = any(d["kind"] == "gpu" and not d["simulated"] for d in owned)
    if real_gpu and torch.cuda.is_available():
        # Bit-exact repeats on a GPU need deterministic kernels.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        return torch.device("cuda")
    return torch.device("cpu")


def load_model(path, dev, dtype=torch.float32):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(path, dtype=dtype)
    return model.to(dev).eval()


def kv_tensors(cache):
    """The cache's keys and values as [layers, kv_heads, tokens, head_dim] (batch 1),
    whichever form this transformers version keeps them in."""
    if hasattr(cache, "layers"):
        pairs = [(layer.keys, layer.values) for layer in cache.layers]
    elif hasattr(cache, "key_cache"):
        pairs = list(zip(cache.key_cache, cache.value_cache))
    else:
        pairs = [(k, v) for k, v in cache]
    k = torch.stack([p[0][0] for p in pairs])
    v = torch.stack([p[1][0] for p in pairs])
    return k, v


def cache_from(k, v):
    """A fresh cache holding k and v ([layers, kv_heads, tokens, head_dim])."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(k.shape[0]):
        cache.update(k[layer][None], v[layer][None], layer)
    return cache


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


class Clock:
    def __init__(self, dev):
        self.dev = dev

    def __enter__(self):
        sync(self.dev)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        sync(self.dev)
        self.ms = (time.perf_counter() - self.t0) * 1000.0


def write_metrics(values):
    path = os.environ.get("ORCHESTRATE_METRICS")
    if path:
        with open(path, "w") as f:
            json.dump(values, f)
