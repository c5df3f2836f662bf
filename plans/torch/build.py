"""Build a small Llama from a config with a fixed seed (random weights, nothing
downloaded) and save it with its config for the steps after."""

import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from common import write_metrics

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--layers", type=int, required=True)
p.add_argument("--hidden", type=int, required=True)
p.add_argument("--heads", type=int, required=True)
p.add_argument("--kv-heads", type=int, required=True)
p.add_argument("--ffn", type=int, required=True)
p.add_argument("--vocab", type=int, required=True)
p.add_argument("--context", type=int, required=True)
p.add_argument("--seed", type=int, required=True)
a = p.parse_args()

t0 = time.perf_counter()
torch.manual_seed(a.seed)
config = LlamaConfig(
    hidden_size=a.hidden,
    intermediate_size=a.ffn,
    num_hidden_layers=a.layers,
    num_attention_heads=a.heads,
    num_key_value_heads=a.kv_heads,
    vocab_size=a.vocab,
    max_position_embeddings=a.context,
    tie_word_embeddings=False,
)
model = LlamaForCausalLM(config).eval()
model.save_pretrained(a.out, safe_serialization=True)
params = sum(p.numel() for p in model.parameters())
write_metrics({"build_ms": (time.perf_counter() - t0) * 1000.0, "parameters": params})
print(json.dumps({"parameters": params, "head_dim": config.hidden_size // config.num_attention_heads}))
