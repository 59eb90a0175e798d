"""Whole decoder layers, level "layer" (docs/semantics.md §4.1)."""
import engine_model as em
import numpy as np
from kit import Fixture, TINY, fixture, normal, rng_for
from fx_layers import kda_weights, mla_params, mla_weights, moe_params, moe_weights


# --- decoder_layer (level "layer") ----------------------------------------------------------------------

def flatten(p):
    """Manifest params are scalars: nested geometry groups become "<group>.<key>"."""
    out = {}
    for k, v in p.items():
        if isinstance(v, dict):
            out.update({"%s.%s" % (k, kk): vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def decoder_fixture(name, layer_index, n_snap):
    E, T = TINY["E"], 4
    is_mla = (layer_index + 1) in (4, 8, 12, 13)            # tiny-k3 full_attn_layers, ONE-based
    kp = {"hidden": E, "heads": TINY["kda_heads"], "head_dim": TINY["kda_dim"], "conv_kernel": TINY["conv"],
          "lower_bound": TINY["lb"], "rms_eps": TINY["rms_eps"]}
    p = {"layer_index": layer_index, "attn_res_block_size": TINY["block"], "is_mla": is_mla,
         "boundary": layer_index % TINY["block"] == 0, "rms_eps": TINY["rms_eps"], "hidden": E}
    p["mla" if is_mla else "kda"] = mla_params() if is_mla else kp
    p["moe"] = moe_params()
    fx = Fixture(name, "decoder_layer", flatten(p), level="layer",
                 pitfall="docs/semantics.md §4.1, §11 #13 (snapshot = incoming partial, push AND clear on a boundary; "
                         "the layer returns the running partial)")
    r = rng_for(name)
    fx.add("partial", "f32", normal(r, T, E) * 1.5)
    fx.add("snapshots", "f32", np.stack([normal(r, T, E) * s for s in (2.0, 0.6, 1.0)[:n_snap]]))
    W = {}
    a = lambda nm, dt, arr: W.__setitem__(nm, fx.add(nm, dt, arr))
    a("input_layernorm.weight", "bf16", r.uniform(0.5, 1.5, E))
    a("post_attention_layernorm.weight", "bf16", r.uniform(0.5, 1.5, E))
    a("self_attention_res_norm.weight", "bf16", r.uniform(0.4, 1.6, E))
    a("self_attention_res_proj.weight", "bf16", normal(r, 1, E, scale=0.18))
    a("mlp_res_norm.weight", "bf16", r.uniform(0.4, 1.6, E))
    a("mlp_res_proj.weight", "bf16", normal(r, 1, E, scale=0.18))
    if is_mla:
        W.update(mla_weights(fx, rng_for(name + "_mixer"), E, p["mla"], lora_scale=1.5e-3))
    else:
        W.update(kda_weights(fx, rng_for(name + "_mixer"), E, kp["heads"], kp["head_dim"], kp["conv_kernel"]))
    W.update(moe_weights(fx, rng_for(name + "_moe"), p["moe"]))
    pv, sv = fx.values["partial"], fx.values["snapshots"]
    fx.run = lambda A, mut=(): em.decoder_layer(pv, list(sv), W, p, A, mut)
    fx.mutant("normalised_values", "AttnRes mixes the normalised candidates")
    fx.mutant("return_mixed", "layer returns the mixed MLP input + MLP output instead of the running partial")
    fx.mutant("skip_pre_attn_mix", "pre-attention AttnRes skipped although snapshots exist")
    if p["boundary"]:
        fx.mutant("snapshot_mixed", "boundary pushes the MIXED x instead of the incoming partial")
        fx.mutant("no_clear", "boundary keeps the running partial instead of clearing it")
    if is_mla:
        fx.notes.append("q_a_proj and the latent rows of kv_a_proj_with_mqa are scaled by 1.5e-3: LoRA activations "
                        "with mean square ~1e-6, so the LoRA-norm eps (1e-6, not rms_eps) is decisive")
    fx.extra["config"] = "oracle-fixtures/tiny-k3/config.json"
    fx.notes.append("layer %d of tiny-k3 (%s, %s), %d snapshots in; KDA state starts at zero, MLA uncached"
                    % (layer_index, "MLA" if is_mla else "KDA", "block boundary" if p["boundary"] else "no boundary", n_snap))
    return fx


@fixture
def decoder_layer_kda_boundary():
    return decoder_fixture("decoder_layer_kda_boundary", 5, 1)


@fixture
def decoder_layer_mla():
    return decoder_fixture("decoder_layer_mla", 7, 2)
