package k3j.dump;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import k3j.io.StrictJson;

/**
 * A dump manifest's members checked by JSON type before anything reads them ({@link ReferenceDump}'s opening): a
 * value of another type is refused naming its key; nothing is coerced.
 */
final class ReferenceManifest {
    private ReferenceManifest() {}

    /** Every array entry's members, by JSON type: {file, dtype: strings; shape: ints; sha256: string}. */
    static void checkArrayTypes(JsonNode manifest, String where) {
        JsonNode arrays = StrictJson.object(manifest, "arrays", where, ReferenceDump::mismatch);
        arrays.properties().forEach(en -> {
            String w = where + " arrays." + en.getKey();
            JsonNode a = en.getValue();
            if (!a.isObject()) throw ReferenceDump.mismatch(w + " is " + StrictJson.describe(a) + ", must be an object");
            StrictJson.text(a, "file", w, ReferenceDump::mismatch);
            StrictJson.text(a, "dtype", w, ReferenceDump::mismatch);
            StrictJson.text(a, "sha256", w, ReferenceDump::mismatch);
            for (int d : StrictJson.ints(a, "shape", w, ReferenceDump::mismatch)) if (d < 0) throw ReferenceDump.mismatch(w + ".shape has a negative dimension " + d);
        });
    }

    /**
     * A reference manifest's members, by JSON type, before anything reads them: the id lists, the layer table
     * ({@code index}, {@code snapshots_*} integers, {@code boundary} a boolean, {@code mixer}/{@code mlp} strings),
     * the config object, and every tolerance and budget figure a number. A value of another type ({@code "0"} for
     * an integer, {@code 1} for a boolean) is refused naming its key; nothing is coerced.
     */
    static void checkReferenceTypes(JsonNode manifest, String where) {
        String w = where;
        for (String ids : List.of("prompt_ids", "generated_ids", "ids", "boundaries")) StrictJson.ints(manifest, ids, w, ReferenceDump::mismatch);
        StrictJson.text(manifest, "layer_map", w, ReferenceDump::mismatch);
        StrictJson.object(manifest, "config", w, ReferenceDump::mismatch);
        JsonNode layers = StrictJson.array(manifest, "layers", w, ReferenceDump::mismatch);
        for (int i = 0; i < layers.size(); i++) {
            JsonNode l = layers.get(i);
            String lw = w + " layers[" + i + "]";
            if (!l.isObject()) throw ReferenceDump.mismatch(lw + " is " + StrictJson.describe(l) + ", must be an object");
            if (StrictJson.integer(l, "index", lw, ReferenceDump::mismatch) != i) throw ReferenceDump.mismatch(lw + ".index is " + l.get("index") + ", must be " + i);
            StrictJson.text(l, "mixer", lw, ReferenceDump::mismatch);
            StrictJson.text(l, "mlp", lw, ReferenceDump::mismatch);
            StrictJson.bool(l, "boundary", lw, ReferenceDump::mismatch);
            for (String k : List.of("snapshots_attn", "snapshots_mlp")) {
                long n = StrictJson.integer(l, k, lw, ReferenceDump::mismatch);
                if (n < 0 || n > Integer.MAX_VALUE) throw ReferenceDump.mismatch(lw + "." + k + " = " + n + " is not a snapshot count");
            }
        }
        checkProducer(manifest, where);
        JsonNode tol = manifest.get("tolerances");
        if (tol != null) {
            if (!tol.isObject()) throw ReferenceDump.mismatch(w + " tolerances is " + StrictJson.describe(tol) + ", must be an object");
            for (String what : List.of("logits", "final_mix", "final_norm")) {
                if (tol.has(what)) numbers(tol.get(what), w + " tolerances." + what);
            }
            JsonNode tl = tol.get("layers");
            if (tl != null) {
                if (!tl.isArray()) throw ReferenceDump.mismatch(w + " tolerances.layers is " + StrictJson.describe(tl) + ", must be a list");
                for (int i = 0; i < tl.size(); i++) {
                    String lw = w + " tolerances.layers[" + i + "]";
                    if (StrictJson.integer(tl.get(i), "index", lw, ReferenceDump::mismatch) != i) throw ReferenceDump.mismatch(lw + ".index is not " + i);
                    StrictJson.object(tl.get(i), "stages", lw, ReferenceDump::mismatch)
                            .properties().forEach(s -> numbers(s.getValue(), lw + ".stages." + s.getKey()));
                }
            }
        }
        JsonNode budget = manifest.get("budget");
        if (budget != null && !budget.isNull()) {
            if (!budget.isObject()) throw ReferenceDump.mismatch(w + " budget is " + StrictJson.describe(budget) + ", must be an object");
            StrictJson.number(budget, "eps32", w + " budget", ReferenceDump::mismatch);
            StrictJson.number(budget, "factor", w + " budget", ReferenceDump::mismatch);
            StrictJson.object(budget, "stages", w + " budget", ReferenceDump::mismatch).properties().forEach(s -> {
                numbers(s.getValue(), w + " budget.stages." + s.getKey());
                StrictJson.integer(s.getValue(), "width", w + " budget.stages." + s.getKey(), ReferenceDump::mismatch);
            });
            JsonNode logits = StrictJson.object(budget, "logits", w + " budget", ReferenceDump::mismatch);
            numbers(logits, w + " budget.logits");
            StrictJson.integer(logits, "width", w + " budget.logits", ReferenceDump::mismatch);
        }
    }

    /**
     * Who computed the reference must be unambiguous (docs/formats.md, producer): a {@code producer} is an object
     * with a name and a version; a dump that copies another's inputs ({@code inputs_from}) names its producer, and
     * one that claims "torch" is torch's own: no copied inputs, and the torch generator its manifest names.
     */
    private static void checkProducer(JsonNode manifest, String where) {
        String w = where;
        JsonNode p = manifest.get("producer"), from = manifest.get("inputs_from");
        if (p != null) {
            if (!p.isObject()) throw ReferenceDump.mismatch(w + " producer is " + StrictJson.describe(p) + ", must be an object");
            StrictJson.text(p, "name", w + " producer", ReferenceDump::mismatch);
            StrictJson.text(p, "version", w + " producer", ReferenceDump::mismatch);
        }
        if (from != null) {
            if (!from.isObject()) throw ReferenceDump.mismatch(w + " inputs_from is " + StrictJson.describe(from) + ", must be an object");
            String sha = StrictJson.text(from, "manifest_sha256", w + " inputs_from", ReferenceDump::mismatch);
            if (!ReferenceDump.SHA256.matcher(sha).matches()) throw ReferenceDump.mismatch(w + " inputs_from.manifest_sha256 '" + sha + "' is not a sha256");
            if (p == null) throw ReferenceDump.mismatch(w + ": it copies the inputs of another reference (inputs_from) but names no producer: who computed it is unknown");
        }
        if (p != null && p.path("name").asText().trim().equalsIgnoreCase("torch")) {
            if (from != null) throw ReferenceDump.mismatch(w + ": producer claims 'torch', but the dump copies another reference's inputs (inputs_from): another engine wrote it");
            if (!manifest.path("generator").path("torch").isTextual()) throw ReferenceDump.mismatch(w + ": producer claims 'torch', but the manifest names no torch generator (generator.torch)");
        }
    }

    /** Every member of a tolerance entry is a finite number (the rule text aside). */
    private static void numbers(JsonNode entry, String w) {
        if (!entry.isObject()) throw ReferenceDump.mismatch(w + " is " + StrictJson.describe(entry) + ", must be an object");
        entry.properties().forEach(en -> {
            if (!en.getValue().isNumber() || !Double.isFinite(en.getValue().doubleValue())) {
                throw ReferenceDump.mismatch(w + "." + en.getKey() + " is " + StrictJson.describe(en.getValue()) + ", must be a finite number");
            }
        });
    }
}
