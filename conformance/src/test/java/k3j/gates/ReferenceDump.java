package k3j.gates;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import k3j.harness.Project;

/**
 * A torch reference dump (reference-dumps/FORMAT.md, k3ref-dump v1): arrays by key with their size and
 * sha256 checked, and the tolerances of the manifest. Missing data fails, never skips.
 */
final class ReferenceDump {
    final Path dir;
    final JsonNode manifest;

    private ReferenceDump(Path dir) {
        this.dir = dir;
        this.manifest = Project.json(dir.resolve("manifest.json"));
        if (!"k3ref-dump".equals(manifest.path("format").asText()) || manifest.path("format_version").asInt() != 1) {
            fail(dir + ": not a k3ref-dump v1 (format '" + manifest.path("format").asText() + "')");
        }
    }

    static ReferenceDump open(Path dir) {
        return new ReferenceDump(Project.existing(dir));
    }

    int[] ints(String field) {
        JsonNode a = manifest.path(field);
        if (!a.isArray() || a.isEmpty()) fail(dir + "/manifest.json: '" + field + "' missing or empty");
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; i++) v[i] = a.get(i).intValue();
        return v;
    }

    JsonNode layer(int i) {
        JsonNode l = manifest.path("layers").get(i);
        if (l == null || l.path("index").asInt(-1) != i) fail(dir + "/manifest.json: no layers[" + i + "]");
        return l;
    }

    int layerCount() {
        return manifest.path("layers").size();
    }

    /** A model-level tolerance (tolerances.<what>.atol). */
    double atol(String what) {
        JsonNode t = manifest.path("tolerances").path(what).get("atol");
        if (t == null || !t.isNumber()) fail(dir + "/manifest.json: no tolerances." + what + ".atol");
        return t.doubleValue();
    }

    /** tolerances.layers[i].stages[stage].<kind> (kind atol_layer or atol_e2e). */
    double atol(int layer, String stage, String kind) {
        JsonNode t = manifest.path("tolerances").path("layers").get(layer);
        JsonNode v = t == null ? null : t.path("stages").path(stage).get(kind);
        if (v == null || !v.isNumber()) fail(dir + "/manifest.json: no tolerances.layers[" + layer + "].stages." + stage + "." + kind);
        return v.doubleValue();
    }

    boolean has(String key) {
        return manifest.path("arrays").has(key);
    }

    float[] f32(String key) {
        ByteBuffer b = bytes(key, "F32");
        float[] f = new float[b.remaining() / 4];
        b.asFloatBuffer().get(f);
        return f;
    }

    int[] i32(String key) {
        ByteBuffer b = bytes(key, "I32");
        int[] v = new int[b.remaining() / 4];
        b.asIntBuffer().get(v);
        return v;
    }

    int[] shape(String key) {
        JsonNode s = array(key).path("shape");
        int[] v = new int[s.size()];
        for (int i = 0; i < v.length; i++) v[i] = s.get(i).intValue();
        return v;
    }

    private JsonNode array(String key) {
        JsonNode a = manifest.path("arrays").get(key);
        if (a == null) fail(dir + ": array '" + key + "' is not in the manifest");
        return a;
    }

    private ByteBuffer bytes(String key, String dtype) {
        JsonNode a = array(key);
        if (!dtype.equals(a.path("dtype").asText())) fail(dir + ": array '" + key + "' is " + a.path("dtype").asText() + ", expected " + dtype);
        Path p = Project.existing(dir.resolve(a.path("file").asText()));
        byte[] b;
        try {
            b = Files.readAllBytes(p);
        } catch (IOException e) {
            throw new AssertionError("cannot read " + p + ": " + e.getMessage(), e);
        }
        long n = 4;
        for (int d : shape(key)) n *= d;
        if (b.length != n) fail(p + ": " + b.length + " bytes, shape " + a.path("shape") + " needs " + n);
        String sha = a.path("sha256").asText("");
        if (!sha.isEmpty() && !sha.equals(sha256(b))) fail(p + ": sha256 differs from the manifest (corrupt or stale dump)");
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** max |got − want| / atol (infinite on a length mismatch or a NaN). */
    static double ratio(float[] got, float[] want, double atol) {
        if (got.length != want.length) return Double.POSITIVE_INFINITY;
        double worst = 0.0;
        for (int i = 0; i < got.length; i++) {
            double r = Math.abs((double) got[i] - (double) want[i]) / atol;
            if (Double.isNaN(r)) return Double.POSITIVE_INFINITY;
            worst = Math.max(worst, r);
        }
        return worst;
    }
}
