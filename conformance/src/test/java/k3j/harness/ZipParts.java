package k3j.harness;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.CRC32;

/**
 * A zip (an .npz) taken apart the way a hostile writer would, for the parser-differential plants: the archive
 * without its central directory, or with one entry's central record pointing at another local entry appended
 * after the originals (what numpy, zipfile and unzip read), its local entries untouched (what a reader scanning
 * local headers reads). Works on archives without comments or zip64 records, as zipfile and k3j write them.
 */
public final class ZipParts {
    private ZipParts() {}

    private static ByteBuffer le(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static int end(byte[] zip) {
        int e = zip.length - 22;
        if (e < 0 || le(zip).getInt(e) != 0x06054b50) throw new IllegalArgumentException("not a comment-less zip");
        return e;
    }

    private static int centralStart(byte[] zip) {
        return le(zip).getInt(end(zip) + 16);
    }

    /** The local entries alone: no central directory, no end record. */
    public static byte[] withoutCentralDirectory(byte[] zip) {
        return Arrays.copyOf(zip, centralStart(zip));
    }

    /**
     * {@code zip} with a second local entry named {@code name} holding {@code content} (stored) appended after the
     * local entries, and the central record of {@code name} (and only it) pointing at the new one.
     */
    public static byte[] centralPointingElsewhere(byte[] zip, String name, byte[] content) {
        int cd = centralStart(zip), e = end(zip);
        ByteBuffer z = le(zip);
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        CRC32 crc = new CRC32();
        crc.update(content);
        ByteBuffer local = ByteBuffer.allocate(30 + n.length + content.length).order(ByteOrder.LITTLE_ENDIAN);
        local.putInt(0x04034b50).putShort((short) 20).putShort((short) 0).putShort((short) 0).putInt(0)
                .putInt((int) crc.getValue()).putInt(content.length).putInt(content.length).putShort((short) n.length).putShort((short) 0).put(n).put(content);
        byte[] central = Arrays.copyOfRange(zip, cd, e);
        ByteBuffer c = le(central);
        boolean found = false;
        for (int at = 0; at < central.length; ) {
            int nl = c.getShort(at + 28) & 0xffff, xl = c.getShort(at + 30) & 0xffff, cl = c.getShort(at + 32) & 0xffff;
            if (Arrays.equals(central, at + 46, at + 46 + nl, n, 0, n.length)) {
                if ((c.getShort(at + 10) & 0xffff) != 0) throw new IllegalArgumentException(name + " is not stored");
                c.putShort(at + 8, (short) 0).putInt(at + 16, (int) crc.getValue()).putInt(at + 20, content.length).putInt(at + 24, content.length).putInt(at + 42, cd);
                found = true;
            }
            at += 46 + nl + xl + cl;
        }
        if (!found) throw new IllegalArgumentException("no entry " + name);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(zip, 0, cd);
        out.write(local.array(), 0, local.capacity());
        out.write(central, 0, central.length);
        byte[] tail = Arrays.copyOfRange(zip, e, zip.length);
        le(tail).putInt(16, cd + local.capacity());
        out.write(tail, 0, tail.length);
        return out.toByteArray();
    }

    /** The content of the stored entry {@code name}, as its central record says. */
    public static byte[] entry(byte[] zip, String name) {
        int cd = centralStart(zip), e = end(zip);
        ByteBuffer z = le(zip);
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        for (int at = cd; at < e; ) {
            int nl = z.getShort(at + 28) & 0xffff, xl = z.getShort(at + 30) & 0xffff, cl = z.getShort(at + 32) & 0xffff;
            if (Arrays.equals(zip, at + 46, at + 46 + nl, n, 0, n.length)) {
                int off = z.getInt(at + 42), size = z.getInt(at + 24);
                int data = off + 30 + (z.getShort(off + 26) & 0xffff) + (z.getShort(off + 28) & 0xffff);
                return Arrays.copyOfRange(zip, data, data + size);
            }
            at += 46 + nl + xl + cl;
        }
        throw new IllegalArgumentException("no entry " + name);
    }

    /** An .npy (version 1.0) of {@code data} under the header dict {@code dict}, padded as numpy pads it. */
    public static byte[] npy(String dict, byte[] data) {
        int pad = (64 - (10 + dict.length() + 1) % 64) % 64;
        byte[] h = (dict + " ".repeat(pad) + "\n").getBytes(StandardCharsets.ISO_8859_1);
        ByteBuffer b = ByteBuffer.allocate(10 + h.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}).putShort((short) h.length).put(h).put(data);
        return b.array();
    }

    /** {@code npy} (a whole .npy) with its data scaled by {@code factor} as float32 little-endian. */
    public static byte[] scaled(byte[] npy, float factor) {
        ByteBuffer b = le(npy.clone());
        int start = 10 + (b.getShort(8) & 0xffff);
        for (int i = start; i + 4 <= npy.length; i += 4) b.putFloat(i, b.getFloat(i) * factor);
        return b.array();
    }

    /** {@code npy} (a version 1.0 .npy) with its header dict rewritten by {@code edit}, re-padded; the data kept. */
    public static byte[] withHeader(byte[] npy, java.util.function.UnaryOperator<String> edit) {
        int len = le(npy).getShort(8) & 0xffff;
        String dict = new String(npy, 10, len, StandardCharsets.ISO_8859_1).strip();
        return npy(edit.apply(dict), Arrays.copyOfRange(npy, 10 + len, npy.length));
    }

    /** {@code zip} rewritten entry by entry (stored), {@code name}'s content replaced by {@code content}. */
    public static byte[] replaced(byte[] zip, String name, byte[] content) throws java.io.IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        boolean found = false;
        try (var in = new java.util.zip.ZipInputStream(new java.io.ByteArrayInputStream(zip)); var z = new java.util.zip.ZipOutputStream(out)) {
            for (var e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
                byte[] b = in.readAllBytes();
                if (e.getName().equals(name)) {
                    b = content;
                    found = true;
                }
                var w = new java.util.zip.ZipEntry(e.getName());
                CRC32 crc = new CRC32();
                crc.update(b);
                w.setMethod(java.util.zip.ZipEntry.STORED);
                w.setSize(b.length);
                w.setCompressedSize(b.length);
                w.setCrc(crc.getValue());
                z.putNextEntry(w);
                z.write(b);
                z.closeEntry();
            }
        }
        if (!found) throw new IllegalArgumentException("no entry " + name);
        return out.toByteArray();
    }
}
