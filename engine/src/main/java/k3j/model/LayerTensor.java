package k3j.model;

/**
 * The checkpoint tensors of one decoder layer, by suffix after {@code language_model.model.layers.<L>.}
 * (docs/semantics.md §2.5): the ONE table of their names. {@link Binder} says each one's storage and shape,
 * {@link WeightLoader} which kernel argument it feeds; the routed experts' six parts are
 * {@link k3j.cache.ExpertPart}.
 */
public enum LayerTensor {
    INPUT_NORM("input_layernorm.weight"),
    POST_ATTENTION_NORM("post_attention_layernorm.weight"),
    ATTN_RES_NORM("self_attention_res_norm.weight"),
    ATTN_RES_PROJ("self_attention_res_proj.weight"),
    MLP_RES_NORM("mlp_res_norm.weight"),
    MLP_RES_PROJ("mlp_res_proj.weight"),

    KDA_Q("self_attn.q_proj.weight"),
    KDA_K("self_attn.k_proj.weight"),
    KDA_V("self_attn.v_proj.weight"),
    KDA_G("self_attn.g_proj.weight"),
    KDA_O("self_attn.o_proj.weight"),
    KDA_Q_CONV("self_attn.q_conv1d.weight"),
    KDA_K_CONV("self_attn.k_conv1d.weight"),
    KDA_V_CONV("self_attn.v_conv1d.weight"),
    KDA_F_A("self_attn.f_a_proj.weight"),
    KDA_F_B("self_attn.f_b_proj.weight"),
    KDA_B("self_attn.b_proj.weight"),
    KDA_A_LOG("self_attn.A_log"),
    KDA_DT_BIAS("self_attn.dt_bias"),
    KDA_O_NORM("self_attn.o_norm.weight"),

    MLA_Q_A("self_attn.q_a_proj.weight"),
    MLA_Q_A_NORM("self_attn.q_a_layernorm.weight"),
    MLA_Q_B("self_attn.q_b_proj.weight"),
    MLA_KV_A("self_attn.kv_a_proj_with_mqa.weight"),
    MLA_KV_A_NORM("self_attn.kv_a_layernorm.weight"),
    MLA_KV_B("self_attn.kv_b_proj.weight"),
    MLA_O("self_attn.o_proj.weight"),
    MLA_G("self_attn.g_proj.weight"),

    DENSE_GATE("mlp.gate_proj.weight"),
    DENSE_UP("mlp.up_proj.weight"),
    DENSE_DOWN("mlp.down_proj.weight"),

    MOE_ROUTER("block_sparse_moe.gate.weight"),
    MOE_ROUTER_BIAS("block_sparse_moe.gate.e_score_correction_bias"),
    MOE_LATENT_DOWN("block_sparse_moe.routed_expert_down_proj.weight"),
    MOE_LATENT_UP("block_sparse_moe.routed_expert_up_proj.weight"),
    MOE_LATENT_NORM("block_sparse_moe.routed_expert_norm.weight"),
    MOE_SHARED_GATE("block_sparse_moe.shared_experts.gate_proj.weight"),
    MOE_SHARED_UP("block_sparse_moe.shared_experts.up_proj.weight"),
    MOE_SHARED_DOWN("block_sparse_moe.shared_experts.down_proj.weight");

    /** The routed experts: {@code block_sparse_moe.experts.<M>.} then an {@link k3j.cache.ExpertPart}'s suffix. */
    public static final String EXPERTS = "block_sparse_moe.experts.";

    private final String suffix;

    LayerTensor(String suffix) {
        this.suffix = suffix;
    }

    public String suffix() {
        return suffix;
    }

    /** The prefix of routed expert {@code expert}'s six parts. */
    public static String expert(int expert) {
        return EXPERTS + expert + ".";
    }
}
