package k3j.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.function.Predicate;
import k3j.io.AtomicWrite;
import k3j.io.SafeFiles;
import k3j.io.StrictJson;
import k3j.io.TensorInfo;

/**
 * The sha256 of every byte of each tensor's data, by tensor name (docs/formats.md §18.5): the model's per-tensor digest
 * manifest, made once ({@code k3 digest MODEL --out FILE}), and what each shard records of the tensors it judged. A
 * merge requires every shard's digests to be the manifest's (and every tensor its part judges to be among them): two copies of a model that differ anywhere in a tensor
 * a shard judged are never merged into one verdict (a sample of each tensor would miss a change between its windows).
 */
public record TensorDigests(SortedMap<String, String> sha256) {
    public static final String FORMAT = "k3-tensor-digests";
    public static final int VERSION = 1;
    /** More than any checkpoint's tensor count times a digest line: a larger file is not a manifest. */
    public static final long MAX_FILE_BYTES = 1L << 28;
    private static final int BUFFER = 4 << 20;

    public TensorDigests {
        sha256 = Collections.unmodifiableSortedMap(new TreeMap<>(sha256));
    }

    /** The digests of the tensors {@code which} selects by name, each read whole from its shard file (regular files only). */
    public static TensorDigests of(List<TensorInfo> tensors, Predicate<String> which) throws IOException {
        SortedMap<String, String> out = new TreeMap<>();
        Map<Path, FileChannel> open = new java.util.HashMap<>();
        ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
        try {
            for (TensorInfo t : tensors) {
                if (!which.test(t.name())) continue;
                FileChannel ch = open.get(t.file());
                if (ch == null) open.put(t.file(), ch = SafeFiles.open(t.file(), "a checkpoint shard"));
                MessageDigest md = newDigest();
                for (long at = 0; at < t.length(); ) {
                    buf.clear().limit((int) Math.min(BUFFER, t.length() - at));
                    int n = ch.read(buf, t.offset() + at);
                    if (n < 0) throw new IOException(t.file() + ": shorter than tensor " + t.name() + " (its header says " + t.length() + " bytes at " + t.offset() + ")");
                    md.update(buf.flip());
                    at += n;
                }
                out.put(t.name(), HexFormat.of().formatHex(md.digest()));
            }
        } finally {
            for (FileChannel ch : open.values()) ch.close();
        }
        return new TensorDigests(out);
    }

    /** Every tensor of layer {@code l} ({@code model.layers.L.} or {@code language_model.model.layers.L.}). */
    public static Predicate<String> layer(int l) {
        String part = "layers." + l + ".";
        return name -> name.startsWith("model." + part) || name.contains(".model." + part);
    }

    public ObjectNode json() {
        ObjectNode o = StrictJson.MAPPER.createObjectNode();
        o.put("format", FORMAT);
        o.put("format_version", VERSION);
        ObjectNode t = o.putObject("tensors");
        sha256.forEach(t::put);
        return o;
    }

    public void write(Path file, String what) throws IOException {
        AtomicWrite.string(file, what, StrictJson.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(json()) + "\n");
    }

    /** A manifest file, read through the bounded input door: every name a string, every digest 64 lowercase hex digits. */
    public static TensorDigests read(Path file) throws IOException {
        JsonNode root = StrictJson.read(SafeFiles.readAll(file, MAX_FILE_BYTES, "a tensor digest manifest"));
        try {
            return of(root, file.toString());
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage());
        }
    }

    /** The digests of a JSON object as {@link #json} writes it; an IllegalArgumentException naming {@code where} when not. */
    public static TensorDigests of(JsonNode root, String where) {
        java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
        if (root == null || !root.isObject()) throw bad.apply(where + " is not a JSON object");
        if (!FORMAT.equals(StrictJson.text(root, "format", where, bad)) || StrictJson.integer(root, "format_version", where, bad) != VERSION) {
            throw bad.apply(where + ": not a " + FORMAT + " v" + VERSION + " file");
        }
        JsonNode t = StrictJson.object(root, "tensors", where, bad);
        SortedMap<String, String> m = new TreeMap<>();
        for (var it = t.properties().iterator(); it.hasNext(); ) {
            var e = it.next();
            String v = e.getValue().isTextual() ? e.getValue().textValue() : "";
            if (!v.matches("[0-9a-f]{64}")) throw bad.apply(where + " tensors." + e.getKey() + " is " + StrictJson.describe(e.getValue()) + ", not a sha256");
            m.put(e.getKey(), v);
        }
        return new TensorDigests(m);
    }

    /** The tensors of {@code shard} whose digest is not this manifest's (absent from it, or other bytes), named. */
    public List<String> disagreements(TensorDigests shard) {
        List<String> out = new ArrayList<>();
        shard.sha256.forEach((name, d) -> {
            String want = sha256.get(name);
            if (want == null) out.add(name + " (not in the manifest)");
            else if (!want.equals(d)) out.add(name + " (other bytes than the manifest's)");
        });
        return out;
    }

    /** The tensors of {@code manifest} that {@code judged} selects and this shard's digests leave out, named. */
    public List<String> unhashed(TensorDigests manifest, Predicate<String> judged) {
        List<String> out = new ArrayList<>();
        manifest.sha256.keySet().forEach(name -> {
            if (judged.test(name) && !sha256.containsKey(name)) out.add(name + " (judged, not in the shard's digests)");
        });
        return out;
    }

    private static MessageDigest newDigest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
