package k3j.trunk;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.io.CheckpointIndex;
import k3j.io.DType;
import k3j.io.DirectIo;

/**
 * {@code trunk.json}: where each layer's run lies in {@code trunk.bin}, the tensors inside each run, and
 * which weights it was packed from (docs/semantics.md §5.3, plus provenance). Read from untrusted bytes: every
 * offset and length is checked against the run, the file and the other runs before anything is sized by
 * it, and a manifest that breaks a rule is refused naming the layer and the rule.
 *
 * <pre>
 * { "format": "k3j-trunk", "version": 1, "n_layers": N, "align": 4096,
 *   "file": "trunk.bin", "file_size": BYTES,
 *   "source": { "shards": [{"name", "size", "identity": {"dev", "ino", "mtime_ns", "ctime_ns"}}...], "header_sha256": HEX },
 *   "layers": [ { "layer": L, "file_off": OFF, "nbytes": RUN, "crc32c": HEX,
 *                 "shard": NAME, "shard_off": LO,
 *                 "tensors": { NAME: {"off": OFF_IN_RUN, "nbytes": N, "dtype": "BF16", "shape": [..], "sha256": HEX} } } ] }
 * </pre>
 *
 * {@code nbytes} is the raw run length; the run occupies {@code nbytes} rounded up to {@code align} in
 * the file (the tail padded with zeros), which is the length an O_DIRECT read takes.
 */
public record TrunkManifest(Path dir, int align, long fileSize, Source source, List<Layer> layers) {
    public static final String BIN = "trunk.bin";
    public static final String JSON = "trunk.json";
    public static final String FORMAT = "k3j-trunk";
    /** 2: every tensor's data digest and every shard's file identity (1 bound by headers and sampled bytes only). */
    public static final int VERSION = 2;
    /** The only alignment this packer writes and this reader accepts: what O_DIRECT needs (pitfall 18). */
    public static final int ALIGN = DirectIo.ALIGN;
    /** Manifests larger than this are refused before reading (the real K3's is ~1 MB). */
    public static final long MAX_JSON_BYTES = 64L << 20;

    private static final ObjectMapper MAPPER = new ObjectMapper(JsonFactory.builder().build())
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

    /**
     * One tensor inside a layer's run; {@code offset} is relative to the run's first byte; {@code sha256} is the digest of
     * its data at pack time (null in a layout not yet packed).
     */
    public record Tensor(String name, DType dtype, long[] shape, long offset, long length, String sha256) {
        public Tensor(String name, DType dtype, long[] shape, long offset, long length) {
            this(name, dtype, shape, offset, length, null);
        }

        Tensor withSha256(String digest) {
            return new Tensor(name, dtype, shape, offset, length, digest);
        }
    }

    /** One layer's run: {@code nbytes} at {@code offset} of trunk.bin, copied from {@code shard} at {@code shardOffset}. */
    public record Layer(int layer, long offset, long nbytes, int crc32c, String shard, long shardOffset,
                        Map<String, Tensor> tensors) {
        /** The run's length in the file: nbytes rounded up to {@link #ALIGN}. */
        public long padded() {
            return roundUp(nbytes, ALIGN);
        }
    }

    /** A shard of the checkpoint the trunk was packed from, and its file identity then ({@link DataBinding}; null when unknown). */
    public record Shard(String name, long size, DataBinding.FileIdentity identity) {
        public Shard(String name, long size) {
            this(name, size, null);
        }
    }

    /** What the trunk was packed from: every shard's name, size and identity, and the hash of their headers (see {@link SourceId}). */
    public record Source(List<Shard> shards, String headerSha256) {}

    public Path bin() {
        return dir.resolve(BIN);
    }

    public Path json() {
        return dir.resolve(JSON);
    }

    public int layerCount() {
        return layers.size();
    }

    public Layer layer(int l) {
        return layers.get(l);
    }

    /** Every layer's raw run length, by layer. */
    public long[] runSizes() {
        long[] n = new long[layers.size()];
        for (int i = 0; i < n.length; i++) n[i] = layers.get(i).nbytes();
        return n;
    }

    /** Σ padded run lengths. */
    public long packedBytes() {
        long s = 0;
        for (Layer l : layers) s += l.padded();
        return s;
    }

    static long roundUp(long n, long a) {
        return Math.ceilDiv(n, a) * a;
    }

    // ---------------------------------------------------------------------------------------------
    // checking against the checkpoint

    /**
     * Refuses a trunk packed from other weights, before any token or verdict: the checkpoint's shard names and
     * sizes and the hash of its headers must be what they were at the pack, and every tensor's data must be the
     * data the trunk holds, checked as {@code check} says ({@link DataBinding}). Returns what was checked, for the
     * run report; a tensor whose data differs is refused naming its layer and name.
     */
    public DataBinding.Result checkSource(CheckpointIndex index, DataBinding.Check check) {
        Path f = json();
        List<Shard> now = SourceId.shards(index);
        if (!sameNamesAndSizes(now, source.shards())) {
            throw new TrunkException(f, TrunkException.NO_LAYER, "was packed from other weights: its shards are "
                    + describe(source.shards()) + ", the checkpoint's are " + describe(now) + "; repack with k3 pack-trunk");
        }
        String headers = SourceId.headerSha256(index);
        if (!headers.equals(source.headerSha256())) {
            throw new TrunkException(f, TrunkException.NO_LAYER, "was packed from other weights: the shard headers hash to "
                    + headers + ", trunk.json records " + source.headerSha256() + "; repack with k3 pack-trunk");
        }
        return DataBinding.check(this, index, check);
    }

    /** {@link #checkSource(CheckpointIndex, DataBinding.Check)} with the default, fast check. */
    public DataBinding.Result checkSource(CheckpointIndex index) {
        return checkSource(index, DataBinding.Check.FAST);
    }

    private static boolean sameNamesAndSizes(List<Shard> a, List<Shard> b) {
        if (a.size() != b.size()) return false;
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).name().equals(b.get(i).name()) || a.get(i).size() != b.get(i).size()) return false;
        }
        return true;
    }

    /** This manifest with the shards' identities replaced by {@code identities} (a re-bind after a full data check). */
    TrunkManifest withIdentities(java.util.Map<String, DataBinding.FileIdentity> identities) {
        List<Shard> shards = new ArrayList<>();
        for (Shard s : source.shards()) shards.add(new Shard(s.name(), s.size(), identities.get(s.name())));
        return new TrunkManifest(dir, align, fileSize, new Source(List.copyOf(shards), source.headerSha256()), layers);
    }

    private static String describe(List<Shard> shards) {
        StringBuilder b = new StringBuilder().append(shards.size()).append(" shard(s) [");
        for (int i = 0; i < Math.min(3, shards.size()); i++) {
            if (i > 0) b.append(", ");
            b.append(shards.get(i).name()).append(' ').append(shards.get(i).size()).append(" B");
        }
        return b.append(shards.size() > 3 ? ", ...]" : "]").toString();
    }

    // ---------------------------------------------------------------------------------------------
    // writing

    /** Writes this manifest as JSON to {@code file} (the caller renames it into place). */
    public void write(Path file) throws IOException {
        try (OutputStream os = java.nio.channels.Channels.newOutputStream(k3j.io.AtomicWrite.part(file, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.TRUNCATE_EXISTING));
             JsonGenerator g = MAPPER.getFactory().createGenerator(os, JsonEncoding.UTF8)) {
            g.useDefaultPrettyPrinter();
            g.writeStartObject();
            g.writeStringField("format", FORMAT);
            g.writeNumberField("version", VERSION);
            g.writeNumberField("n_layers", layers.size());
            g.writeNumberField("align", align);
            g.writeStringField("file", BIN);
            g.writeNumberField("file_size", fileSize);
            g.writeObjectFieldStart("source");
            g.writeArrayFieldStart("shards");
            for (Shard s : source.shards()) {
                g.writeStartObject();
                g.writeStringField("name", s.name());
                g.writeNumberField("size", s.size());
                if (s.identity() != null) {
                    g.writeObjectFieldStart("identity");
                    g.writeNumberField("dev", s.identity().device());
                    g.writeNumberField("ino", s.identity().inode());
                    g.writeNumberField("mtime_ns", s.identity().mtimeNanos());
                    g.writeNumberField("ctime_ns", s.identity().ctimeNanos());
                    g.writeEndObject();
                }
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeStringField("header_sha256", source.headerSha256());
            g.writeEndObject();
            g.writeArrayFieldStart("layers");
            for (Layer l : layers) {
                g.writeStartObject();
                g.writeNumberField("layer", l.layer());
                g.writeNumberField("file_off", l.offset());
                g.writeNumberField("nbytes", l.nbytes());
                g.writeStringField("crc32c", hex(l.crc32c()));
                g.writeStringField("shard", l.shard());
                g.writeNumberField("shard_off", l.shardOffset());
                g.writeObjectFieldStart("tensors");
                for (Tensor t : l.tensors().values()) {
                    g.writeObjectFieldStart(t.name());
                    g.writeNumberField("off", t.offset());
                    g.writeNumberField("nbytes", t.length());
                    g.writeStringField("dtype", t.dtype().name());
                    g.writeArrayFieldStart("shape");
                    for (long d : t.shape()) g.writeNumber(d);
                    g.writeEndArray();
                    if (t.sha256() != null) g.writeStringField("sha256", t.sha256());
                    g.writeEndObject();
                }
                g.writeEndObject();
                g.writeEndObject();
            }
            g.writeEndArray();
            g.writeEndObject();
        }
    }

    static String hex(int crc) {
        return HexFormat.of().toHexDigits(crc);
    }

    // ---------------------------------------------------------------------------------------------
    // reading

    /** Reads and validates {@code dir/trunk.json} against {@code dir/trunk.bin}. */
    public static TrunkManifest read(Path dir) {
        Path f = dir.resolve(JSON);
        Path bin = dir.resolve(BIN);
        if (!Files.isRegularFile(f)) {
            throw new TrunkException(f, TrunkException.NO_LAYER, "no trunk manifest here (pack one with k3 pack-trunk MODEL "
                    + dir + ")");
        }
        if (!Files.isRegularFile(bin)) throw new TrunkException(bin, TrunkException.NO_LAYER, "trunk.json is here but trunk.bin is not");
        JsonNode root;
        long binSize;
        try {
            long size = Files.size(f);
            if (size > MAX_JSON_BYTES) throw bad(f, TrunkException.NO_LAYER, "is " + size + " bytes, more than " + MAX_JSON_BYTES);
            root = k3j.io.StrictJson.read(k3j.io.SafeFiles.readAll(f, MAX_JSON_BYTES, "a trunk manifest"));
            binSize = Files.size(bin);
        } catch (JsonProcessingException e) {
            throw new TrunkException(f, TrunkException.NO_LAYER, "is not valid JSON: " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new TrunkException(f, TrunkException.NO_LAYER, "cannot read: " + e, e);
        }
        if (root == null || !root.isObject()) throw bad(f, TrunkException.NO_LAYER, "is not a JSON object");
        String format = string(f, root, "format", TrunkException.NO_LAYER);
        if (!format.equals(FORMAT)) throw bad(f, TrunkException.NO_LAYER, "format is \"" + format + "\", not \"" + FORMAT + "\"");
        long version = number(f, root, "version", TrunkException.NO_LAYER);
        if (version != VERSION) throw bad(f, TrunkException.NO_LAYER, "version " + version + " is not " + VERSION + "; repack");
        long align = number(f, root, "align", TrunkException.NO_LAYER);
        if (align != ALIGN) {
            throw bad(f, TrunkException.NO_LAYER, "align is " + align + ", expected " + ALIGN
                    + " (O_DIRECT needs 4096-aligned runs); repack with k3 pack-trunk");
        }
        if (!BIN.equals(string(f, root, "file", TrunkException.NO_LAYER))) throw bad(f, TrunkException.NO_LAYER, "file is not \"" + BIN + "\"");
        long fileSize = number(f, root, "file_size", TrunkException.NO_LAYER);
        if (fileSize != binSize) {
            throw bad(f, TrunkException.NO_LAYER, "trunk.bin is " + binSize + " bytes but trunk.json says " + fileSize
                    + " (truncated, or from another pack)");
        }
        Source source = source(f, root.get("source"));
        JsonNode arr = root.get("layers");
        if (arr == null || !arr.isArray()) throw bad(f, TrunkException.NO_LAYER, "\"layers\" is missing or not an array");
        if (arr.isEmpty()) throw bad(f, TrunkException.NO_LAYER, "\"layers\" is empty");
        long n = number(f, root, "n_layers", TrunkException.NO_LAYER);
        if (n != arr.size()) throw bad(f, TrunkException.NO_LAYER, "n_layers is " + n + " but " + arr.size() + " layers are listed");
        List<Layer> layers = new ArrayList<>(arr.size());
        for (int i = 0; i < arr.size(); i++) layers.add(layer(f, arr.get(i), i, binSize));
        checkNoOverlap(f, layers);
        return new TrunkManifest(dir, (int) align, fileSize, source, Collections.unmodifiableList(layers));
    }

    private static Source source(Path f, JsonNode s) {
        if (s == null || !s.isObject()) throw bad(f, TrunkException.NO_LAYER, "\"source\" is missing or not an object");
        JsonNode shards = s.get("shards");
        if (shards == null || !shards.isArray() || shards.isEmpty()) throw bad(f, TrunkException.NO_LAYER, "source.shards is missing or empty");
        List<Shard> out = new ArrayList<>();
        for (JsonNode sh : shards) {
            if (!sh.isObject()) throw bad(f, TrunkException.NO_LAYER, "source.shards holds a non-object");
            long size = number(f, sh, "size", TrunkException.NO_LAYER);
            if (size < 0) throw bad(f, TrunkException.NO_LAYER, "source shard size " + size + " is negative");
            JsonNode id = sh.get("identity");
            if (id == null || !id.isObject()) throw bad(f, TrunkException.NO_LAYER, "source shard has no \"identity\" object");
            DataBinding.FileIdentity identity = new DataBinding.FileIdentity(number(f, id, "dev", TrunkException.NO_LAYER),
                    number(f, id, "ino", TrunkException.NO_LAYER), size, number(f, id, "mtime_ns", TrunkException.NO_LAYER),
                    number(f, id, "ctime_ns", TrunkException.NO_LAYER));
            out.add(new Shard(string(f, sh, "name", TrunkException.NO_LAYER), size, identity));
        }
        return new Source(List.copyOf(out), string(f, s, "header_sha256", TrunkException.NO_LAYER));
    }

    private static Layer layer(Path f, JsonNode o, int index, long binSize) {
        if (o == null || !o.isObject()) throw bad(f, index, "entry " + index + " of \"layers\" is not an object");
        long l = number(f, o, "layer", index);
        if (l != index) {
            throw bad(f, index, "entry " + index + " of \"layers\" is layer " + l + " (a layer is missing or out of order)");
        }
        long off = number(f, o, "file_off", index);
        long nbytes = number(f, o, "nbytes", index);
        if (off < 0 || off % ALIGN != 0) throw bad(f, index, "file_off " + off + " is not a non-negative multiple of " + ALIGN);
        if (nbytes <= 0) throw bad(f, index, "nbytes " + nbytes + " is not positive (an empty layer)");
        long padded = roundUp(nbytes, ALIGN);
        if (off > binSize || padded > binSize - off) {
            throw bad(f, index, "run [" + off + ", " + (off + padded) + ") ends past the end of trunk.bin (" + binSize + " bytes)");
        }
        String crcText = string(f, o, "crc32c", index);
        int crc;
        try {
            if (crcText.length() != 8) throw new IllegalArgumentException("not 8 hex digits");
            crc = HexFormat.fromHexDigits(crcText);
        } catch (IllegalArgumentException e) {
            throw bad(f, index, "crc32c \"" + crcText + "\" is not 8 hex digits");
        }
        String shard = string(f, o, "shard", index);
        long shardOff = number(f, o, "shard_off", index);
        if (shardOff < 0) throw bad(f, index, "shard_off " + shardOff + " is negative");
        JsonNode ts = o.get("tensors");
        if (ts == null || !ts.isObject()) throw bad(f, index, "has no \"tensors\" object");
        if (ts.isEmpty()) throw bad(f, index, "\"tensors\" is empty");
        Map<String, Tensor> tensors = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : ts.properties()) tensors.put(e.getKey(), tensor(f, index, e.getKey(), e.getValue(), nbytes));
        List<Tensor> sorted = new ArrayList<>(tensors.values());
        sorted.sort(Comparator.comparingLong(Tensor::offset));
        for (int i = 1; i < sorted.size(); i++) {
            Tensor a = sorted.get(i - 1), b = sorted.get(i);
            if (a.offset() + a.length() > b.offset()) {
                throw bad(f, index, "tensors \"" + a.name() + "\" and \"" + b.name() + "\" overlap in the run");
            }
        }
        return new Layer(index, off, nbytes, crc, shard, shardOff, Collections.unmodifiableMap(tensors));
    }

    private static Tensor tensor(Path f, int layer, String name, JsonNode t, long runBytes) {
        if (!t.isObject()) throw bad(f, layer, "tensor \"" + name + "\" is not an object");
        long off = number(f, t, "off", layer);
        long len = number(f, t, "nbytes", layer);
        if (off < 0 || len < 0) throw bad(f, layer, "tensor \"" + name + "\" has negative geometry (off " + off + ", nbytes " + len + ")");
        if (off > runBytes || len > runBytes - off) {
            throw bad(f, layer, "tensor \"" + name + "\" [" + off + ", " + (off + len) + ") extends past its run of " + runBytes + " bytes");
        }
        String dt = string(f, t, "dtype", layer);
        DType dtype = DType.parse(dt);
        if (dtype == null) throw bad(f, layer, "tensor \"" + name + "\" has unknown dtype \"" + dt + "\"");
        JsonNode sh = t.get("shape");
        if (sh == null || !sh.isArray()) throw bad(f, layer, "tensor \"" + name + "\" has no shape array");
        long[] shape = new long[sh.size()];
        long elements = 1;
        for (int i = 0; i < shape.length; i++) {
            JsonNode d = sh.get(i);
            if (!d.isIntegralNumber() || !d.canConvertToLong() || d.asLong() < 0) {
                throw bad(f, layer, "tensor \"" + name + "\" shape " + sh + " is not a list of non-negative integers");
            }
            shape[i] = d.asLong();
            try {
                elements = Math.multiplyExact(elements, shape[i]);
            } catch (ArithmeticException e) {
                throw bad(f, layer, "tensor \"" + name + "\" shape " + sh + " overflows");
            }
        }
        if (elements > len / dtype.size() || elements * dtype.size() != len) {
            throw bad(f, layer, "tensor \"" + name + "\" is " + len + " bytes but " + dtype + Arrays.toString(shape) + " is not");
        }
        String sha = string(f, t, "sha256", layer);
        if (!sha.matches("[0-9a-f]{64}")) throw bad(f, layer, "tensor \"" + name + "\" sha256 \"" + sha + "\" is not 64 hex digits");
        return new Tensor(name, dtype, shape, off, len, sha);
    }

    private static void checkNoOverlap(Path f, List<Layer> layers) {
        List<Layer> byOffset = new ArrayList<>(layers);
        byOffset.sort(Comparator.comparingLong(Layer::offset));
        for (int i = 1; i < byOffset.size(); i++) {
            Layer a = byOffset.get(i - 1), b = byOffset.get(i);
            if (a.offset() + a.padded() > b.offset()) {
                throw bad(f, b.layer(), "run [" + b.offset() + ", " + (b.offset() + b.padded()) + ") overlaps layer " + a.layer()
                        + "'s run [" + a.offset() + ", " + (a.offset() + a.padded()) + ")");
            }
        }
    }

    private static long number(Path f, JsonNode o, String key, int layer) {
        JsonNode v = o.get(key);
        if (v == null) throw bad(f, layer, "\"" + key + "\" is missing");
        if (!v.isIntegralNumber() || !v.canConvertToLong()) throw bad(f, layer, "\"" + key + "\" is " + v + ", not an integer");
        return v.asLong();
    }

    private static String string(Path f, JsonNode o, String key, int layer) {
        JsonNode v = o.get(key);
        if (v == null) throw bad(f, layer, "\"" + key + "\" is missing");
        if (!v.isTextual()) throw bad(f, layer, "\"" + key + "\" is " + v + ", not a string");
        return v.asText();
    }

    private static TrunkException bad(Path f, int layer, String detail) {
        return new TrunkException(f, layer, detail);
    }
}
