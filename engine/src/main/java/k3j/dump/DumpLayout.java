package k3j.dump;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import k3j.config.LayerKind;
import k3j.config.MlpKind;
import k3j.config.ModelConfig;

/**
 * Every array a reference dump must hold for a model config and T ids (docs/formats.md §7.2), with
 * its dtype, its shape and what the harness does with it. Nothing in a dump goes unaccounted for: an array
 * the harness does not read is listed here as {@link Use#UNUSED} with the reason, so a dump with an extra,
 * missing, reshaped or truncated array is refused before any verdict ({@link ReferenceDump#checkArrays}).
 */
public record DumpLayout(Map<String, Expected> arrays) {

    /** What the harness does with an array. */
    public enum Use {
        /** judged against the engine's own result */
        COMPARED,
        /** fed to the engine as a layer's input (its bytes are sha256-checked when read) */
        INPUT,
        /** not read by the conformance comparison: the reason is in {@link Expected#why()} */
        UNUSED
    }

    /** One expected array; {@code why} says what reads it, or why nothing does. */
    public record Expected(String dtype, int[] shape, Use use, String why, boolean optional) {
        Expected(String dtype, int[] shape, Use use, String why) {
            this(dtype, shape, use, why, false);
        }

        public long bytes() {
            long n = 4;
            for (int d : shape) n *= d;
            return n;
        }

        String shapeText() {
            return Arrays.toString(shape);
        }
    }

    public DumpLayout {
        arrays = Map.copyOf(arrays);
    }

    /** The arrays of a dump of {@code config} over {@code tokens} ids of which {@code generated} were generated. */
    public static DumpLayout of(ModelConfig c, int tokens, int generated) {
        int t = tokens, e = c.hiddenSize();
        Map<String, Expected> m = new LinkedHashMap<>();
        m.put("ids", new Expected("I32", new int[] {t}, Use.COMPARED, "equal to the manifest's ids"));
        m.put("greedy_ids", new Expected("I32", new int[] {generated}, Use.COMPARED, "equal to the manifest's generated_ids and the engine's greedy ids"));
        m.put("logits", new Expected("F32", new int[] {t, c.vocabSize()}, Use.COMPARED, "logit parity at every position"));
        m.put("snapshots", new Expected("F32", new int[] {c.attnResBoundaries().size(), t, e}, Use.INPUT, "each layer's AttnRes snapshots"));
        m.put("final_mix", new Expected("F32", new int[] {t, e}, Use.UNUSED, "judged through the logits it produces (the oracle gate compares it directly)"));
        m.put("final_norm", new Expected("F32", new int[] {t, e}, Use.UNUSED, "judged through the logits it produces (the oracle gate compares it directly)"));
        for (int i = 0; i < c.layerCount(); i++) {
            String p = "layers." + i + ".";
            m.put(p + "partial_in", new Expected("F32", new int[] {t, e}, Use.INPUT, "the layer's input"));
            for (String s : Stage.NAMES) m.put(p + s, new Expected("F32", new int[] {t, e}, Use.COMPARED, "a stage"));
            if (c.mlpKind(i) == MlpKind.MOE) {
                m.put(p + "moe_idx", new Expected("I32", new int[] {t, c.topK()}, Use.COMPARED, "routing, exactly"));
                m.put(p + Stage.MOE_WEIGHT, new Expected("F32", new int[] {t, c.topK()}, Use.COMPARED, "a stage"));
                m.put(p + "moe_choice", new Expected("F32", new int[] {t, c.expertCount()}, Use.INPUT,
                        "the selection scores the near-tie routing rule reads"));
            }
            if (c.layerKind(i) == LayerKind.KDA) {
                // states are optional (a dump written without them, e.g. at released widths): compared when present
                m.put(p + "kda_state", new Expected("F32", new int[] {c.kdaHeads(), c.kdaHeadDim(), c.kdaHeadDim()}, Use.COMPARED, "the state after the layer", true));
                for (String conv : CONV_STATES) {
                    m.put(p + conv, new Expected("F32", new int[] {c.kdaWidth(), c.shortConvKernel() - 1}, Use.COMPARED, "the state after the layer", true));
                }
            } else {
                m.put(p + "mla_kv", new Expected("F32", new int[] {t, c.mlaHeads(), c.mlaKvHeadDim()}, Use.UNUSED,
                        "a layer run alone does not return its MLA cache; attn_out over all T positions depends on it", true));
                m.put(p + "mla_rope", new Expected("F32", new int[] {t, c.qkRopeHeadDim()}, Use.UNUSED,
                        "a layer run alone does not return its MLA cache; attn_out over all T positions depends on it", true));
            }
        }
        return new DumpLayout(m);
    }

    /** The KDA short-conv states, compared after a layer like its recurrent state. */
    public static final java.util.List<String> CONV_STATES = java.util.List.of("q_conv_state", "k_conv_state", "v_conv_state");
}
