package k3j.dump;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.io.CheckpointException;
import k3j.io.DType;
import k3j.io.Npy;
import k3j.io.Npz;
import k3j.io.SafeFiles;
import k3j.io.SafetensorsFile;
import k3j.io.TensorInfo;
import k3j.io.ZipArchive;

/**
 * A candidate dump in ONE file (docs/formats.md §9.5): a {@code .safetensors} whose tensors are the
 * candidate's arrays and whose header {@code __metadata__} entry {@code "manifest.json"} holds the manifest text, or a
 * {@code .npz} (a zip of {@code <key>.npy} entries) with a {@code manifest.json} entry. The manifest is the folder
 * form's without {@code arrays}: the file's own tensors are the arrays, F32 or I32 only.
 *
 * <p>Checked before any array is used: the safetensors header by the validated reader ({@link SafetensorsFile}), and
 * its tensors must tile the data section exactly (no gap, no overlap, no byte after the last); the npz by the strict zip
 * reader ({@link ZipArchive}: the central directory, each local header against it, crc, caps, unique names) and
 * each entry by the strict .npy reader ({@link Npy}), whose header must account for every byte.
 * The arrays then go through the same container checks as a folder's (dtype and size against the declared shape), and
 * the candidate through the same judgement.
 */
public final class CandidateFile {
    /** The manifest's key: the safetensors metadata entry and the npz entry. */
    public static final String MANIFEST = "manifest.json";
    /** A whole one-file candidate is read into memory: at most one Java array. */
    static final long MAX_BYTES = Integer.MAX_VALUE - 16;

    private CandidateFile() {}

    /** One array: its dtype ("F32"/"I32"), shape and little-endian bytes. */
    public record Array(String dtype, long[] shape, byte[] bytes) {}

    /** What a one-file candidate holds: the manifest text and the arrays by key. */
    record Contents(byte[] manifest, Map<String, Array> arrays) {}

    public static boolean isOneFile(Path p) {
        String n = p.getFileName() == null ? "" : p.getFileName().toString().toLowerCase(Locale.ROOT);
        return n.endsWith(".safetensors") || n.endsWith(".npz");
    }

    static Contents read(Path path) {
        try {
            SafeFiles.requireRegular(path, "a one-file candidate");
        } catch (IOException e) {
            throw ReferenceDump.mismatch(SafeFiles.why(e));
        }
        return path.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".npz") ? npz(path) : safetensors(path);
    }

    private static Contents safetensors(Path path) {
        SafetensorsFile st;
        try {
            st = SafetensorsFile.open(path);
        } catch (CheckpointException e) {
            throw ReferenceDump.mismatch(path + ": not a valid safetensors file: " + e.getMessage());
        }
        String manifest = st.metadata() == null ? null : st.metadata().get(MANIFEST);
        if (manifest == null) throw ReferenceDump.mismatch(path + ": the safetensors header's __metadata__ has no \"" + MANIFEST + "\" entry (the candidate's manifest)");
        if (st.trailingBytes() != 0) throw ReferenceDump.mismatch(path + ": " + st.trailingBytes() + " bytes after the last tensor: a candidate file holds its tensors and nothing else");
        List<TensorInfo> byOffset = new ArrayList<>(st.tensors());
        byOffset.sort(Comparator.comparingLong(TensorInfo::offset));
        long at = st.dataStart();
        for (TensorInfo t : byOffset) {
            if (t.offset() != at) throw ReferenceDump.mismatch(path + ": tensor '" + t.name() + "' starts at data byte " + (t.offset() - st.dataStart())
                    + ", the previous one ends at " + (at - st.dataStart()) + ": the tensors must tile the data section");
            at += t.length();
        }
        if (at != st.fileSize()) throw ReferenceDump.mismatch(path + ": the tensors end at byte " + at + " of " + st.fileSize());
        if (st.fileSize() > MAX_BYTES) throw ReferenceDump.mismatch(path + " is " + st.fileSize() + " bytes, more than one candidate file may hold in memory");
        byte[] all;
        try {
            all = SafeFiles.readAll(path, MAX_BYTES, "a one-file candidate");
        } catch (IOException e) {
            throw ReferenceDump.mismatch("cannot read " + path + ": " + SafeFiles.why(e));
        }
        if (all.length != st.fileSize()) throw ReferenceDump.mismatch(path + " changed while it was read (" + all.length + " of " + st.fileSize() + " bytes)");
        Map<String, Array> arrays = new LinkedHashMap<>();
        for (TensorInfo t : st.tensors()) {
            if (t.dtype() != DType.F32 && t.dtype() != DType.I32) throw ReferenceDump.mismatch(path + ": tensor '" + t.name() + "' is " + t.dtype() + "; a candidate holds F32 or I32 only");
            byte[] b = java.util.Arrays.copyOfRange(all, (int) t.offset(), (int) (t.offset() + t.length()));
            arrays.put(t.name(), new Array(t.dtype().name(), t.shape(), b));
        }
        return new Contents(manifest.getBytes(StandardCharsets.UTF_8), arrays);
    }

    private static Contents npz(Path path) {
        byte[] all;
        try {
            all = SafeFiles.readAll(path, MAX_BYTES, "a one-file candidate");
        } catch (IOException e) {
            throw ReferenceDump.mismatch("cannot read " + path + ": " + SafeFiles.why(e));
        }
        Npz npz;
        try {
            npz = Npz.read(all, path.toString(), MAX_BYTES);
        } catch (ZipArchive.ZipFormatException | Npy.NpyException e) {
            throw ReferenceDump.mismatch(e.getMessage() + " (an .npz candidate is a zip of <key>.npy arrays and " + MANIFEST + ")");
        }
        for (String name : npz.others().keySet()) {
            if (!name.equals(MANIFEST)) throw ReferenceDump.mismatch(path + ": entry '" + name + "' is neither " + MANIFEST + " nor an .npy array");
        }
        Map<String, Array> arrays = new LinkedHashMap<>();
        for (var en : npz.arrays().entrySet()) {
            if (en.getKey().contains("/") || en.getKey().contains("\\")) throw ReferenceDump.mismatch(path + ": entry '" + en.getKey() + ".npy': an npz candidate holds flat entries only");
            Npy a = en.getValue();
            arrays.put(en.getKey(), new Array(a.descr().equals("<f4") ? "F32" : "I32", a.shape(), a.bytes()));
        }
        byte[] manifest = npz.others().get(MANIFEST);
        if (manifest == null) throw ReferenceDump.mismatch(path + ": the npz holds no " + MANIFEST + " entry (the candidate's manifest)");
        return new Contents(manifest, arrays);
    }

    /** The arrays as a folder manifest's {@code arrays} table (file = key.bin, sha256 of the bytes) and the bytes by file name. */
    static Map<String, byte[]> entries(Contents c) {
        Map<String, byte[]> m = new LinkedHashMap<>();
        c.arrays().forEach((k, a) -> m.put(k + ".bin", a.bytes()));
        return m;
    }

    static com.fasterxml.jackson.databind.node.ObjectNode table(Contents c) {
        var f = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance;
        var t = f.objectNode();
        c.arrays().forEach((k, a) -> {
            var o = t.putObject(k);
            o.put("file", k + ".bin");
            o.put("dtype", a.dtype());
            var s = o.putArray("shape");
            for (long d : a.shape()) s.add(d);
            o.put("sha256", ReferenceDump.sha256(a.bytes()));
        });
        return t;
    }

    /** Little-endian view (for tests). */
    static ByteBuffer le(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }
}
