package k3j.cache;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

/**
 * Records every get() request BEFORE it is served (pitfall 17), so the trace is what the model
 * asked for, independent of cache state; batch prefetches are not recorded (docs/semantics.md §6.9).
 * Writes {@code expert_trace.bin} (int32 little-endian (layer, expert) pairs in request order) and
 * {@code expert_hist.json} ({@code {"n_layers","n_experts","counts":{"<layer>,<expert>":n}}},
 * sparse, layer-major).
 */
public final class CacheTrace {
    public static final String TRACE_FILE = "expert_trace.bin";
    public static final String HIST_FILE = "expert_hist.json";

    private final int layers;
    private final int experts;
    private final long[] counts;
    private int[] pairs = new int[1024];
    private int size;

    public CacheTrace(int layers, int experts) {
        this.layers = layers;
        this.experts = experts;
        this.counts = new long[Math.multiplyExact(layers, experts)];
    }

    public synchronized void record(int layer, int expert) {
        counts[layer * experts + expert]++;
        if (size + 2 > pairs.length) pairs = Arrays.copyOf(pairs, pairs.length * 2);
        pairs[size++] = layer;
        pairs[size++] = expert;
    }

    public synchronized int requests() {
        return size / 2;
    }

    /** The recorded (layer, expert) pairs, flattened. */
    public synchronized int[] pairs() {
        return Arrays.copyOf(pairs, size);
    }

    /** Writes both files into {@code dir} (created if absent); returns the line to print. */
    public synchronized String write(Path dir) throws IOException {
        Files.createDirectories(dir);
        ByteBuffer bb = ByteBuffer.allocate(size * Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < size; i++) bb.putInt(pairs[i]);
        Path trace = dir.resolve(TRACE_FILE);
        k3j.io.AtomicWrite.bytes(trace, "--dump-cache-trace", bb.array());

        ObjectMapper json = new ObjectMapper();
        ObjectNode root = json.createObjectNode();
        root.put("n_layers", layers);
        root.put("n_experts", experts);
        ObjectNode c = root.putObject("counts");
        for (int k = 0; k < counts.length; k++) {
            if (counts[k] > 0) c.put((k / experts) + "," + (k % experts), counts[k]);
        }
        k3j.io.AtomicWrite.bytes(dir.resolve(HIST_FILE), "--dump-cache-trace", json.writeValueAsBytes(root));
        return String.format(Locale.ROOT, "wrote %s: %d requests (%.0f KB)", trace, size / 2, size * 4 / 1024.0);
    }

    /**
     * Reads {@code expert_trace.bin} from a trace directory or the file itself: int32 LE pairs;
     * an odd count, a negative id or a size not a multiple of 4 is an error naming the file.
     */
    public static int[] readPairs(Path dirOrFile) throws IOException {
        return readPairs(dirOrFile, Integer.MAX_VALUE, l -> true, Integer.MAX_VALUE, "");
    }

    /** The largest expert_hist.json read back (a sparse count per (layer, expert) of the released model fits). */
    public static final long MAX_HIST_BYTES = 64L << 20;

    /**
     * The geometry {@code {n_layers, n_experts}} that {@link #write} recorded in {@code expert_hist.json}: both
     * whole numbers from 1 to 65536, else an error naming the file and the key.
     */
    public static int[] readGeometry(Path hist) throws IOException {
        com.fasterxml.jackson.databind.JsonNode root = k3j.io.StrictJson.read(k3j.io.SafeFiles.readAll(hist, MAX_HIST_BYTES, "an expert histogram"));
        int[] out = new int[2];
        String[] keys = {"n_layers", "n_experts"};
        for (int k = 0; k < 2; k++) {
            com.fasterxml.jackson.databind.JsonNode v = root.get(keys[k]);
            if (v == null || !v.isInt() || v.asInt() < 1 || v.asInt() > 65536) {
                throw new IOException(hist + ": " + keys[k] + " must be a whole number from 1 to 65536, got " + v);
            }
            out[k] = v.asInt();
        }
        return out;
    }

    /** The most bytes a trace may hold (128 M requests; a token of the released model makes 1,472). */
    public static final long MAX_BYTES = 1L << 30;

    /**
     * As {@link #readPairs(Path)}, every pair checked against the model the trace is replayed for: a layer below
     * {@code layers} for which {@code moe} holds (a routed-MoE layer) and an expert below {@code experts};
     * {@code model} names the model in the refusal.
     */
    public static int[] readPairs(Path dirOrFile, int layers, java.util.function.IntPredicate moe, int experts, String model) throws IOException {
        Path f = Files.isDirectory(dirOrFile) ? dirOrFile.resolve(TRACE_FILE) : dirOrFile;
        if (!Files.exists(f)) throw new IOException("no trace at " + f + " (write one with k3 MODEL --dump-cache-trace DIR)");
        long bytes = k3j.io.SafeFiles.requireSize(f, MAX_BYTES, "an expert trace");
        if (bytes % 8 != 0) {
            throw new IOException(f + ": " + bytes + " bytes is not a whole number of int32 (layer, expert) pairs");
        }
        ByteBuffer bb = ByteBuffer.wrap(k3j.io.SafeFiles.readAll(f, MAX_BYTES, "an expert trace")).order(ByteOrder.LITTLE_ENDIAN);
        int[] out = new int[(int) (bytes / 4)];
        for (int i = 0; i < out.length; i++) {
            out[i] = bb.getInt();
            if (out[i] < 0) throw new IOException(f + ": negative id " + out[i] + " at pair " + i / 2);
            if (i % 2 == 0 && (out[i] >= layers || !moe.test(out[i]))) {
                throw new IOException(f + ": pair " + i / 2 + " names layer " + out[i] + ", which is not a routed-MoE layer of " + model
                        + " (is it another model's trace? give --model DIR for the model it was recorded on)");
            }
            if (i % 2 == 1 && out[i] >= experts) {
                throw new IOException(f + ": pair " + i / 2 + " names expert " + out[i] + " of layer " + out[i - 1] + ", but " + model + " has " + experts
                        + " experts per layer (is it another model's trace? give --model DIR)");
            }
        }
        return out;
    }
}
