package k3j.io;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.io.CheckpointException.Rule;

/**
 * One safetensors file, its untrusted header parsed with Jackson's streaming parser and validated:
 * {@code [u64 LE header length][header JSON object][data section]}. Every offset is checked against the
 * file before anything is sized by it. Unknown keys inside a tensor entry are REFUSED (a key we do not
 * understand could change what the bytes mean); {@code __metadata__} must map strings to strings.
 * Bytes after the last tensor are allowed and reported by {@link #trailingBytes()}.
 */
public final class SafetensorsFile {
    /** Headers larger than this are refused before allocating (the real K3 shards' are under 1 MiB). */
    public static final long MAX_HEADER_BYTES = 100L << 20;
    /** Shapes with more dimensions than this are refused. */
    public static final int MAX_RANK = 64;

    static final JsonFactory JSON = JsonFactory.builder()
            // 497,052 distinct names: a symbol table (let alone String.intern) only costs here; without
            // it the released layout's index parses 5-10x faster
            .disable(JsonFactory.Feature.CANONICALIZE_FIELD_NAMES)
            .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
            .build();

    private final Path file;
    private final int shard;
    private final long fileSize;
    private final long headerLength;
    private final List<TensorInfo> tensors;
    private volatile Map<String, TensorInfo> byName;   // built on the first find()
    private final Map<String, String> metadata;
    private final long dataEnd;

    private SafetensorsFile(Path file, int shard, long fileSize, long headerLength, List<TensorInfo> tensors,
                            Map<String, String> metadata, long dataEnd) {
        this.file = file;
        this.shard = shard;
        this.fileSize = fileSize;
        this.headerLength = headerLength;
        this.tensors = tensors;
        this.metadata = metadata;
        this.dataEnd = dataEnd;
    }

    /** Opens and validates one file as shard 0. */
    public static SafetensorsFile open(Path file) {
        return open(file, 0);
    }

    /** Opens and validates one file; its tensors carry {@code shard} as their shard number. */
    public static SafetensorsFile open(Path file, int shard) {
        SafetensorsFile s = openUnchecked(file, shard);
        Map<String, TensorInfo> byName = HashMap.newHashMap(s.tensors.size());
        for (TensorInfo t : s.tensors) {
            if (byName.putIfAbsent(t.name(), t) != null) throw duplicate(t);
        }
        s.byName = byName;
        return s;
    }

    static CheckpointException duplicate(TensorInfo t) {
        return new CheckpointException(Rule.DUPLICATE_NAME, t.file(), t.name(), "appears twice in the header");
    }

    /**
     * {@link #open} except for duplicate names, which the caller must refuse: {@link CheckpointIndex} finds
     * them in its one map over all shards, saving a second hash map of every name.
     */
    static SafetensorsFile openUnchecked(Path file, int shard) {
        if (!Files.exists(file)) throw new CheckpointException(Rule.IO, file, null, "no such file");
        if (Files.isDirectory(file)) throw new CheckpointException(Rule.IO, file, null, "not a regular file (a directory)");
        try {
            SafeFiles.requireRegular(file, "a safetensors file");
        } catch (IOException e) {
            throw new CheckpointException(Rule.NOT_REGULAR, file, null, SafeFiles.why(e));
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < 8) {
                throw new CheckpointException(Rule.TOO_SHORT, file, null,
                        "file is " + size + " bytes, shorter than the 8-byte header length");
            }
            ByteBuffer lenBuf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, lenBuf, 0, file);
            long hlen = lenBuf.getLong(0);
            if (hlen < 0 || hlen > MAX_HEADER_BYTES) {
                throw new CheckpointException(Rule.HEADER_LENGTH, file, null, "header length "
                        + Long.toUnsignedString(hlen) + " is absurd (limit " + MAX_HEADER_BYTES + " bytes)");
            }
            if (hlen < 2) {
                throw new CheckpointException(Rule.HEADER_LENGTH, file, null,
                        "header length " + hlen + " is too small for a JSON object");
            }
            if (hlen > size - 8) {
                throw new CheckpointException(Rule.HEADER_LENGTH, file, null, "header length " + hlen
                        + " runs past the end of the file (" + size + " bytes)");
            }
            byte[] header = new byte[(int) hlen];
            readFully(ch, ByteBuffer.wrap(header), 8, file);
            return parse(file, shard, size, header);
        } catch (NoSuchFileException e) {
            throw new CheckpointException(Rule.IO, file, null, "no such file", e);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, null, "cannot read: " + e, e);
        }
    }

    private static void readFully(FileChannel ch, ByteBuffer dst, long position, Path file) throws IOException {
        long pos = position;
        while (dst.hasRemaining()) {
            int n = ch.read(dst, pos);
            if (n < 0) {
                throw new CheckpointException(Rule.SHORT_READ, file, null,
                        "file ended at byte " + pos + " while reading the header");
            }
            pos += n;
        }
    }

    // ---------------------------------------------------------------------------------------------
    // header parsing

    private static SafetensorsFile parse(Path file, int shard, long fileSize, byte[] header) {
        long dataStart = 8L + header.length;
        long dataSize = fileSize - dataStart;
        // Jackson guesses UTF-16/32 from zero bytes after the first one; the format says UTF-8, so the
        // object must open at byte 0 and the next byte must not be NUL.
        if (header[0] != '{') {
            throw new CheckpointException(Rule.HEADER_NOT_OBJECT, file, null,
                    "header does not start with '{' (a JSON object)");
        }
        if (header[1] == 0) {
            throw new CheckpointException(Rule.HEADER_NOT_JSON, file, null, "header is not UTF-8 JSON (NUL byte)");
        }
        strictUtf8(file, header);
        List<TensorInfo> tensors = new ArrayList<>();
        Map<String, String> metadata = null;
        long[] dims = new long[8];
        try (JsonParser p = JSON.createParser(header)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new CheckpointException(Rule.HEADER_NOT_OBJECT, file, null, "header is not a JSON object");
            }
            JsonToken t;
            while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
                String name = p.currentName();
                p.nextToken();
                if (name.equals("__metadata__")) {
                    if (metadata != null) {
                        throw new CheckpointException(Rule.BAD_METADATA, file, null, "__metadata__ appears twice");
                    }
                    metadata = parseMetadata(p, file);
                    continue;
                }
                wellFormed(file, name, "a tensor name");
                tensors.add(parseEntry(p, file, shard, name, dataStart, dataSize, dims));
            }
            if (t != JsonToken.END_OBJECT) {
                throw new CheckpointException(Rule.HEADER_NOT_JSON, file, null, "header object is not closed");
            }
            if (p.nextToken() != null) {
                throw new CheckpointException(Rule.HEADER_NOT_JSON, file, null,
                        "content after the header object at " + location(p));
            }
        } catch (JsonProcessingException e) {
            throw new CheckpointException(Rule.HEADER_NOT_JSON, file, null,
                    "header is not valid JSON: " + e.getOriginalMessage() + " at " + location(e), e);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, null, "cannot parse the header: " + e, e);
        }
        long dataEnd = checkOverlaps(file, tensors, dataStart);
        return new SafetensorsFile(file, shard, fileSize, header.length, Collections.unmodifiableList(tensors),
                metadata == null ? Map.of() : Collections.unmodifiableMap(metadata), dataEnd);
    }

    /**
     * The header must be well-formed UTF-8 (RFC 3629): Jackson would accept an overlong {@code C1 A1}, a
     * CESU-8 surrogate {@code ED A0 80} or a stray {@code FF} in a name and hand back a string no other reader
     * agrees on. Java's decoder, set to REPORT, refuses all three.
     */
    private static void strictUtf8(Path file, byte[] header) {
        var dec = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT).onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(header);
        java.nio.CharBuffer out = java.nio.CharBuffer.allocate(4096);
        while (true) {
            var r = dec.decode(in, out, true);
            if (r.isError()) {
                throw new CheckpointException(Rule.BAD_NAME, file, null, "header byte " + in.position() + " (0x"
                        + String.format("%02X", header[in.position()] & 0xFF) + ") starts an invalid UTF-8 sequence (overlong, surrogate or not UTF-8)");
            }
            if (r.isUnderflow()) break;
            out.clear();
        }
    }

    /** A decoded JSON string (a name, a metadata key or value) must be well-formed UTF-16: a \\uD800 escape alone is not text. */
    static void wellFormed(Path file, String s, String what) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                throw new CheckpointException(Rule.BAD_NAME, file, null, what + " holds a lone surrogate U+" + String.format("%04X", (int) c)
                        + " at char " + i + ": not Unicode text");
            }
        }
    }

    private static String location(JsonParser p) {
        return location(p.currentTokenLocation());
    }

    private static String location(JsonProcessingException e) {
        return e.getLocation() == null ? "an unknown position" : location(e.getLocation());
    }

    /** Jackson's UTF-8 parser counts header bytes in the "char" offset and leaves the byte offset at -1. */
    private static String location(JsonLocation loc) {
        return "header byte " + Math.max(loc.getByteOffset(), loc.getCharOffset());
    }

    private static Map<String, String> parseMetadata(JsonParser p, Path file) throws IOException {
        if (p.currentToken() != JsonToken.START_OBJECT) {
            throw new CheckpointException(Rule.BAD_METADATA, file, null, "__metadata__ is not a JSON object");
        }
        Map<String, String> m = new LinkedHashMap<>();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String key = p.currentName();
            if (p.nextToken() != JsonToken.VALUE_STRING) {
                throw new CheckpointException(Rule.BAD_METADATA, file, null, "__metadata__ value of "
                        + CheckpointException.quote(key) + " is not a string (" + p.currentToken() + ")");
            }
            wellFormed(file, key, "a __metadata__ key");
            wellFormed(file, p.getText(), "the __metadata__ value of " + CheckpointException.quote(key));
            if (m.put(key, p.getText()) != null) {
                throw new CheckpointException(Rule.BAD_METADATA, file, null,
                        "__metadata__ key " + CheckpointException.quote(key) + " appears twice");
            }
        }
        return m;
    }

    private static TensorInfo parseEntry(JsonParser p, Path file, int shard, String name, long dataStart,
                                         long dataSize, long[] dimBuf) throws IOException {
        if (p.currentToken() != JsonToken.START_OBJECT) {
            throw new CheckpointException(Rule.BAD_ENTRY, file, name, "entry is not a JSON object");
        }
        DType dtype = null;
        long[] shape = null;
        long begin = -1, end = -1;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String key = p.currentName();
            JsonToken v = p.nextToken();
            switch (key) {
                case "dtype" -> {
                    if (dtype != null) throw duplicateKey(file, name, key);
                    if (v != JsonToken.VALUE_STRING) {
                        throw new CheckpointException(Rule.BAD_ENTRY, file, name, "dtype is not a string");
                    }
                    String s = p.getText();
                    dtype = DType.parse(s);
                    if (dtype == null) {
                        throw new CheckpointException(Rule.UNKNOWN_DTYPE, file, name,
                                "unknown dtype " + CheckpointException.quote(s));
                    }
                }
                case "shape" -> {
                    if (shape != null) throw duplicateKey(file, name, key);
                    shape = parseShape(p, file, name, dimBuf);
                }
                case "data_offsets" -> {
                    if (begin >= 0) throw duplicateKey(file, name, key);
                    if (v != JsonToken.START_ARRAY) {
                        throw new CheckpointException(Rule.BAD_OFFSETS, file, name, "data_offsets is not an array");
                    }
                    begin = offsetValue(p, file, name);
                    end = offsetValue(p, file, name);
                    if (p.nextToken() != JsonToken.END_ARRAY) {
                        throw new CheckpointException(Rule.BAD_OFFSETS, file, name,
                                "data_offsets must be exactly [begin, end]");
                    }
                    if (begin > end) {
                        throw new CheckpointException(Rule.BAD_OFFSETS, file, name,
                                "data_offsets begin " + begin + " is after end " + end);
                    }
                }
                default -> throw new CheckpointException(Rule.BAD_ENTRY, file, name,
                        "unknown key " + CheckpointException.quote(key) + " (only dtype, shape, data_offsets)");
            }
        }
        if (dtype == null) throw missingKey(file, name, "dtype");
        if (shape == null) throw missingKey(file, name, "shape");
        if (begin < 0) throw missingKey(file, name, "data_offsets");
        long bytes;
        try {
            long count = 1;
            for (long d : shape) count = Math.multiplyExact(count, d);
            bytes = Math.multiplyExact(count, (long) dtype.size());
        } catch (ArithmeticException e) {
            throw new CheckpointException(Rule.SHAPE_OVERFLOW, file, name,
                    "shape " + Arrays.toString(shape) + " of " + dtype + " overflows a 64-bit byte count");
        }
        if (end - begin != bytes) {
            throw new CheckpointException(Rule.SIZE_MISMATCH, file, name, "data_offsets span " + (end - begin)
                    + " bytes but shape " + Arrays.toString(shape) + " of " + dtype + " implies " + bytes);
        }
        if (end > dataSize) {
            throw new CheckpointException(Rule.OUT_OF_DATA, file, name, "data_offsets end " + end
                    + " lies past the end of the data section (" + dataSize + " bytes): truncated file or bad offsets");
        }
        return new TensorInfo(name, shard, file, dtype, shape, dataStart + begin, bytes);
    }

    private static long[] parseShape(JsonParser p, Path file, String name, long[] buf) throws IOException {
        if (p.currentToken() != JsonToken.START_ARRAY) {
            throw new CheckpointException(Rule.BAD_SHAPE, file, name, "shape is not an array");
        }
        int rank = 0;
        JsonToken t;
        while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
            if (t != JsonToken.VALUE_NUMBER_INT) {
                throw new CheckpointException(Rule.BAD_SHAPE, file, name, "shape holds a non-integer (" + t + ")");
            }
            if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                throw new CheckpointException(Rule.BAD_SHAPE, file, name,
                        "dimension " + p.getText() + " does not fit in 64 bits");
            }
            long d = p.getLongValue();
            if (d < 0) {
                throw new CheckpointException(Rule.BAD_SHAPE, file, name, "negative dimension " + d);
            }
            if (rank == MAX_RANK) {
                throw new CheckpointException(Rule.BAD_SHAPE, file, name, "rank above " + MAX_RANK);
            }
            if (rank == buf.length) buf = Arrays.copyOf(buf, buf.length * 2);
            buf[rank++] = d;
        }
        return Arrays.copyOf(buf, rank);
    }

    private static long offsetValue(JsonParser p, Path file, String name) throws IOException {
        JsonToken t = p.nextToken();
        if (t != JsonToken.VALUE_NUMBER_INT) {
            throw new CheckpointException(Rule.BAD_OFFSETS, file, name,
                    "data_offsets must be exactly [begin, end] integers (" + t + ")");
        }
        if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
            throw new CheckpointException(Rule.BAD_OFFSETS, file, name,
                    "data offset " + p.getText() + " does not fit in 64 bits");
        }
        long v = p.getLongValue();
        if (v < 0) throw new CheckpointException(Rule.BAD_OFFSETS, file, name, "negative data offset " + v);
        return v;
    }

    private static CheckpointException duplicateKey(Path file, String name, String key) {
        return new CheckpointException(Rule.BAD_ENTRY, file, name, "key " + key + " appears twice");
    }

    private static CheckpointException missingKey(Path file, String name, String key) {
        return new CheckpointException(Rule.BAD_ENTRY, file, name, "missing " + key);
    }

    /** Refuses two non-empty tensors sharing a byte; returns the absolute end of the last tensor's bytes. */
    private static long checkOverlaps(Path file, List<TensorInfo> tensors, long dataStart) {
        TensorInfo[] sorted = tensors.toArray(new TensorInfo[0]);
        Arrays.sort(sorted, Comparator.comparingLong(TensorInfo::offset).thenComparingLong(TensorInfo::length));
        long maxEnd = dataStart;
        TensorInfo owner = null;
        for (TensorInfo t : sorted) {
            if (t.length() > 0 && t.offset() < maxEnd) {
                throw new CheckpointException(Rule.OVERLAP, file, t.name(), "bytes [" + (t.offset() - dataStart)
                        + ", " + (t.offset() - dataStart + t.length()) + ") overlap tensor "
                        + CheckpointException.quote(owner.name()));
            }
            long end = t.offset() + t.length();
            if (end > maxEnd) {
                maxEnd = end;
                owner = t;
            }
        }
        return maxEnd;
    }

    // ---------------------------------------------------------------------------------------------
    // accessors

    public Path file() {
        return file;
    }

    public int shard() {
        return shard;
    }

    public long fileSize() {
        return fileSize;
    }

    public long headerLength() {
        return headerLength;
    }

    /** Absolute offset of the data section: 8 + header length. */
    public long dataStart() {
        return 8 + headerLength;
    }

    /** The tensors in header order. */
    public List<TensorInfo> tensors() {
        return tensors;
    }

    /** The tensor named {@code name} in this file, or null. */
    public TensorInfo find(String name) {
        Map<String, TensorInfo> m = byName;
        if (m == null) {
            m = HashMap.newHashMap(tensors.size());
            for (TensorInfo t : tensors) m.putIfAbsent(t.name(), t);
            byName = m;
        }
        return m.get(name);
    }

    public Map<String, String> metadata() {
        return metadata;
    }

    /** The sum of the tensors' byte lengths. */
    public long dataBytes() {
        long s = 0;
        for (TensorInfo t : tensors) s += t.length();
        return s;
    }

    /** Bytes after the last tensor's end (allowed, not an error). */
    public long trailingBytes() {
        return fileSize - dataEnd;
    }
}
