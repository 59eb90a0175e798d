package k3j.testkit;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * The test kit's one safetensors writer: {@code [u64 LE header length][header JSON][data]}. {@link #header}
 * builds a well-formed header (names sorted, as real shards list them, padded with spaces to 8 bytes);
 * {@link #write(Path, String, byte[])} takes any header text, so tests can also write malformed files.
 */
public final class SafetensorsWriter {
    /** One header entry: data bytes {@code [begin, end)} of the data section. */
    public record Entry(String name, String dtype, long[] shape, long begin, long end) {}

    private SafetensorsWriter() {}

    /** A header listing {@code entries} by name, with {@code metadata} as {@code __metadata__} (none when empty). */
    public static byte[] header(Map<String, String> metadata, List<Entry> entries) {
        ByteArrayOutputStream json = new ByteArrayOutputStream(64 + entries.size() * 128);
        try (JsonGenerator g = new JsonFactory().createGenerator(json, JsonEncoding.UTF8)) {
            g.writeStartObject();
            if (!metadata.isEmpty()) {
                g.writeObjectFieldStart("__metadata__");
                for (var m : metadata.entrySet()) g.writeStringField(m.getKey(), m.getValue());
                g.writeEndObject();
            }
            for (Entry e : entries.stream().sorted(Comparator.comparing(Entry::name)).toList()) {
                g.writeObjectFieldStart(e.name());
                g.writeStringField("dtype", e.dtype());
                g.writeArrayFieldStart("shape");
                for (long d : e.shape()) g.writeNumber(d);
                g.writeEndArray();
                g.writeArrayFieldStart("data_offsets");
                g.writeNumber(e.begin());
                g.writeNumber(e.end());
                g.writeEndArray();
                g.writeEndObject();
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        // the data section starts 8-byte aligned: the header is padded with spaces, as the safetensors library does
        while (json.size() % 8 != 0) json.write(' ');
        return json.toByteArray();
    }

    /** {@code header} as given (not checked, not padded), then {@code data}; parent folders created. */
    public static Path write(Path file, String header, byte[] data) {
        return write(file, header.getBytes(StandardCharsets.UTF_8), data);
    }

    public static Path write(Path file, byte[] header, byte[] data) {
        try (FileChannel ch = open(file, header)) {
            ByteBuffer b = ByteBuffer.wrap(data);
            while (b.hasRemaining()) ch.write(b);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file, e);
        }
    }

    /** The header, then {@code dataBytes} of data left as a hole: no disk blocks. Returns the file size. */
    public static long writeSparse(Path file, byte[] header, long dataBytes) {
        long size = 8L + header.length + dataBytes;
        try (FileChannel _ = open(file, header); RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(size);
            return size;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file, e);
        }
    }

    /** A new file holding the length and the header, positioned for its data. */
    public static FileChannel open(Path file, byte[] header) throws IOException {
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) Files.createDirectories(parent);
        FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        ByteBuffer head = ByteBuffer.allocate(8 + header.length).order(ByteOrder.LITTLE_ENDIAN);
        head.putLong(header.length).put(header).flip();
        while (head.hasRemaining()) ch.write(head);
        return ch;
    }
}
