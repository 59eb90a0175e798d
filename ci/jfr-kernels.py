"""Where a decode step's time goes, by kernel, next to the bytes each kernel reads: a JFR recording of `k3 run`.

The caller thread runs the first share of every parallel kernel (k3j.kernels.Workers), so its execution samples
inside the forward pass are a fair split of the step's time between kernels. Samples outside the forward pass
(start-up, loading) are left out and counted on their own line.

usage: jfr-kernels.py RECORDING.jfr MODEL_DIR SECONDS_PER_STEP   (JAVA_HOME: the jfr tool)
Prints one table: kernel, share of samples, seconds per step, bytes per step, GB/s while in that kernel.
"""
import os, re, subprocess, sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_headers  # noqa: E402

jfr, model, step = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = subprocess.run([os.path.join(os.environ["JAVA_HOME"], "bin", "jfr"), "print", "--events", "jdk.ExecutionSample", "--stack-depth", "40", jfr],
                      check=True, capture_output=True, text=True).stdout

# the first frame from the top of the stack that names a kernel or a call site decides (MatVec itself names none:
# its caller says what the matrix is; an expert's matmul sits inside Forward.moe, so Mxfp4 is matched first)
KINDS = [
    ("routed experts (MXFP4)", ("k3j.kernels.Mxfp4.",)),
    ("router", ("k3j.kernels.Router.",)),
    ("KDA recurrence, conv, gates", ("k3j.kernels.Kda.", "k3j.kernels.Activations.shortConv")),
    ("MLA attention", ("k3j.kernels.MlaAttention.", "k3j.kernels.MlaKv.")),
    ("MoE bf16: latent down/up, shared experts", ("k3j.model.Forward.moe",)),
    ("token mixer projections (bf16)", ("k3j.kernels.Layers.kda", "k3j.kernels.Layers.mla")),
    ("dense MLP (bf16, layer 0)", ("k3j.kernels.Layers.mlp",)),
    ("AttnRes, norms", ("k3j.kernels.AttnRes.", "k3j.kernels.Norms.")),
    ("LM head (bf16)", ("k3j.model.Forward.run",)),   # reached only by a matmul called from the model's top level
]
counts, outside = Counter(), 0
for ev in text.split("jdk.ExecutionSample {")[1:]:
    th = re.search(r'sampledThread = "([^"]+)"', ev)
    if not th or th.group(1) != "main":
        continue
    frames = re.findall(r"^\s+([\w.$]+)\(", ev, re.M)
    if not any(f.startswith("k3j.model.Forward.") for f in frames):
        outside += 1
        continue
    kind = "other (forward-pass glue)"
    for f in frames:
        hit = next((k for k, prefixes in KINDS if f.startswith(prefixes)), None)
        if hit:
            kind = hit
            break
    counts[kind] += 1

# bytes a decode step reads per kind, from the shard headers
topk = model_headers.top_k(model)
size, expert = Counter(), Counter()
for name, _, _, n in model_headers.tensors(model):
    m = model_headers.EXPERT.search(name)
    if m:
        expert[(int(m.group(1)), int(m.group(2)))] += n
    elif "lm_head" in name:
        size["LM head (bf16)"] += n
    elif ".gate.weight" in name or "e_score_correction" in name:
        size["router"] += n
    elif "block_sparse_moe" in name:
        size["MoE bf16: latent down/up, shared experts"] += n
    elif ".self_attn." in name:
        size["token mixer projections (bf16)"] += n
    elif ".mlp." in name:
        size["dense MLP (bf16, layer 0)"] += n
if expert:
    layers = len({l for l, _ in expert})
    size["routed experts (MXFP4)"] = layers * topk * max(expert.values())

total = sum(counts.values())
print(f"decode profile: {total} caller-thread samples in the forward pass ({outside} outside it left out), {step:.3f} s/step")
print("| kernel | share | s/step | GB read/step | GB/s in kernel |")
print("|---|---|---|---|---|")
for kind, c in counts.most_common():
    sec = step * c / total
    gb = size.get(kind, 0) / 1e9
    rate = f"{gb / sec:.1f}" if gb and sec else "-"
    print(f"| {kind} | {100 * c / total:.1f} % | {sec:.3f} | {gb:.2f} | {rate} |" if gb else f"| {kind} | {100 * c / total:.1f} % | {sec:.3f} | - | - |")
