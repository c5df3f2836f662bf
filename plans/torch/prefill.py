"""Full-context prefill of N tokens: the KV cache exported as safetensors
[layers, kv_heads, tokens, head_dim] (f32), the logits of every position, the
prompt, and the greedy next token."""

import argparse

import numpy as np
import torch
from safetensors.torch import save_file

from common import Clock, device, kv_tensors, load_model, write_metrics

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--tokens", type=int, required=True)
p.add_argument("--seed", type=int, required=True)
p.add_argument("--out", required=True)
a = p.parse_args()

dev = device()
model = load_model(a.model, dev)
g = torch.Generator().manual_seed(a.seed)
prompt = torch.randint(0, model.config.vocab_size, (1, a.tokens), generator=g)
with torch.no_grad(), Clock(dev) as clock:
    out = model(input_ids=prompt.to(dev), use_cache=True)
k, v = kv_tensors(out.past_key_values)
logits = out.logits[0].float().cpu()
save_file({"k": k.float().cpu().contiguous(), "v": v.float().cpu().contiguous()}, f"{a.out}/kv.safetensors")
np.save(f"{a.out}/logits.npy", logits.numpy())
np.save(f"{a.out}/prompt.npy", prompt[0].numpy().astype(np.int64))
np.save(f"{a.out}/tokens.npy", logits[-1:].argmax(-1).numpy().astype(np.int64))
write_metrics(
    {
        "prefill_ms": clock.ms,
        "tokens": a.tokens,
        "tokens_per_s": a.tokens / (clock.ms / 1000.0),
        "device": dev.type,
        "torch": torch.__version__,
    }
)
print(f"prefill {a.tokens} tokens on {dev.type} in {clock.ms:.1f} ms")
