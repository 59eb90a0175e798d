#!/usr/bin/env python3
"""Writes the config gate's data (ConfigGate reads it; docs/semantics.md §1, §1.4).

    python3 oracle-fixtures/config/gen_cases.py        # from anywhere; stdlib only

Outputs, beside this file:
  tiny-flat.json   the tiny 13-layer oracle (../tiny-k3/config.json) in the FLAT shape of the C fixtures:
                   everything at the root, KDA keys spelled kda_num_heads / kda_head_dim, SiTU betas
                   spelled situ_beta / situ_linear_beta, no kda_layers.
  mutants/*.json   one file per case that changes its base.
  MANIFEST.json    sha256 of every file the gate reads (checked by ci/check-fixtures).
  cases.json       the cases: a base config + exactly one change + what must happen:
                   accept (with the facts the reader must derive: layer map, counts, boundaries,
                   snapshot capacity, the summary line after the source) or refuse (with fragments
                   that must appear in the message, optionally in order, and fragments that must not).

released.json is a hand-written copy of the released config.json (values from docs/semantics.md §1.4 and
public copies of the file); it is a base here, never rewritten.

The accept facts are computed below from the JSON by this script's own reading of the rules, not by
the Java reader: the gate compares the two.
"""
import copy
import hashlib
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.dirname(HERE)
RELEASED = "config/released.json"
TINY_NESTED = "tiny-k3/config.json"
TINY_FLAT = "config/tiny-flat.json"

MAX_TOP_K = 64

# the order the Java reader looks fields up in (its FIELDS table): missing names are listed in this order
FLAT_KEYS = [
    ("hidden_size", "hidden_size"), ("num_hidden_layers", "num_hidden_layers"), ("vocab_size", "vocab_size"),
    ("rms_norm_eps", "rms_norm_eps"), ("num_heads", "kda_num_heads"), ("head_dim", "kda_head_dim"),
    ("short_conv_kernel_size", "short_conv_kernel_size"), ("gate_lower_bound", "gate_lower_bound"),
    ("num_attention_heads", "num_attention_heads"), ("q_lora_rank", "q_lora_rank"),
    ("kv_lora_rank", "kv_lora_rank"), ("qk_nope_head_dim", "qk_nope_head_dim"),
    ("qk_rope_head_dim", "qk_rope_head_dim"), ("v_head_dim", "v_head_dim"),
    ("mla_use_output_gate", "mla_use_output_gate"), ("num_experts", "num_experts"),
    ("num_experts_per_token", "num_experts_per_token"), ("num_shared_experts", "num_shared_experts"),
    ("routed_expert_hidden_size", "routed_expert_hidden_size"), ("moe_intermediate_size", "moe_intermediate_size"),
    ("routed_scaling_factor", "routed_scaling_factor"), ("moe_renormalize", "moe_renormalize"),
    ("latent_moe_use_norm", "latent_moe_use_norm"), ("first_k_dense_replace", "first_k_dense_replace"),
    ("moe_layer_freq", "moe_layer_freq"), ("intermediate_size", "intermediate_size"),
    ("attn_res_block_size", "attn_res_block_size"), ("activation_situ_beta", "situ_beta"),
    ("activation_situ_linear_beta", "situ_linear_beta"), ("full_attn_layers", "full_attn_layers"),
]
BOOLEAN_DEFAULTS = {"mla_use_output_gate": True, "moe_renormalize": True, "latent_moe_use_norm": True}


def load(rel):
    with open(os.path.join(FIXTURES, rel)) as f:
        return json.load(f)


def sha256(rel):
    with open(os.path.join(FIXTURES, rel), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def dump(obj):
    return json.dumps(obj, indent=2) + "\n"


def flatten(nested):
    """The nested tiny config in the C fixtures' flat shape (docs/semantics.md §1.2)."""
    text = nested["text_config"]
    linear = text["linear_attn_config"]
    flat = {}
    for primary, flat_key in FLAT_KEYS:
        flat[flat_key] = linear[primary] if primary in linear else text[primary]
    flat["tie_word_embeddings"] = text["tie_word_embeddings"]
    flat["quantization_config"] = text["quantization_config"]
    return flat


# ---------------------------------------------------------------------------------------------------
# this script's own reading of an accepted config: the facts the gate checks the Java reader against

def facts(cfg, source_shape):
    text = cfg.get("text_config", cfg)
    linear = text.get("linear_attn_config", {})

    def get(primary, alias=None):
        for obj in (text, linear, cfg):
            for k in (primary, alias):
                if k is not None and k in obj:
                    return obj[k]
        return None

    n = get("num_hidden_layers")
    full = get("full_attn_layers")
    first_dense, freq, block = get("first_k_dense_replace"), get("moe_layer_freq"), get("attn_res_block_size")
    layer_map = "".join("M" if (l + 1) in full else "K" for l in range(n))  # ONE-based list
    moe = [l for l in range(n) if l >= first_dense and l % freq == 0]
    defaulted = [f"{k}={str(v).lower()}" for k, v in BOOLEAN_DEFAULTS.items() if get(k) is None]
    tail = (f"({source_shape} shape) | hidden={get('hidden_size')} layers={n} vocab={get('vocab_size')}"
            f" | {layer_map.count('M')} MLA + {layer_map.count('K')} KDA"
            f" | experts {get('num_experts')} top {get('num_experts_per_token')} shared {get('num_shared_experts')}"
            f" | latent={get('routed_expert_hidden_size')}")
    if defaulted:
        tail += " | defaulted: " + ", ".join(defaulted)
    return {
        "layer_map": layer_map,
        "mla_layers": layer_map.count("M"),
        "kda_layers": layer_map.count("K"),
        "moe_layers": len(moe),
        "dense_layers": [l for l in range(n) if l not in moe],
        "attn_res_boundaries": list(range(0, n, block)),
        "snapshot_capacity": n // block + 2,
        "summary_after_source": tail,
    }


# ---------------------------------------------------------------------------------------------------
# changes: each case applies exactly one

def set_at(path, value):
    def apply(cfg):
        obj = cfg
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return {"op": "set", "path": path, "value": value}, apply


def remove_at(*paths):
    def apply(cfg):
        for path in paths:
            obj = cfg
            for k in path[:-1]:
                obj = obj[k]
            del obj[path[-1]]
    return {"op": "remove", "paths": list(paths)}, apply


def rename_at(path, new_key):
    def apply(cfg):
        obj = cfg
        for k in path[:-1]:
            obj = obj[k]
        obj[new_key] = obj.pop(path[-1])
    return {"op": "rename", "path": path, "to": new_key}, apply


def raw(description, edit):
    """A change to the file's text, for configs that are not valid JSON."""
    return {"op": "text", "what": description}, edit


NONE = ({"op": "none"}, None)

T = ["text_config"]
TL = ["text_config", "linear_attn_config"]
TQ = ["text_config", "quantization_config"]
RELEASED_ZERO_BASED = [4 * k - 1 for k in range(1, 24)] + [92]

# (name, base, change, expectation); expectation = ("accept",) or ("refuse", fragments, {ordered, absent})
CASES = [
    # --- accepted ---
    ("accept_released", RELEASED, NONE, ("accept",)),
    ("accept_tiny_nested", TINY_NESTED, NONE, ("accept",)),
    ("accept_tiny_flat", TINY_FLAT, NONE, ("accept",)),
    ("accept_flat_primary_kda_spelling", TINY_FLAT, rename_at(["kda_num_heads"], "num_heads"), ("accept",)),
    ("accept_flat_absent_boolean_defaults_loudly", TINY_FLAT, remove_at(["mla_use_output_gate"]), ("accept",)),
    ("accept_float_field_given_as_integer", TINY_FLAT, set_at(["gate_lower_bound"], -5), ("accept",)),
    ("accept_released_moe_every_second_layer", RELEASED, set_at(T + ["moe_layer_freq"], 2), ("accept",)),
    ("accept_tiny_first_two_dense", TINY_NESTED, set_at(T + ["first_k_dense_replace"], 2), ("accept",)),
    ("accept_released_topk_at_engine_max", RELEASED, set_at(T + ["num_experts_per_token"], MAX_TOP_K), ("accept",)),
    ("accept_flat_topk_equals_expert_count", TINY_FLAT, set_at(["num_experts_per_token"], 12), ("accept",)),
    ("accept_flat_first_layer_mla", TINY_FLAT, set_at(["full_attn_layers"], [1, 4, 8, 12, 13]), ("accept",)),
    ("accept_flat_unsorted_layer_list", TINY_FLAT, set_at(["full_attn_layers"], [13, 4, 12, 8]), ("accept",)),
    ("accept_flat_layers_a_multiple_of_block", TINY_FLAT, set_at(["attn_res_block_size"], 13), ("accept",)),

    # --- the layer map ---
    ("refuse_no_full_attn_layers", TINY_FLAT, remove_at(["full_attn_layers"]),
     ("refuse", ["missing required field full_attn_layers", "1 problem(s)"], {})),
    ("refuse_layer_index_999", TINY_FLAT, set_at(["full_attn_layers"], [4, 8, 12, 999]),
     ("refuse", ["full_attn_layers[3] = 999 is outside 1..13", "ONE-based"], {})),
    ("refuse_zero_based_list", TINY_FLAT, set_at(["full_attn_layers"], [0, 4, 8, 12]),
     ("refuse", ["full_attn_layers[0] = 0 is outside 1..13", "ONE-based", "zero-based"], {})),
    ("refuse_released_zero_based_list_caught_by_kda_layers", RELEASED,
     set_at(TL + ["full_attn_layers"], RELEASED_ZERO_BASED),
     ("refuse", ["kda_layers is not the complement of full_attn_layers", "ONE-based", "looks zero-based"],
      {"absent": ["outside 1..93"]})),
    ("refuse_kda_layers_disagree", RELEASED, set_at(TL + ["kda_layers"], list(range(2, 94))),
     ("refuse", ["kda_layers is not the complement"], {"absent": ["looks zero-based"]})),
    ("refuse_empty_full_attn_layers", TINY_FLAT, set_at(["full_attn_layers"], []),
     ("refuse", ["full_attn_layers is empty"], {})),
    ("refuse_every_layer_mla", TINY_FLAT, set_at(["full_attn_layers"], list(range(1, 14))),
     ("refuse", ["lists all 13 layers as MLA", "at least one KDA layer must remain"], {})),
    ("refuse_duplicate_layer", TINY_FLAT, set_at(["full_attn_layers"], [4, 8, 8, 13]),
     ("refuse", ["full_attn_layers[2] = 8 is a duplicate"], {})),
    ("refuse_layer_list_not_array", TINY_FLAT, set_at(["full_attn_layers"], "4,8,12,13"),
     ("refuse", ["full_attn_layers", "is a string"], {"absent": ["missing required field full_attn_layers"]})),
    ("refuse_layer_list_element_string", TINY_FLAT, set_at(["full_attn_layers"], [4, 8, "12", 13]),
     ("refuse", ["full_attn_layers[2] = \"12\" is a string"], {})),
    ("refuse_nested_without_linear_attn_config", TINY_NESTED, remove_at(TL),
     ("refuse", ["6 problem(s)", "text_config has no linear_attn_config",
                 "missing required field num_heads", "missing required field head_dim",
                 "missing required field short_conv_kernel_size", "missing required field gate_lower_bound",
                 "missing required field full_attn_layers"], {"ordered": True})),

    # --- top-k ---
    ("refuse_topk_above_engine_max", RELEASED, set_at(T + ["num_experts_per_token"], 65),
     ("refuse", ["num_experts_per_token = 65", "at most 64"], {"absent": ["exceeds num_experts"]})),
    ("refuse_topk_above_expert_count", TINY_FLAT, set_at(["num_experts_per_token"], 13),
     ("refuse", ["num_experts_per_token = 13 exceeds num_experts = 12"], {"absent": ["at most 64"]})),

    # --- types: wrong type is named as such, never as missing ---
    ("refuse_number_as_string", TINY_FLAT, set_at(["hidden_size"], "128"),
     ("refuse", ["hidden_size = \"128\" is a string"], {"absent": ["missing required field hidden_size"]})),
    ("refuse_float_as_string", RELEASED, set_at(T + ["rms_norm_eps"], "1e-05"),
     ("refuse", ["text_config.rms_norm_eps = \"1e-05\" is a string"], {})),
    ("refuse_int_with_fraction", TINY_FLAT, set_at(["num_experts_per_token"], 3.5),
     ("refuse", ["num_experts_per_token = 3.5 is not an integer"], {})),
    ("refuse_int_written_as_float", TINY_FLAT, set_at(["num_experts"], 12.0),
     ("refuse", ["num_experts = 12.0 is not an integer"], {})),
    ("refuse_int_beyond_32_bits", TINY_FLAT, set_at(["vocab_size"], 2 ** 32),
     ("refuse", ["vocab_size = 4294967296 does not fit a 32-bit int"], {})),
    ("refuse_null_field", TINY_FLAT, set_at(["vocab_size"], None),
     ("refuse", ["vocab_size = null is null"], {"absent": ["missing required field vocab_size"]})),
    ("refuse_boolean_as_number", TINY_FLAT, set_at(["moe_renormalize"], 1),
     ("refuse", ["moe_renormalize = 1 is a number; must be a JSON boolean"], {"absent": ["defaulted"]})),
    ("refuse_boolean_as_string", RELEASED, set_at(T + ["latent_moe_use_norm"], "true"),
     ("refuse", ["latent_moe_use_norm = \"true\" is a string"], {})),
    ("refuse_three_missing_fields", TINY_FLAT,
     remove_at(["hidden_size"], ["kda_num_heads"], ["num_experts"]),
     ("refuse", ["3 problem(s)", "missing required field hidden_size",
                 "missing required field num_heads (or kda_num_heads)",
                 "missing required field num_experts"], {"ordered": True})),
    ("refuse_two_missing_in_lookup_order", TINY_FLAT,
     remove_at(["situ_linear_beta"], ["q_lora_rank"]),
     ("refuse", ["missing required field q_lora_rank",
                 "missing required field activation_situ_linear_beta (or situ_linear_beta)"], {"ordered": True})),
    ("refuse_released_missing_moe_layer_freq", RELEASED, remove_at(T + ["moe_layer_freq"]),
     ("refuse", ["missing required field moe_layer_freq"], {})),
    ("refuse_text_config_not_object", TINY_NESTED, set_at(["text_config"], []),
     ("refuse", ["text_config is an array, must be an object"], {})),
    ("refuse_ambiguous_head_dim", TINY_NESTED, set_at(T + ["head_dim"], 64),
     ("refuse", ["head_dim is ambiguous", "text_config.head_dim = 64",
                 "text_config.linear_attn_config.head_dim = 20"], {"ordered": True})),

    # --- ranges ---
    ("refuse_hidden_negative", TINY_FLAT, set_at(["hidden_size"], -128),
     ("refuse", ["hidden_size = -128 must be > 0"], {})),
    ("refuse_attn_res_block_zero", TINY_FLAT, set_at(["attn_res_block_size"], 0),
     ("refuse", ["attn_res_block_size = 0 must be > 0"], {})),
    ("refuse_conv_kernel_zero", TINY_FLAT, set_at(["short_conv_kernel_size"], 0),
     ("refuse", ["short_conv_kernel_size = 0 must be >= 1"], {})),
    ("refuse_moe_layer_freq_zero", RELEASED, set_at(T + ["moe_layer_freq"], 0),
     ("refuse", ["moe_layer_freq = 0 must be > 0"], {})),
    ("refuse_first_dense_beyond_layers", TINY_FLAT, set_at(["first_k_dense_replace"], 14),
     ("refuse", ["first_k_dense_replace = 14 is outside 0..13"], {})),
    ("refuse_situ_beta_zero", TINY_FLAT, set_at(["situ_beta"], 0.0),
     ("refuse", ["activation_situ_beta = 0.0 must be > 0"], {})),
    ("refuse_rms_eps_negative", RELEASED, set_at(T + ["rms_norm_eps"], -1e-05),
     ("refuse", ["rms_norm_eps", "must be > 0"], {})),
    ("refuse_kv_lora_zero", RELEASED, set_at(T + ["kv_lora_rank"], 0),
     ("refuse", ["kv_lora_rank = 0 must be > 0"], {})),

    # --- MXFP4 ---
    ("refuse_group_size_16", RELEASED, set_at(TQ + ["config_groups", "group_0", "weights", "group_size"], 16),
     ("refuse", ["group_size = 16", "group_size must be 32"], {})),
    ("refuse_quantization_without_groups", RELEASED, remove_at(TQ + ["config_groups"]),
     ("refuse", ["quantization_config must be an object with a non-empty config_groups"], {})),
    ("refuse_moe_intermediate_not_group_multiple", RELEASED, set_at(T + ["moe_intermediate_size"], 3080),
     ("refuse", ["moe_intermediate_size = 3080 is not a multiple of 32"], {})),
    ("refuse_latent_not_group_multiple", TINY_NESTED, set_at(T + ["routed_expert_hidden_size"], 72),
     ("refuse", ["routed_expert_hidden_size = 72 is not a multiple of 32"], {})),

    # --- present, but describing a different model ---
    ("refuse_rope_mla", RELEASED, set_at(T + ["mla_use_nope"], False),
     ("refuse", ["mla_use_nope = false describes a different model"], {})),
    ("refuse_low_rank_kda_gate", RELEASED, set_at(TL + ["use_full_rank_gate"], False),
     ("refuse", ["use_full_rank_gate = false describes a different model"], {})),
    ("refuse_silu_activation", TINY_NESTED, set_at(T + ["hidden_act"], "silu"),
     ("refuse", ["hidden_act = \"silu\" describes a different model"], {})),
    ("refuse_grouped_routing", RELEASED, set_at(T + ["num_expert_group"], 8),
     ("refuse", ["num_expert_group = 8 describes a different model"], {})),

    # --- the file itself ---
    ("refuse_truncated_json", TINY_FLAT, raw("the last 40 characters cut off", lambda t: t[:-40]),
     ("refuse", ["not valid JSON", "refuse_truncated_json.json"], {})),
    ("refuse_duplicate_key", TINY_FLAT, raw("a second hidden_size key first in the object",
                                            lambda t: t.replace("{", "{\n  \"hidden_size\": 64,", 1)),
     ("refuse", ["not valid JSON", "hidden_size"], {})),
    ("refuse_trailing_text", TINY_FLAT, raw("a second object after the config", lambda t: t + "\n{\"hidden_size\": 64}\n"),
     ("refuse", ["not valid JSON", "a second JSON value after the first"], {})),
    ("refuse_root_linear_attn_config_beside_text_config", TINY_NESTED,
     set_at(["linear_attn_config"], {"num_heads": 2, "head_dim": 20, "short_conv_kernel_size": 4, "full_attn_layers": [1]}),
     ("refuse", ["linear_attn_config is at the root beside text_config.linear_attn_config", "silently ignored"], {})),
    ("refuse_root_is_array", TINY_FLAT, raw("the object wrapped in an array", lambda t: "[" + t + "]"),
     ("refuse", ["the root is not a JSON object: an array"], {})),
]


def main():
    flat = flatten(load(TINY_NESTED))
    with open(os.path.join(FIXTURES, TINY_FLAT), "w") as f:
        f.write(dump(flat))

    mutants = os.path.join(HERE, "mutants")
    shutil.rmtree(mutants, ignore_errors=True)
    os.makedirs(mutants)
    names = set()
    cases = []
    for name, base, (change, apply), expect in CASES:
        assert name not in names, "duplicate case name " + name
        names.add(name)
        case = {"name": name, "base": base, "change": change, "expect": expect[0]}
        cfg = load(base)
        if change["op"] == "none":
            case["file"] = base
        else:
            case["file"] = "config/mutants/" + name + ".json"
            if change["op"] == "text":
                with open(os.path.join(FIXTURES, base)) as f:
                    text = apply(f.read())
            else:
                cfg = copy.deepcopy(cfg)
                apply(cfg)
                text = dump(cfg)
            with open(os.path.join(FIXTURES, case["file"]), "w") as f:
                f.write(text)
        if expect[0] == "accept":
            case["facts"] = facts(cfg, "nested" if "text_config" in cfg else "flat")
        else:
            _, fragments, options = expect
            case["fragments"] = fragments
            case["ordered"] = options.get("ordered", False)
            case["absent"] = options.get("absent", [])
        cases.append(case)

    with open(os.path.join(HERE, "cases.json"), "w") as f:
        f.write(json.dumps({
            "about": "ConfigGate cases, written by gen_cases.py: a base config + exactly one change + what must happen",
            "max_top_k": MAX_TOP_K,
            "cases": cases,
        }, indent=1) + "\n")
    # sha256 of every file the gate reads, for ci/check-fixtures; the tiny-k3 input is listed too, so a
    # change to it without regenerating these cases fails the check instead of going unnoticed
    files = [RELEASED, TINY_NESTED, TINY_FLAT, "config/cases.json"] + sorted(
        c["file"] for c in cases if c["file"].startswith("config/mutants/"))
    with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
        f.write(json.dumps({
            "about": "the config gate's data; regenerate with python3 oracle-fixtures/config/gen_cases.py",
            "files": [{"file": os.path.relpath(os.path.join(FIXTURES, rel), HERE), "sha256": sha256(rel)} for rel in files],
        }, indent=1) + "\n")
    print(f"wrote {len(cases)} cases ({sum(c['expect'] == 'accept' for c in cases)} accept), "
          f"{sum(c['change']['op'] != 'none' for c in cases)} mutants, {TINY_FLAT}")


if __name__ == "__main__":
    main()
