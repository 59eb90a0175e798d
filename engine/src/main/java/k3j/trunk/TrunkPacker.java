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
import k3j.io.DirectIo;
import k3j.io.TensorInfo;

/**
 * Packs a checkpoint's trunk (docs/semantics.md §5.2): for each layer in order, its non-routed-expert tensors,
 * which must form ONE gap-free byte run in ONE shard, are copied verbatim into {@code trunk.bin} at a
 * 4096-aligned offset, the tail padded with zeros to 4096, and described in {@code trunk.json}. Every
 * layer is checked before a byte is written; a layer spanning shards or with a gap is refused naming the
 * layer and the bytes.
 *
 * <p>Nothing that looks whole exists until it is: the data goes to {@code trunk.bin.partial}, is forced
 * to disk, re-read (O_DIRECT where allowed, so from the device, not the page cache) and its CRC-32C per
 * layer compared with the CRC taken while copying; only then is the manifest written to
 * {@code trunk.json.partial} and both renamed into place, trunk.json last. An old trunk.json is deleted
 * before the copy starts. A pack that fails or is killed leaves at most {@code trunk.bin.partial} and
 * {@code trunk.bin.journal}, which never open as a trunk. Resumable: each layer is forced to disk before
 * the journal records its CRC; running the pack again over the same checkpoint and layout re-reads the
 * journalled layers, keeps the prefix whose CRCs match, and copies from there (anything else starts over).
 */
public final class TrunkPacker {
    /** The real K3 layer prefix (docs/semantics.md §2.4), then the README's shorter one. */
    static final List<String> PREFIXES = List.of("language_model.model.layers.", "model.layers.");
    static final String ROUTED_EXPERT = ".block_sparse_moe.experts.";
    static final String PARTIAL = ".partial";
    static final int BUFFER = 64 << 20;

    /** Called after each layer is copied; tests inject a failure here to prove an interrupted pack opens nothing. */
    public interface LayerHook {
        void copied(int layer) throws IOException;
    }

    private TrunkPacker() {}

    /** A byte range to copy: {@code length} bytes at {@code source} of {@code file} to {@code target} within the layer's run. */
    public record Piece(Path file, long source, long length, long target) {}

    /**
     * The trunk layout to write: every layer checked, offsets assigned, CRCs not yet known; {@code pieces.get(L)}
     * is what to copy into layer L's run (one piece per layer unless gathered).
     */
    public record Layout(String prefix, List<TrunkManifest.Layer> layers, List<List<Piece>> pieces, long fileSize, boolean gathered) {}

    /** Tensor alignment within a GATHERED run. */
    static final int GATHER_ALIGN = 64;

    /** Finds each layer's run and checks it is one gap-free run in one shard (docs/semantics.md §5.2). */
    public static Layout layout(CheckpointIndex index) {
        return layout(index, false);
    }

    /**
     * As {@link #layout(CheckpointIndex)}; with {@code gather}, a layer that is not one gap-free run in one shard
     * (fixtures written by the safetensors library, which orders tensors by dtype and name) is packed tensor by
     * tensor instead, each at a {@value #GATHER_ALIGN}-byte boundary of its run, rather than refused.
     */
    public static Layout layout(CheckpointIndex index, boolean gather) {
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
        List<List<Piece>> pieces = new ArrayList<>();
        boolean anyGathered = false;
        long off = 0;
        for (int l = 0; l < count; l++) {
            List<TensorInfo> ts = byLayer.get(l);
            Map<Path, Long> shards = new TreeMap<>();
            for (TensorInfo t : ts) shards.merge(t.file(), t.length(), Long::sum);
            if (gather && !contiguous(ts)) {
                TrunkManifest.Layer layer = gathered(l, ts, off);
                List<Piece> ps = new ArrayList<>();
                for (TensorInfo t : ts) ps.add(new Piece(t.file(), t.offset(), t.length(), layer.tensors().get(t.name()).offset()));
                ps.sort(Comparator.comparingLong(Piece::target));   // copy() writes a run front to back
                layers.add(layer);
                pieces.add(List.copyOf(ps));
                off += layer.padded();
                anyGathered = true;
                continue;
            }
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
                        + "); first gap " + firstGap + "; refusing (a gap would drag other bytes into the trunk; pack-trunk --gather packs such a layer tensor by tensor)");
            }
            Map<String, TrunkManifest.Tensor> tensors = new LinkedHashMap<>();
            for (TensorInfo t : ts) {
                tensors.put(t.name(), new TrunkManifest.Tensor(t.name(), t.dtype(), t.shape().clone(), t.offset() - lo, t.length()));
            }
            TrunkManifest.Layer layer = new TrunkManifest.Layer(l, off, hi - lo, 0, ts.getFirst().file().getFileName().toString(), lo, tensors);
            layers.add(layer);
            pieces.add(List.of(new Piece(ts.getFirst().file(), lo, hi - lo, 0)));
            off += layer.padded();
        }
        return new Layout(prefix, List.copyOf(layers), List.copyOf(pieces), off, anyGathered);
    }

    /** Whether the tensors are one gap-free run in one shard. */
    private static boolean contiguous(List<TensorInfo> ts) {
        List<TensorInfo> sorted = new ArrayList<>(ts);
        sorted.sort(Comparator.comparingLong(TensorInfo::offset));
        for (int i = 1; i < sorted.size(); i++) {
            TensorInfo a = sorted.get(i - 1), b = sorted.get(i);
            if (!a.file().equals(b.file()) || a.offset() + a.length() != b.offset()) return false;
        }
        return true;
    }

    /** A layer packed tensor by tensor in (shard, offset) order; shard and shard_off name its first tensor's place. */
    private static TrunkManifest.Layer gathered(int l, List<TensorInfo> ts, long off) {
        List<TensorInfo> sorted = new ArrayList<>(ts);
        sorted.sort(Comparator.comparing((TensorInfo t) -> t.file().getFileName().toString()).thenComparingLong(TensorInfo::offset));
        Map<String, TrunkManifest.Tensor> tensors = new LinkedHashMap<>();
        long at = 0;
        for (TensorInfo t : sorted) {
            at = TrunkManifest.roundUp(at, GATHER_ALIGN);
            tensors.put(t.name(), new TrunkManifest.Tensor(t.name(), t.dtype(), t.shape().clone(), at, t.length()));
            at += t.length();
        }
        TensorInfo first = sorted.getFirst();
        return new TrunkManifest.Layer(l, off, at, 0, first.file().getFileName().toString(), first.offset(), tensors);
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
        return pack(index, layout(index), out, progress, notes, hook);
    }

    /** Packs {@code layout} (from {@link #layout(CheckpointIndex, boolean)}) into {@code out}. */
    public static TrunkManifest pack(CheckpointIndex index, Layout layout, Path out, Progress progress, Consumer<String> notes, LayerHook hook) {
        Path bin = out.resolve(TrunkManifest.BIN), json = out.resolve(TrunkManifest.JSON);
        Path binPart = out.resolve(TrunkManifest.BIN + PARTIAL), jsonPart = out.resolve(TrunkManifest.JSON + PARTIAL);
        Path journal = out.resolve(JOURNAL);
        List<String> journalLines = readJournal(journal, binPart, layout);
        int copiedLayers = 0;
        try {
            Files.createDirectories(out);
            Files.deleteIfExists(json);   // from here until the end, nothing in out opens as a trunk
            Files.deleteIfExists(jsonPart);
            String headers = SourceId.headerSha256(index);
            Map<String, DataBinding.FileIdentity> before = DataBinding.identities(index);
            String id = layoutId(headers, layout);
            List<TrunkManifest.Layer> resumed = resume(binPart, journal, journalLines, id, layout, notes);
            List<TrunkManifest.Layer> written = copy(layout, binPart, journal, resumed, progress, hook);
            copiedLayers = written.size();
            written = verify(binPart, written, layout.fileSize(), notes, progress.next("verified"));
            List<TrunkManifest.Shard> shards = new ArrayList<>();
            for (TrunkManifest.Shard s : SourceId.shards(index)) shards.add(new TrunkManifest.Shard(s.name(), s.size(), before.get(s.name())));
            TrunkManifest m = new TrunkManifest(out, TrunkManifest.ALIGN, layout.fileSize(), new TrunkManifest.Source(List.copyOf(shards), headers), written);
            // the digests bind to the shards as they were: when a shard's identity moved during the pack (a write, or just a
            // hard link made or removed elsewhere, which moves the change time), its tensors are re-hashed against the packed
            // data, and the identity recorded is the one they were checked under
            Map<String, DataBinding.FileIdentity> after = DataBinding.identities(index);
            if (!after.equals(before)) {
                DataBinding.check(m, index, DataBinding.Check.FAST);
                m = m.withIdentities(after);
                notes.accept("a shard's file identity moved during the pack; its trunk tensors were re-hashed and match what was packed");
            }
            m.write(jsonPart);
            force(jsonPart);
            k3j.io.AtomicWrite.commit(binPart, bin);
            k3j.io.AtomicWrite.commit(jsonPart, json);
            Files.deleteIfExists(journal);
            force(out);
            return TrunkManifest.read(out);
        } catch (IOException | RuntimeException e) {
            deleteQuietly(jsonPart);
            if (copiedLayers == layout.layers().size()) {
                // copied but not verified (or not renamed): nothing in the partial file can be trusted
                deleteQuietly(binPart);
                deleteQuietly(journal);
            }
            String kept = Files.exists(journal) ? "; " + binPart.getFileName() + " and " + journal.getFileName()
                    + " are kept, and running the pack again resumes after the last layer they record" : "";
            if (e instanceof TrunkException te) throw new TrunkException(te.file(), te.layer(), stripFile(te) + kept, te);
            throw new TrunkException(out, TrunkException.NO_LAYER, "packing failed, no trunk written: " + k3j.io.SafeFiles.why(e) + kept, e);
        }
    }

    /**
     * Checks an existing trunk against {@code index} by data (every tensor re-hashed, {@link DataBinding.Check#FULL})
     * and, when the shards' file identities moved since the pack (a copy of the same checkpoint), rewrites trunk.json
     * with the current ones, so the next runs' fast check holds. Throws a {@link TrunkException} when any data differs.
     */
    public static DataBinding.Result rebind(TrunkManifest m, CheckpointIndex index) {
        Map<String, DataBinding.FileIdentity> before = DataBinding.identities(index);
        DataBinding.Result full = m.checkSource(index, DataBinding.Check.FULL);
        Map<String, DataBinding.FileIdentity> after = DataBinding.identities(index);
        if (!after.equals(before)) throw new TrunkException(index.path(), TrunkException.NO_LAYER, "a shard changed while its data was checked; run again");
        List<String> moved = new ArrayList<>();
        for (TrunkManifest.Shard s : m.source().shards()) if (!after.get(s.name()).equals(s.identity())) moved.add(s.name());
        if (moved.isEmpty()) return full;
        Path json = m.json(), part = m.dir().resolve(TrunkManifest.JSON + PARTIAL);
        try {
            m.withIdentities(after).write(part);
            force(part);
            k3j.io.AtomicWrite.commit(part, json);
            force(m.dir());
        } catch (IOException e) {
            deleteQuietly(part);
            throw new TrunkException(json, TrunkException.NO_LAYER, "cannot rewrite the shards' identities: " + e.getMessage(), e);
        }
        return new DataBinding.Result(DataBinding.Check.FULL, full.shards(), moved, full.tensorsHashed(), full.bytesHashed(), full.seconds());
    }

    private static String stripFile(TrunkException e) {
        String m = e.getMessage(), prefix = e.file() + ": " + (e.layer() == TrunkException.NO_LAYER ? "" : "layer " + e.layer() + ": ");
        return m.startsWith(prefix) ? m.substring(prefix.length()) : m;
    }

    static final String JOURNAL = TrunkManifest.BIN + ".journal";
    private static final String JOURNAL_HEAD = "k3j-trunk-journal 1 ";

    /**
     * The lines of a previous pack's journal (none when there is none), read as every other input is: refused, not
     * followed, opened or allocated for, when it is a link, a FIFO or another special file, larger than a journal of
     * this layout can be, or not ASCII text. The refusal says what works: delete it (and the partial trunk), and the
     * pack starts over.
     */
    static List<String> readJournal(Path journal, Path binPart, Layout layout) {
        String fix = "; delete it and " + binPart.getFileName() + " and run pack-trunk again (it starts over)";
        java.nio.file.attribute.BasicFileAttributes a;
        try {
            a = Files.readAttributes(journal, java.nio.file.attribute.BasicFileAttributes.class, java.nio.file.LinkOption.NOFOLLOW_LINKS);
        } catch (java.nio.file.NoSuchFileException e) {
            return List.of();
        } catch (IOException e) {
            throw new TrunkException(journal, TrunkException.NO_LAYER, "cannot read the pack journal: " + k3j.io.SafeFiles.why(e) + fix, e);
        }
        if (!a.isRegularFile()) {
            throw new TrunkException(journal, TrunkException.NO_LAYER, "is " + k3j.io.SafeFiles.kind(journal, a) + ", not a regular file: refused as the pack journal, neither followed nor opened" + fix);
        }
        long cap = 256 + 32L * layout.layers().size();
        if (a.size() > cap) throw new TrunkException(journal, TrunkException.NO_LAYER, "is " + a.size() + " bytes; a pack journal of this layout holds at most " + cap + ": not read" + fix);
        try {
            byte[] b = k3j.io.SafeFiles.readAll(journal, cap, "the pack journal");
            String text = java.nio.charset.StandardCharsets.US_ASCII.newDecoder().onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(b)).toString();
            return text.lines().toList();
        } catch (java.nio.charset.CharacterCodingException e) {
            throw new TrunkException(journal, TrunkException.NO_LAYER, "is not a pack journal (not ASCII text)" + fix, e);
        } catch (IOException e) {
            throw new TrunkException(journal, TrunkException.NO_LAYER, "cannot read the pack journal: " + k3j.io.SafeFiles.why(e) + fix, e);
        }
    }

    /** What a journal must match to be resumed: the checkpoint's headers and the whole layout, pieces included. */
    private static String layoutId(String headerSha256, Layout layout) {
        java.security.MessageDigest md = SourceId.sha256();
        StringBuilder b = new StringBuilder(headerSha256).append('\n');
        for (int i = 0; i < layout.layers().size(); i++) {
            TrunkManifest.Layer l = layout.layers().get(i);
            b.append(l.layer()).append(' ').append(l.offset()).append(' ').append(l.nbytes());
            for (Piece p : layout.pieces().get(i)) {
                b.append(' ').append(p.file().getFileName()).append(':').append(p.source()).append('+').append(p.length()).append('@').append(p.target());
            }
            b.append('\n');
        }
        return java.util.HexFormat.of().formatHex(md.digest(b.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8)));
    }

    /**
     * The layers a previous, interrupted pack of the SAME layout from the SAME checkpoint completed, each re-read
     * and its CRC-32C checked against the journal; the journal is rewritten to hold just those. Anything else
     * (no journal, another layout, a mismatch at layer 0) starts over with a fresh journal.
     */
    private static List<TrunkManifest.Layer> resume(Path binPart, Path journal, List<String> lines, String id, Layout layout, Consumer<String> notes)
            throws IOException {
        List<TrunkManifest.Layer> ok = new ArrayList<>();
        if (Files.isRegularFile(binPart, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            if (!lines.isEmpty() && lines.getFirst().equals(JOURNAL_HEAD + id)) {
                try (FileChannel in = k3j.io.SafeFiles.open(binPart, "the partial trunk")) {
                    ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
                    for (int i = 1; i < lines.size() && i - 1 < layout.layers().size(); i++) {
                        String[] f = lines.get(i).trim().split(" ");
                        TrunkManifest.Layer l = layout.layers().get(i - 1);
                        if (f.length != 2 || !f[0].equals(Integer.toString(l.layer())) || !f[1].matches("[0-9a-f]{8}")) break;
                        int crc = java.util.HexFormat.fromHexDigits(f[1]);
                        if (crcOf(in, l, buf) != (crc & 0xffffffffL)) break;
                        ok.add(new TrunkManifest.Layer(l.layer(), l.offset(), l.nbytes(), crc, l.shard(), l.shardOffset(), l.tensors()));
                    }
                }
            }
        }
        StringBuilder j = new StringBuilder(JOURNAL_HEAD + id + "\n");
        for (TrunkManifest.Layer l : ok) j.append(l.layer()).append(' ').append(TrunkManifest.hex(l.crc32c())).append('\n');
        // a new file renamed over the old one: never written through a link
        k3j.io.AtomicWrite.replace(journal.toAbsolutePath(), ch -> {
            ByteBuffer text = ByteBuffer.wrap(j.toString().getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            while (text.hasRemaining()) ch.write(text);
        });
        if (ok.isEmpty()) {
            Files.deleteIfExists(binPart);
        } else {
            notes.accept("resuming the pack after layer " + ok.getLast().layer() + ": layers 0.." + ok.getLast().layer()
                    + " in " + binPart.getFileName() + " re-read and match the journal");
        }
        return ok;
    }

    /** The CRC-32C of the layer's run in the partial file, or -1 when the file ends first. */
    private static long crcOf(FileChannel in, TrunkManifest.Layer l, ByteBuffer buf) throws IOException {
        CRC32C crc = new CRC32C();
        for (long pos = 0; pos < l.nbytes(); ) {
            buf.clear().limit((int) Math.min(BUFFER, l.nbytes() - pos));
            if (!fill(in, buf, l.offset() + pos)) return -1;
            buf.flip();
            crc.update(buf);
            pos += buf.limit();
        }
        return crc.getValue();
    }

    /** Fills a cleared {@code buf} up to its limit from file position {@code at}; false when the file ends first (buf's position tells where). */
    private static boolean fill(FileChannel in, ByteBuffer buf, long at) throws IOException {
        while (buf.hasRemaining()) if (in.read(buf, at + buf.position()) <= 0) return false;
        return true;
    }

    private static List<TrunkManifest.Layer> copy(Layout layout, Path binPart, Path journal, List<TrunkManifest.Layer> resumed,
                                                  Progress progress, LayerHook hook) throws IOException {
        List<TrunkManifest.Layer> done = new ArrayList<>(resumed);
        ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
        long copied = 0;
        for (TrunkManifest.Layer l : resumed) copied += l.nbytes();
        try (FileChannel dst = k3j.io.AtomicWrite.part(binPart, StandardOpenOption.CREATE);
             FileChannel log = k3j.io.AtomicWrite.part(journal, StandardOpenOption.APPEND)) {
            Map<Path, FileChannel> src = new HashMap<>();
            try {
                for (int i = resumed.size(); i < layout.layers().size(); i++) {
                    TrunkManifest.Layer l = layout.layers().get(i);
                    CRC32C crc = new CRC32C();
                    long at = 0;   // bytes of the padded run written so far
                    for (Piece piece : layout.pieces().get(i)) {
                        if (piece.target() < at) throw new IllegalStateException("layer " + l.layer() + ": pieces out of order");
                        at = zeros(dst, l.offset(), at, piece.target(), crc);
                        FileChannel in = src.get(piece.file());
                        if (in == null) {
                            in = k3j.io.SafeFiles.open(piece.file(), "a checkpoint shard");
                            src.put(piece.file(), in);
                        }
                        long pos = 0;
                        while (pos < piece.length()) {
                            buf.clear().limit((int) Math.min(BUFFER, piece.length() - pos));
                            if (!fill(in, buf, piece.source() + pos)) {
                                throw new TrunkException(piece.file(), l.layer(), "short read at " + (piece.source() + pos + buf.position()));
                            }
                            buf.flip();
                            crc.update(buf.duplicate());
                            while (buf.hasRemaining()) pos += dst.write(buf, l.offset() + at + pos);
                        }
                        at += piece.length();
                    }
                    zeros(dst, l.offset(), at, l.nbytes(), crc);
                    zeros(dst, l.offset(), l.nbytes(), l.padded(), null);   // the tail pad is outside the CRC
                    done.add(new TrunkManifest.Layer(l.layer(), l.offset(), l.nbytes(), (int) crc.getValue(), l.shard(), l.shardOffset(),
                            l.tensors()));
                    dst.force(false);   // the layer is on disk before the journal says so
                    ByteBuffer line = ByteBuffer.wrap((l.layer() + " " + TrunkManifest.hex((int) crc.getValue()) + "\n")
                            .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    while (line.hasRemaining()) log.write(line);
                    log.force(false);
                    copied += l.nbytes();
                    if (hook != null) hook.copied(l.layer());
                    progress.update(done.size(), copied);
                }
            } finally {
                for (FileChannel c : src.values()) c.close();
            }
            if (dst.size() > layout.fileSize()) dst.truncate(layout.fileSize());
            if (dst.size() != layout.fileSize()) {
                throw new TrunkException(binPart, TrunkException.NO_LAYER, "is " + dst.size() + " bytes after copying, expected " + layout.fileSize());
            }
            dst.force(true);
        }
        return List.copyOf(done);
    }

    /** Writes zeros over run bytes [from, to) (CRC'd when crc is not null); returns to. */
    private static long zeros(FileChannel dst, long runOffset, long from, long to, CRC32C crc) throws IOException {
        if (to <= from) return from;
        ByteBuffer z = ByteBuffer.allocate((int) Math.min(to - from, 1 << 20));
        for (long at = from; at < to; ) {
            z.clear().limit((int) Math.min(z.capacity(), to - at));
            if (crc != null) crc.update(z.duplicate());
            while (z.hasRemaining()) at += dst.write(z, runOffset + at);
        }
        return to;
    }

    /**
     * Re-reads every run from the device and compares its CRC-32C and zero padding with what was copied; returns the
     * layers with every tensor's data digest (SHA-256) taken from the bytes re-read: the bytes the CRC proves equal to
     * those read from the shards.
     */
    static List<TrunkManifest.Layer> verify(Path binPart, List<TrunkManifest.Layer> layers, long fileSize, Consumer<String> notes, Progress progress) {
        List<TrunkManifest.Layer> out = new ArrayList<>(layers.size());
        try (DirectReader r = DirectReader.open(binPart, true, notes); Arena arena = Arena.ofConfined()) {
            if (r.size() != fileSize) throw new TrunkException(binPart, TrunkException.NO_LAYER, "is " + r.size() + " bytes, expected " + fileSize);
            MemorySegment buf = DirectIo.allocate(arena, BUFFER);
            long checked = 0;
            for (TrunkManifest.Layer l : layers) {
                CRC32C crc = new CRC32C();
                List<TrunkManifest.Tensor> ts = new ArrayList<>(l.tensors().values());
                java.security.MessageDigest[] md = new java.security.MessageDigest[ts.size()];
                for (int i = 0; i < md.length; i++) md[i] = SourceId.sha256();
                for (long pos = 0; pos < l.padded(); pos += BUFFER) {
                    long len = Math.min(BUFFER, l.padded() - pos);
                    r.read(l.offset() + pos, len, buf, l.layer());
                    long data = Math.max(0, Math.min(len, l.nbytes() - pos));
                    crc.update(buf.asSlice(0, data).asByteBuffer());
                    for (int i = 0; i < md.length; i++) {
                        TrunkManifest.Tensor t = ts.get(i);
                        long a = Math.max(pos, t.offset()), b = Math.min(pos + data, t.offset() + t.length());
                        if (a < b) md[i].update(buf.asSlice(a - pos, b - a).asByteBuffer());
                    }
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
                Map<String, TrunkManifest.Tensor> digested = new LinkedHashMap<>();
                for (int i = 0; i < md.length; i++) {
                    digested.put(ts.get(i).name(), ts.get(i).withSha256(java.util.HexFormat.of().formatHex(md[i].digest())));
                }
                out.add(new TrunkManifest.Layer(l.layer(), l.offset(), l.nbytes(), l.crc32c(), l.shard(), l.shardOffset(), java.util.Collections.unmodifiableMap(digested)));
                checked += l.nbytes();
                progress.update(l.layer() + 1, checked);
            }
        }
        return List.copyOf(out);
    }

    private static void force(Path p) {
        try (FileChannel c = k3j.io.SafeFiles.open(p, "a checkpoint shard")) {
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
