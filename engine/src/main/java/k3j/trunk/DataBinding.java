package k3j.trunk;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;
import k3j.io.TensorInfo;

/**
 * What binds a packed trunk to the checkpoint's bytes (docs/formats.md, "Trunk binding"). At pack time trunk.json
 * records, for every tensor of every run, the SHA-256 of its data (taken from the bytes written and re-read, which
 * the pack CRC-checks against the bytes read from the shards), and, for every shard, its file identity (device,
 * inode, size, modification and change time).
 *
 * <p>At open a trunk is checked in one of two ways, before any token or verdict:
 * <ul>
 *   <li>{@link Check#FAST} (the default): every shard's identity is compared with the recorded one. A shard that is
 *       the same file, unchanged since the pack, holds the data the digests were taken from. A shard whose identity
 *       differs (a copy, another download, a file written since: any write moves its change time, which no user can
 *       set back) has the data digest of every trunk tensor in it recomputed. So a swap or a flipped byte anywhere
 *       in a layer of a modified or substituted checkpoint is found; what FAST does not see is a change that keeps
 *       a file's identity: bit rot under the file system, a raw write to the block device, a clock set back by root.</li>
 *   <li>{@link Check#FULL} ({@code --verify-trunk=full}): every layer of trunk.bin is compared byte for byte with the
 *       checkpoint's shards, and every trunk tensor's data digest recomputed from the shards and compared with
 *       trunk.json's, whatever the shards' identity ({@link ShardWitness}: reads the whole trunk twice, from trunk.bin
 *       and from the shards). trunk.json is never its own witness: a byte of trunk.bin changed with its CRC and
 *       digest in trunk.json recomputed, or two digests swapped, is found.</li>
 * </ul>
 * FAST never reads trunk.bin: it binds trunk.json's digests to the shards, and the CRC-32C of every layer read binds
 * trunk.bin to trunk.json. Conform and bisect do not rely on it: they compare every layer they judge with the
 * shards as read ({@link StreamOptions#witness()}).
 * A digest that differs is refused naming the layer and the tensor.
 */
public final class DataBinding {
    /** How the binding is checked at open. */
    public enum Check {
        FAST, FULL;

        /** "fast" / "full", as the flag spells it. */
        public String flag() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** A shard's identity as the file system tells it: the same file, not written since, has the same one. */
    public record FileIdentity(long device, long inode, long size, long mtimeNanos, long ctimeNanos) {
        static FileIdentity of(Path file) throws IOException {
            Map<String, Object> a = Files.readAttributes(file, "unix:dev,ino,size,lastModifiedTime,ctime");
            return new FileIdentity(((Number) a.get("dev")).longValue(), ((Number) a.get("ino")).longValue(), ((Number) a.get("size")).longValue(),
                    ((FileTime) a.get("lastModifiedTime")).to(TimeUnit.NANOSECONDS), ((FileTime) a.get("ctime")).to(TimeUnit.NANOSECONDS));
        }
    }

    /**
     * What a check did, for the run report: the mode, how many shards kept their identity, and what was hashed.
     *
     * @param changedShards shards whose identity differs from the pack's (their trunk tensors were hashed)
     */
    public record Result(Check mode, int shards, List<String> changedShards, int tensorsHashed, long bytesHashed, double seconds) {
        public Result {
            changedShards = List.copyOf(changedShards);
        }

        /** One line: which check ran and what it covered. */
        public String line() {
            String hashed = String.format(Locale.ROOT, "%d tensor data digests recomputed (%.2f GB read in %.1f s)", tensorsHashed, bytesHashed / 1e9, seconds);
            if (mode == Check.FULL) {
                return String.format(Locale.ROOT, "trunk binding: full check, %d tensors of trunk.bin compared byte for byte with the checkpoint's shards"
                        + " and their data digests with trunk.json's (%.2f GB of shards read in %.1f s), all match", tensorsHashed, bytesHashed / 1e9, seconds);
            }
            if (changedShards.isEmpty()) {
                return "trunk binding: fast check, all " + shards + " shard(s) are the files packed from, unchanged since (identity);"
                        + " data digests taken at pack time, trunk.bin not compared with the shards (its CRC-32C checked against trunk.json as read);"
                        + " --verify-trunk=full compares it";
            }
            return "trunk binding: fast check, " + changedShards.size() + " of " + shards + " shard(s) changed since the pack ("
                    + String.join(", ", changedShards.subList(0, Math.min(3, changedShards.size()))) + (changedShards.size() > 3 ? ", ..." : "")
                    + "): " + hashed + ", all match";
        }
    }

    private static final int BUFFER = 8 << 20;

    private DataBinding() {}

    /** Every shard's identity, by shard file name, in shard order. */
    public static Map<String, FileIdentity> identitiesOf(CheckpointIndex index) {
        return identities(index);
    }

    /**
     * The trunk digest of the first {@code layers} decoder layers: a SHA-256 over every trunk tensor's name and data
     * digest, layer by layer, tensors by name. Taken from {@code trunk}'s recorded digests when given (a trunk whose
     * binding {@link TrunkManifest#checkSource} checked), else hashed from the shards of {@code index}; both give the
     * same bytes for the same data.
     */
    public static byte[] trunkDigest(CheckpointIndex index, TrunkManifest trunk, int layers) {
        List<TrunkManifest.Layer> ls = trunk != null ? trunk.layers() : TrunkPacker.layout(index, true).layers();
        int n = Math.min(layers, ls.size());
        String[] perLayer = new String[n];
        IntStream.range(0, n).parallel().forEach(l -> {
            TrunkManifest.Layer layer = ls.get(l);
            StringBuilder b = new StringBuilder();
            java.util.TreeMap<String, TrunkManifest.Tensor> byName = new java.util.TreeMap<>(layer.tensors());
            ByteBuffer buf = trunk != null ? null : ByteBuffer.allocate(BUFFER);
            for (TrunkManifest.Tensor t : byName.values()) {
                String digest = t.sha256();
                if (trunk == null) {
                    TensorInfo src = index.find(t.name()).orElseThrow();
                    try (FileChannel ch = k3j.io.SafeFiles.open(src.file(), "a checkpoint shard")) {
                        digest = sha256(ch, src.file(), layer.layer(), t.name(), src.offset(), src.length(), buf);
                    } catch (IOException e) {
                        throw new TrunkException(src.file(), layer.layer(), "cannot read \"" + t.name() + "\": " + e.getMessage(), e);
                    }
                }
                b.append(t.name()).append('\0').append(digest).append('\n');
            }
            perLayer[l] = b.toString();
        });
        MessageDigest md = SourceId.sha256();
        for (String s : perLayer) md.update(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        return md.digest();
    }

    /** Every shard's identity, by shard file name. */
    static Map<String, FileIdentity> identities(CheckpointIndex index) {
        Map<String, FileIdentity> out = new java.util.LinkedHashMap<>();
        for (SafetensorsFile s : index.shards()) {
            try {
                out.put(s.file().getFileName().toString(), FileIdentity.of(s.file()));
            } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
                throw new TrunkException(s.file(), TrunkException.NO_LAYER, "cannot read the shard's file identity: " + e.getMessage(), e);
            }
        }
        return out;
    }

    /** The SHA-256 of {@code length} bytes at {@code offset} of {@code ch} (hex). */
    static String sha256(FileChannel ch, Path file, int layer, String tensor, long offset, long length, ByteBuffer buf) throws IOException {
        MessageDigest md = SourceId.sha256();
        for (long pos = 0; pos < length; ) {
            buf.clear().limit((int) Math.min(buf.capacity(), length - pos));
            while (buf.hasRemaining()) {
                if (ch.read(buf, offset + pos + buf.position()) <= 0) {
                    throw new TrunkException(file, layer, "short read of \"" + tensor + "\" (the shard is shorter than its header says)");
                }
            }
            md.update(buf.array(), 0, buf.limit());
            pos += buf.limit();
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /**
     * Checks {@code m}'s data digests against {@code index} ({@link Check}); returns what was done, or throws a
     * {@link TrunkException} naming the first layer (lowest index) and tensor whose data differs.
     */
    static Result check(TrunkManifest m, CheckpointIndex index, Check mode) {
        if (mode == Check.FULL) return full(m, index);
        long t0 = System.nanoTime();
        Map<String, FileIdentity> now = identities(index);
        Set<String> changed = new TreeSet<>();
        for (TrunkManifest.Shard s : m.source().shards()) {
            if (mode == Check.FULL || s.identity() == null || !s.identity().equals(now.get(s.name()))) changed.add(s.name());
        }
        AtomicLong bytes = new AtomicLong(), tensors = new AtomicLong();
        List<TrunkException> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        if (!changed.isEmpty()) {
            IntStream.range(0, m.layerCount()).parallel().forEach(l -> {
                if (!failures.isEmpty()) return;
                try {
                    checkLayer(m.layer(l), index, changed, bytes, tensors);
                } catch (TrunkException e) {
                    failures.add(e);
                }
            });
        }
        if (!failures.isEmpty()) throw failures.stream().min(java.util.Comparator.comparingInt(TrunkException::layer)).orElseThrow();
        List<String> changedList = mode == Check.FULL ? List.of() : List.copyOf(changed);
        return new Result(mode, m.source().shards().size(), changedList, (int) tensors.get(), bytes.get(), (System.nanoTime() - t0) / 1e9);
    }

    /** {@link Check#FULL}: every layer of trunk.bin compared with the checkpoint's bytes by a {@link ShardWitness}. */
    private static Result full(TrunkManifest m, CheckpointIndex index) {
        long t0 = System.nanoTime();
        ShardWitness witness = ShardWitness.of(index);
        List<TrunkException> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        try (FileChannel ch = k3j.io.SafeFiles.open(m.bin(), "the trunk"); Arena arena = Arena.ofShared()) {
            MemorySegment bin = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            IntStream.range(0, m.layerCount()).parallel().forEach(l -> {
                if (!failures.isEmpty()) return;
                TrunkManifest.Layer layer = m.layer(l);
                try {
                    witness.check(layer, bin.asSlice(layer.offset(), layer.nbytes()), m.bin());
                } catch (TrunkException e) {
                    failures.add(e);
                }
            });
        } catch (IOException e) {
            throw new TrunkException(m.bin(), TrunkException.NO_LAYER, "cannot read trunk.bin to compare it with the checkpoint: " + e.getMessage(), e);
        }
        if (!failures.isEmpty()) throw failures.stream().min(java.util.Comparator.comparingInt(TrunkException::layer)).orElseThrow();
        int tensors = m.layers().stream().mapToInt(l -> l.tensors().size()).sum();
        return new Result(Check.FULL, m.source().shards().size(), List.of(), tensors, witness.bytes(), (System.nanoTime() - t0) / 1e9);
    }

    private static void checkLayer(TrunkManifest.Layer l, CheckpointIndex index, Set<String> changed, AtomicLong bytes, AtomicLong tensors) {
        ByteBuffer buf = ByteBuffer.allocate(BUFFER);
        Map<Path, FileChannel> open = new java.util.HashMap<>();
        try {
            for (TrunkManifest.Tensor t : l.tensors().values()) {
                TensorInfo src = index.find(t.name()).orElseThrow(() -> new TrunkException(index.path(), l.layer(),
                        "was packed from other weights: tensor \"" + t.name() + "\" is not in this checkpoint; repack with k3 pack-trunk"));
                if (!changed.contains(src.file().getFileName().toString())) continue;
                if (src.length() != t.length()) {
                    throw new TrunkException(src.file(), l.layer(), "tensor \"" + t.name() + "\" is " + src.length() + " bytes, the trunk's is " + t.length()
                            + "; repack with k3 pack-trunk");
                }
                FileChannel ch = open.get(src.file());
                if (ch == null) {
                    ch = k3j.io.SafeFiles.open(src.file(), "a checkpoint shard");
                    open.put(src.file(), ch);
                }
                String got = sha256(ch, src.file(), l.layer(), t.name(), src.offset(), src.length(), buf);
                bytes.addAndGet(src.length());
                tensors.incrementAndGet();
                if (!got.equals(t.sha256())) {
                    throw new TrunkException(src.file(), l.layer(), "tensor \"" + t.name() + "\" is not the data the trunk was packed from (its data hashes to "
                            + got.substring(0, 16) + "..., trunk.json records " + (t.sha256() == null ? "none" : t.sha256().substring(0, Math.min(16, t.sha256().length())) + "...")
                            + "): the checkpoint changed after the pack, or the trunk is another checkpoint's; repack with k3 pack-trunk");
                }
            }
        } catch (IOException e) {
            throw new TrunkException(index.path(), l.layer(), "cannot read a shard to check the trunk's data digests: " + e.getMessage(), e);
        } finally {
            for (FileChannel ch : open.values()) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // read-only
                }
            }
        }
    }
}
