package k3j.trunk;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.zip.CRC32C;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;

/**
 * Packs a checkpoint's trunk (ENGINE.md §5.2): for each layer in order, its non-routed-expert tensors,
 * which must form ONE gap-free byte run in ONE shard, are copied verbatim into {@code trunk.bin} at a
 * 4096-aligned offset, the tail padded with zeros to 4096, and described in {@code trunk.json}. Every
 * layer is checked before a byte is written; a layer spanning shards or with a gap is refused naming the
 * layer and the bytes.
 *
 * <p>Nothing that looks whole exists until it is: the data goes to {@code trunk.bin.partial}, is forced
 * to disk, re-read (O_DIRECT where allowed, so from the device, not the page cache) and its CRC-32C per
 * layer compared with the CRC taken while copying; only then is the manifest written to
 * {@code trunk.json.partial} and both renamed into place, trunk.json last. An old trunk.json is deleted
 * before the copy starts. A pack that fails or is killed leaves at most {@code .partial} files, which
 * never open; running it again starts over (restartable, not resumable).
 */
public final class TrunkPacker {
    /** The real K3 layer prefix (ENGINE.md §2.4), then the README's shorter one. */
    static final List<String> PREFIXES = List.of("language_model.model.layers.", "model.layers.");
    static final String ROUTED_EXPERT = ".block_sparse_moe.experts.";
    static final String PARTIAL = ".partial";
    static final int BUFFER = 64 << 20;

    /** Called after each layer is copied; tests inject a failure here to prove an interrupted pack opens nothing. */
    public interface LayerHook {
        void copied(int layer) throws IOException;
    }

    private TrunkPacker() {}

    /** The trunk layout to write: every layer checked, offsets assigned, CRCs not yet known. */
    public record Layout(String prefix, List<TrunkManifest.Layer> layers, long fileSize) {}

    /** Finds each layer's run and checks it is one gap-free run in one shard. */
    public static Layout layout(CheckpointIndex index) {
        String prefix = null;
        for (String p : PREFIXES) {
            for (TensorInfo t : index.tensors()) {
                if (t.name().startsWith(p)) {
                    prefix = p;
                    break;
                }
            }
            if (prefix != null) break;
        }
        if (prefix == null) {
            throw new TrunkException(index.path(), TrunkException.NO_LAYER, "no tensor named " + PREFIXES.get(0) + "<L>.* or "
                    + PREFIXES.get(1) + "<L>.*: not a Kimi K3 checkpoint");
        }
        TreeMap<Integer, List<TensorInfo>> byLayer = new TreeMap<>();
        for (TensorInfo t : index.tensors()) {
            if (!t.name().startsWith(prefix) || t.name().contains(ROUTED_EXPERT)) continue;
            int dot = t.name().indexOf('.', prefix.length());
            String num = dot < 0 ? "" : t.name().substring(prefix.length(), dot);
            if (!num.matches("0|[1-9][0-9]{0,8}")) {
                throw new TrunkException(t.file(), TrunkException.NO_LAYER, "tensor \"" + t.name() + "\" has no layer number after " + prefix);
            }
            byLayer.computeIfAbsent(Integer.parseInt(num), k -> new ArrayList<>()).add(t);
        }
        int count = byLayer.lastKey() + 1;
        for (int l = 0; l < count; l++) {
            if (!byLayer.containsKey(l)) {
                throw new TrunkException(index.path(), l, "has no trunk tensors, but layers up to " + (count - 1) + " do (a partial download?)");
            }
        }
        Map<Path, List<TensorInfo>> shardTensors = new HashMap<>();
        List<TrunkManifest.Layer> layers = new ArrayList<>();
        long off = 0;
        for (int l = 0; l < count; l++) {
            List<TensorInfo> ts = byLayer.get(l);
            Map<Path, Long> shards = new TreeMap<>();
            for (TensorInfo t : ts) shards.merge(t.file(), t.length(), Long::sum);
            if (shards.size() != 1) {
                StringBuilder b = new StringBuilder();
                shards.forEach((f, n) -> b.append(b.isEmpty() ? "" : ", ").append(f.getFileName()).append(": ").append(n).append(" bytes"));
                throw new TrunkException(index.path(), l, "spans " + shards.size() + " shards (" + b + "); refusing");
            }
            ts.sort(Comparator.comparingLong(TensorInfo::offset));
            long lo = ts.getFirst().offset(), hi = lo, gap = 0;
            String firstGap = null;
            for (TensorInfo t : ts) {
                if (t.offset() != hi && firstGap == null) {
                    firstGap = (t.offset() - hi) + " bytes at offset " + hi + " before \"" + t.name() + "\""
                            + intruder(shardTensors, index, t.file(), hi, t.offset());
                }
                if (t.offset() < hi) throw new TrunkException(t.file(), l, "tensor \"" + t.name() + "\" overlaps the one before it");
                gap += t.offset() - hi;
                hi = t.offset() + t.length();
            }
            if (gap != 0) {
                throw new TrunkException(ts.getFirst().file(), l, "is not contiguous: " + gap + " bytes of gap in its run [" + lo + ", " + hi
                        + "); first gap " + firstGap + "; refusing (a gap would drag other bytes into the trunk)");
            }
            Map<String, TrunkManifest.Tensor> tensors = new LinkedHashMap<>();
            for (TensorInfo t : ts) {
                tensors.put(t.name(), new TrunkManifest.Tensor(t.name(), t.dtype(), t.shape().clone(), t.offset() - lo, t.length()));
            }
            TrunkManifest.Layer layer = new TrunkManifest.Layer(l, off, hi - lo, 0, ts.getFirst().file().getFileName().toString(), lo, tensors);
            layers.add(layer);
            off += layer.padded();
        }
        return new Layout(prefix, List.copyOf(layers), off);
    }

    /** ", which holds "NAME" (and N more)" for the tensors of the shard lying in [from, to), or "". */
    private static String intruder(Map<Path, List<TensorInfo>> cache, CheckpointIndex index, Path file, long from, long to) {
        List<TensorInfo> in = cache.computeIfAbsent(file, f -> index.tensors().stream().filter(t -> t.file().equals(f)).toList());
        List<String> names = new ArrayList<>();
        for (TensorInfo t : in) if (t.offset() < to && t.offset() + t.length() > from) names.add(t.name());
        if (names.isEmpty()) return " (bytes no tensor claims)";
        return ", which holds \"" + names.getFirst() + "\"" + (names.size() > 1 ? " and " + (names.size() - 1) + " more" : "");
    }

    /**
     * Packs the trunk of {@code index} into {@code out} (created if needed). Returns the manifest written.
     * {@code hook} may be null.
     */
    public static TrunkManifest pack(CheckpointIndex index, Path out, Progress progress, Consumer<String> notes, LayerHook hook) {
        Layout layout = layout(index);
        Path bin = out.resolve(TrunkManifest.BIN), json = out.resolve(TrunkManifest.JSON);
        Path binPart = out.resolve(TrunkManifest.BIN + PARTIAL), jsonPart = out.resolve(TrunkManifest.JSON + PARTIAL);
        try {
            Files.createDirectories(out);
            Files.deleteIfExists(json);   // from here until the end, nothing in out opens as a trunk
            Files.deleteIfExists(jsonPart);
            List<TrunkManifest.Layer> written = copy(index, layout, binPart, progress, hook);
            verify(binPart, written, layout.fileSize(), notes);
            TrunkManifest.Source source = new TrunkManifest.Source(SourceId.shards(index), SourceId.headerSha256(index),
                    SourceId.sampleSha256(index, written));
            TrunkManifest m = new TrunkManifest(out, TrunkManifest.ALIGN, layout.fileSize(), source, written);
            m.write(jsonPart);
            force(jsonPart);
            Files.move(binPart, bin, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            Files.move(jsonPart, json, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            force(out);
            return TrunkManifest.read(out);
        } catch (IOException | RuntimeException e) {
            deleteQuietly(binPart);
            deleteQuietly(jsonPart);
            if (e instanceof TrunkException te) throw te;
            throw new TrunkException(out, TrunkException.NO_LAYER, "packing failed, nothing written: " + e, e);
        }
    }

    private static List<TrunkManifest.Layer> copy(CheckpointIndex index, Layout layout, Path binPart, Progress progress, LayerHook hook)
            throws IOException {
        Map<String, Path> files = new HashMap<>();
        index.shards().forEach(s -> files.put(s.file().getFileName().toString(), s.file()));
        List<TrunkManifest.Layer> done = new ArrayList<>();
        ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
        long copied = 0;
        try (FileChannel dst = FileChannel.open(binPart, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            Map<Path, FileChannel> src = new HashMap<>();
            try {
                for (TrunkManifest.Layer l : layout.layers()) {
                    Path file = files.get(l.shard());
                    FileChannel in = src.get(file);
                    if (in == null) {
                        in = FileChannel.open(file, StandardOpenOption.READ);
                        src.put(file, in);
                    }
                    CRC32C crc = new CRC32C();
                    long pos = 0;
                    while (pos < l.nbytes()) {
                        buf.clear().limit((int) Math.min(BUFFER, l.nbytes() - pos));
                        while (buf.hasRemaining()) {
                            if (in.read(buf, l.shardOffset() + pos + buf.position()) <= 0) {
                                throw new TrunkException(file, l.layer(), "short read at " + (l.shardOffset() + pos + buf.position()));
                            }
                        }
                        buf.flip();
                        crc.update(buf.duplicate());
                        while (buf.hasRemaining()) pos += dst.write(buf, l.offset() + pos);
                    }
                    long pad = l.padded() - l.nbytes();
                    if (pad > 0) {
                        ByteBuffer zeros = ByteBuffer.allocate((int) pad);
                        long at = l.offset() + l.nbytes();
                        while (zeros.hasRemaining()) at += dst.write(zeros, at);
                    }
                    done.add(new TrunkManifest.Layer(l.layer(), l.offset(), l.nbytes(), (int) crc.getValue(), l.shard(), l.shardOffset(),
                            l.tensors()));
                    copied += l.nbytes();
                    if (hook != null) hook.copied(l.layer());
                    progress.update(done.size(), copied);
                }
            } finally {
                for (FileChannel c : src.values()) c.close();
            }
            if (dst.size() != layout.fileSize()) {
                throw new TrunkException(binPart, TrunkException.NO_LAYER, "is " + dst.size() + " bytes after copying, expected " + layout.fileSize());
            }
            dst.force(true);
        }
        return List.copyOf(done);
    }

    /** Re-reads every run from the device and compares its CRC-32C and zero padding with what was copied. */
    static void verify(Path binPart, List<TrunkManifest.Layer> layers, long fileSize, Consumer<String> notes) {
        try (DirectReader r = DirectReader.open(binPart, true, notes); Arena arena = Arena.ofConfined()) {
            if (r.size() != fileSize) throw new TrunkException(binPart, TrunkException.NO_LAYER, "is " + r.size() + " bytes, expected " + fileSize);
            MemorySegment buf = arena.allocate(BUFFER, DirectReader.ALIGN);
            for (TrunkManifest.Layer l : layers) {
                CRC32C crc = new CRC32C();
                for (long pos = 0; pos < l.padded(); pos += BUFFER) {
                    long len = Math.min(BUFFER, l.padded() - pos);
                    r.read(l.offset() + pos, len, buf, l.layer());
                    long data = Math.max(0, Math.min(len, l.nbytes() - pos));
                    crc.update(buf.asSlice(0, data).asByteBuffer());
                    for (long i = data; i < len; i++) {
                        if (buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0) {
                            throw new TrunkException(binPart, l.layer(), "padding byte at " + (l.offset() + pos + i) + " is not zero on re-read");
                        }
                    }
                }
                if ((int) crc.getValue() != l.crc32c()) {
                    throw new TrunkException(binPart, l.layer(), "re-read CRC-32C " + TrunkManifest.hex((int) crc.getValue())
                            + " differs from the copied bytes' " + TrunkManifest.hex(l.crc32c()) + "; the disk did not keep what was written");
                }
            }
        }
    }

    private static void force(Path p) {
        try (FileChannel c = FileChannel.open(p, StandardOpenOption.READ)) {
            c.force(true);
        } catch (IOException ignored) {
            // directories cannot be forced on every platform; the renames are still atomic
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException ignored) {
            // best effort: a leftover .partial never opens as a trunk
        }
    }
}
