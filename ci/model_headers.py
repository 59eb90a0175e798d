"""A checkpoint folder's tensors, read from its shard headers alone (no tensor data): for the ci/bench scripts."""
import json, os, re

EXPERT = re.compile(r"layers\.(\d+)\..*\.experts\.(\d+)\.")


def top_k(model):
    """Routed experts per token, from config.json (text_config when nested)."""
    cfg = json.load(open(os.path.join(model, "config.json")))
    tc = cfg.get("text_config", cfg)
    return tc.get("num_experts_per_token", tc.get("num_experts_per_tok", 16))


def tensors(model):
    """(name, dtype, shape, bytes) of every tensor of every shard the index names."""
    idx = json.load(open(os.path.join(model, "model.safetensors.index.json")))["weight_map"]
    for shard in sorted(set(idx.values())):
        with open(os.path.join(model, shard), "rb") as f:
            hdr = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        for name, info in hdr.items():
            if name != "__metadata__":
                yield name, info["dtype"], info["shape"], info["data_offsets"][1] - info["data_offsets"][0]
