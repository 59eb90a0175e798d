package k3j.config;

/** The attention a decoder layer runs (docs/semantics.md §1.4): zero-based layer l is MLA iff l+1 is in the ONE-based full_attn_layers. */
public enum LayerKind {
    /** Kimi Delta Attention: linear attention with a per-head recurrent state. */
    KDA('K'),
    /** Gated Multi-head Latent Attention (NoPE): softmax attention over a latent KV cache. */
    MLA('M');

    /** The letter used in layer maps such as {@code KKKMKKKMKKKMM}. */
    public final char letter;

    LayerKind(char letter) {
        this.letter = letter;
    }
}
