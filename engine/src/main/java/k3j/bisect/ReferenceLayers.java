package k3j.bisect;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What bisect needs of a torch reference dump (reference-dumps/FORMAT.md, k3ref-dump v1, a directory): each
 * layer's inputs (partial_in and the snapshots it sees), every stage's reference value, the MoE selection and
 * the per-stage budget of the manifest ({@code budget.stages.<stage>.budget}). Sizes are checked against the
 * manifest's shapes before use; a missing array or field is an error naming it, never a default.
 */
public final class ReferenceLayers {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path dir;
    private final JsonNode manifest;
    private final int tokens, hidden, layers;
    private final Map<String, float[]> floats = new HashMap<>();
    private float[] snapshots;

    private ReferenceLayers(Path dir, JsonNode manifest) {
        this.dir = dir;
        this.manifest = manifest;
        if (!"k3ref-dump".equals(manifest.path("format").asText()) || manifest.path("format_version").asInt() != 1) {
            throw new BisectException(dir + ": not a k3ref-dump v1 directory (format '" + manifest.path("format").asText() + "')");
        }
        this.tokens = need(manifest, "ids").size();
        this.hidden = need(need(manifest, "config"), "text_config").path("hidden_size").asInt(-1);
        if (hidden < 1) throw new BisectException(dir + "/manifest.json: config.text_config.hidden_size missing");
        this.layers = need(manifest, "layers").size();
    }

    /** Opens a dump directory (its manifest.json is read now, arrays when asked for). */
    public static ReferenceLayers open(Path dir) {
        Path m = dir.resolve("manifest.json");
        if (!Files.isRegularFile(m)) throw new BisectException(dir + ": no manifest.json (not a reference dump directory)");
        try {
            return new ReferenceLayers(dir, JSON.readTree(m.toFile()));
        } catch (IOException e) {
            throw new BisectException(m + ": cannot read: " + e.getMessage(), e);
        }
    }

    public Path dir() {
        return dir;
    }

    public int tokens() {
        return tokens;
    }

    public int hidden() {
        return hidden;
    }

    public int layerCount() {
        return layers;
    }

    /** The manifest's mixer of layer i: "kda" or "mla". */
    public String mixer(int layer) {
        return layer(layer).path("mixer").asText("?");
    }

    /** The h the layer receives, [T][E]. */
    public float[] partialIn(int layer) {
        return floats("layers." + layer + ".partial_in");
    }

    /** The snapshots layer i's attention mix sees (oldest first), each [T][E]. */
    public List<float[]> snapshots(int layer) {
        int n = need(layer(layer), "snapshots_attn").asInt();
        if (snapshots == null) snapshots = floats("snapshots");
        int size = tokens * hidden;
        if ((long) n * size > snapshots.length) throw new BisectException(dir + ": layer " + layer + " sees " + n + " snapshots, the dump holds " + snapshots.length / size);
        List<float[]> out = new ArrayList<>();
        for (int b = 0; b < n; b++) out.add(Arrays.copyOfRange(snapshots, b * size, (b + 1) * size));
        return out;
    }

    /** The reference value of a float stage, [T][E]. */
    public float[] stage(int layer, Stage stage) {
        if (stage == Stage.ROUTING) throw new IllegalArgumentException("routing is ids: use moeIdx");
        return floats("layers." + layer + "." + stage.key);
    }

    /** The MoE selection [T][K] in selection order, or null for a dense layer. */
    public int[] moeIdx(int layer) {
        String key = "layers." + layer + ".moe_idx";
        if (!manifest.path("arrays").has(key)) return null;
        ByteBuffer b = bytes(key, "I32");
        int[] v = new int[b.remaining() / 4];
        b.asIntBuffer().get(v);
        return v;
    }

    /** budget.stages.<stage>.budget: the largest max|engine − ref| / max|ref| a stage may show. */
    public double budget(Stage stage) {
        JsonNode v = manifest.path("budget").path("stages").path(stage.key).get("budget");
        if (v == null || !v.isNumber()) throw new BisectException(dir + "/manifest.json: no budget.stages." + stage.key + ".budget");
        return v.doubleValue();
    }

    private JsonNode layer(int i) {
        JsonNode l = manifest.path("layers").get(i);
        if (l == null || l.path("index").asInt(-1) != i) throw new BisectException(dir + "/manifest.json: no layers[" + i + "]");
        return l;
    }

    private float[] floats(String key) {
        float[] f = floats.get(key);
        if (f != null) return f;
        ByteBuffer b = bytes(key, "F32");
        f = new float[b.remaining() / 4];
        b.asFloatBuffer().get(f);
        floats.put(key, f);
        return f;
    }

    private ByteBuffer bytes(String key, String dtype) {
        JsonNode a = manifest.path("arrays").get(key);
        if (a == null) throw new BisectException(dir + ": array '" + key + "' is not in the manifest");
        if (!dtype.equals(a.path("dtype").asText())) throw new BisectException(dir + ": array '" + key + "' is " + a.path("dtype").asText() + ", expected " + dtype);
        long n = 4;
        for (JsonNode d : a.path("shape")) n *= d.asLong();
        Path p = dir.resolve(need(a, "file").asText());
        try {
            long size = Files.size(p);
            if (size != n) throw new BisectException(p + ": " + size + " bytes, shape " + a.path("shape") + " needs " + n);
            return ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        } catch (IOException e) {
            throw new BisectException(p + ": cannot read: " + e.getMessage(), e);
        }
    }

    private JsonNode need(JsonNode n, String field) {
        JsonNode v = n.get(field);
        if (v == null || v.isNull()) throw new BisectException(dir + "/manifest.json: '" + field + "' missing");
        return v;
    }
}
