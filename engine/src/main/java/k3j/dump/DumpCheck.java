package k3j.dump;

import java.util.Arrays;
import k3j.config.ModelConfig;
import k3j.verdict.ConformException;

/**
 * Everything in a reference dump that steers a verdict, against the model's config and the harness's own derivation,
 * before any layer runs: layer count and map, each layer's mixer, MLP, boundary and snapshot counts, the boundaries,
 * the ids, the budget (its widths against the model's as well as the dump's own config: {@link ReferenceDump#budget()}),
 * and every array (present, shaped, hashed, sized; see {@link DumpLayout}). A disagreement is refused naming the field.
 */
public final class DumpCheck {
    private DumpCheck() {}

    /** Refuses, naming the field, anything in {@code dump} its config does not give. */
    public static void against(ReferenceDump dump, ModelConfig config) {
        String src = dump.source().toString();
        int[] ids = dump.ids();
        int tokens = ids.length;
        if (tokens < 1) throw ReferenceDump.mismatch(src + ": manifest ids is empty");
        Budget budget = dump.budget();
        if (config.layerCount() != dump.layerCount()) {
            throw ReferenceDump.mismatch(src + " has " + dump.layerCount() + " layers, the model " + config.layerCount());
        }
        String map = dump.field("layer_map").asText();
        if (!map.equals(config.layerMap())) throw ReferenceDump.mismatch(src + " was made for layer map " + map + ", the model's config gives " + config.layerMap());
        int bs = config.attnResBlockSize();
        for (int i = 0; i < config.layerCount(); i++) {
            ReferenceDump.LayerInfo l = dump.layer(i);
            String mixer = config.layerKind(i) == k3j.config.LayerKind.KDA ? "KDA" : "MLA";
            String mlp = config.mlpKind(i) == k3j.config.MlpKind.MOE ? "moe" : "dense";
            int snapsAttn = (i + bs - 1) / bs, snapsMlp = i / bs + 1;
            if (!l.mixer().equals(mixer)) throw fieldMismatch(src, i, "mixer", l.mixer().toLowerCase(java.util.Locale.ROOT), mixer.toLowerCase(java.util.Locale.ROOT));
            if (!l.mlp().equals(mlp)) throw fieldMismatch(src, i, "mlp", l.mlp(), mlp);
            if (l.boundary() != config.isAttnResBoundary(i)) throw fieldMismatch(src, i, "boundary", l.boundary(), config.isAttnResBoundary(i));
            if (l.snapshotsAttn() != snapsAttn) throw fieldMismatch(src, i, "snapshots_attn", l.snapshotsAttn(), snapsAttn);
            if (l.snapshotsMlp() != snapsMlp) throw fieldMismatch(src, i, "snapshots_mlp", l.snapshotsMlp(), snapsMlp);
        }
        int[] boundaries = dump.ints("boundaries");
        int[] want = config.attnResBoundaries().stream().mapToInt(Integer::intValue).toArray();
        if (!Arrays.equals(boundaries, want)) throw ReferenceDump.mismatch(src + ": manifest boundaries " + Arrays.toString(boundaries) + ", the config gives " + Arrays.toString(want));
        int[] prompt = dump.promptIds(), generated = dump.generatedIds();
        int[] joined = Arrays.copyOf(prompt, prompt.length + generated.length);
        System.arraycopy(generated, 0, joined, prompt.length, generated.length);
        if (!Arrays.equals(ids, joined)) throw ReferenceDump.mismatch(src + ": manifest ids is not prompt_ids followed by generated_ids");
        for (int id : ids) if (id < 0 || id >= config.vocabSize()) throw ReferenceDump.mismatch(src + ": manifest ids holds " + id + ", outside the vocabulary of " + config.vocabSize());
        budget.check(config, src);
        dump.checkArrays(DumpLayout.of(config, tokens, generated.length));
        if (!Arrays.equals(dump.i32("ids"), ids)) throw ReferenceDump.mismatch(src + ": ids.bin and the manifest's ids disagree");
        if (!Arrays.equals(dump.i32("greedy_ids"), generated)) throw ReferenceDump.mismatch(src + ": greedy_ids.bin and the manifest's generated_ids disagree");
    }

    private static ConformException fieldMismatch(String src, int layer, String field, Object got, Object want) {
        return ReferenceDump.mismatch(src + ": manifest layers[" + layer + "]." + field + " = " + got + ", but the model's config gives " + want);
    }
}
