"""Import a prefill's KV cache into a fresh model and decode greedily from it: as
it is (the reference), or as a device would take it (cast to bf16, token-major,
bf16 compute). Writes the decoded tokens, their logits, the first decoded
position's logits and the first slots of the cache read back from the model."""

import argparse

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from common import Clock, cache_from, device, kv_tensors, load_model, write_metrics

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--kv", required=True)
p.add_argument("--prompt", required=True)
p.add_argument("--next", required=True, help="the prefill's greedy next token (tokens.npy)")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--slots", type=int, required=True)
p.add_argument("--cast", choices=["none", "bf16"], default="none")
p.add_argument("--layout", choices=["head-major", "token-major"], default="head-major")
p.add_argument("--numerics", choices=["f32", "bf16"], default="f32")
p.add_argument("--out", required=True)
a = p.parse_args()

dev = device()
dtype = torch.bfloat16 if a.numerics == "bf16" else torch.float32
model = load_model(a.model, dev, dtype)
kv = load_file(a.kv)
k, v = kv["k"], kv["v"]
with Clock(dev) as imported:
    if a.cast == "bf16":
        k, v = k.to(torch.bfloat16), v.to(torch.bfloat16)
    if a.layout == "token-major":
        # The device keeps [layers, tokens, kv_heads, head_dim]; the model reads
        # it back head-major.
        k, v = k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
        k, v = k.transpose(1, 2), v.transpose(1, 2)
    cache = cache_from(k.to(dev, dtype), v.to(dev, dtype))
readback_k, readback_v = kv_tensors(cache)
save_file(
    {
        "k": readback_k[:, :, : a.slots].float().cpu().contiguous(),
        "v": readback_v[:, :, : a.slots].float().cpu().contiguous(),
    },
    f"{a.out}/kv_readback.safetensors",
)
prompt = np.load(a.prompt)
# Every handoff starts from the token the prefill chose, right after the imported
# context: the first decoded position reads the imported cache alone.
token = torch.from_numpy(np.load(a.next)[:1]).to(dev)
tokens, logits = [], []
with torch.no_grad(), Clock(dev) as decoded:
    for _ in range(a.steps):
        out = model(input_ids=token[None], past_key_values=cache, use_cache=True)
        step = out.logits[0, -1].float()
        logits.append(step.cpu())
        token = step.argmax(-1, keepdim=True)
        tokens.append(int(token))
logits = torch.stack(logits)
np.save(f"{a.out}/tokens.npy", np.array(tokens, dtype=np.int64))
np.save(f"{a.out}/logits.npy", logits.numpy())
np.save(f"{a.out}/first_logits.npy", logits[:1].numpy())
write_metrics(
    {
        "import_ms": imported.ms,
        "decode_ms": decoded.ms,
        "steps": a.steps,
        "tokens_per_s": a.steps / (decoded.ms / 1000.0),
        "context": int(prompt.shape[0]),
        "cast": a.cast,
        "layout": a.layout,
        "numerics": a.numerics,
        "device": dev.type,
    }
)
print(f"decoded {a.steps} tokens on {dev.type} in {decoded.ms:.1f} ms")
