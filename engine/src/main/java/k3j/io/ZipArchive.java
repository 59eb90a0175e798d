package k3j.io;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * A zip file (an {@code .npz}) read as numpy, Python's {@code zipfile} and {@code unzip} read it: from its central
 * directory, found by the end-of-central-directory record (and the zip64 one when its locator precedes it), with
 * every local header checked against its central entry. Refused with {@link ZipFormatException}: no central
 * directory; a central entry count or size that does not account for its bytes; a local header whose name, flags,
 * method, crc or sizes differ from the central entry's; entries that overlap, leave a gap or do not start at byte 0
 * (bytes before the first entry: numpy would not take the file for a zip); two entries of one name; a name that is
 * not printable ASCII; encryption; a method other than stored (0) or deflate (8); a size over the cap; a crc that
 * does not match the data. docs/formats.md, "npy and npz", lists the rules.
 */
public final class ZipArchive {
    /** A file that is not a zip this reader accepts. */
    public static final class ZipFormatException extends RuntimeException {
        public ZipFormatException(String message) {
            super(message);
        }
    }

    private static final int LOCAL = 0x04034b50, CENTRAL = 0x02014b50, END = 0x06054b50, END64 = 0x06064b50, LOCATOR64 = 0x07064b50,
            DESCRIPTOR = 0x08074b50;
    private static final int END_SIZE = 22, END64_SIZE = 56, LOCATOR_SIZE = 20, CENTRAL_SIZE = 46, LOCAL_SIZE = 30;
    /** Flag bits read: 1-2 (deflate level hints), 3 (a data descriptor follows the data), 11 (UTF-8 names). */
    private static final int FLAGS_KNOWN = 0x0002 | 0x0004 | 0x0008 | 0x0800;
    private static final long MARK32 = 0xffffffffL;
    /** Python's zipfile refuses an entry needing a later version than 6.3. */
    private static final int MAX_VERSION = 63;
    /** A deflate stream expands at most ~1032x. */
    private static final long MAX_RATIO = 1032;

    private ZipArchive() {}

    /** True when {@code b} starts as numpy's loader takes a file for a zip: a local header or an empty archive's end record. */
    public static boolean looksLikeZip(byte[] b) {
        return b.length >= 4 && (le(b).getInt(0) == LOCAL || le(b).getInt(0) == END);
    }

    private record Entry(String name, int flags, int method, long crc, long csize, long size, long offset, byte[] rawName) {}

    /**
     * The entries of {@code b} in central-directory order, name to uncompressed bytes; at most {@code maxTotal} bytes
     * in all. {@code source} names the file in errors.
     */
    public static Map<String, byte[]> read(byte[] b, String source, long maxTotal) {
        if (!looksLikeZip(b)) throw fail(source, "not a zip file (it does not start with a zip local header, PK\\3\\4)");
        ByteBuffer bb = le(b);
        int eocd = findEnd(b);
        if (eocd < 0) throw fail(source, "no end-of-central-directory record: the central directory is missing (a zip is read from it)");
        int comment = bb.getShort(eocd + 20) & 0xffff;
        if (eocd + END_SIZE + comment != b.length) throw fail(source, "the end record's comment length " + comment + " does not reach the end of the file");
        long disk = bb.getShort(eocd + 4) & 0xffff, cdDisk = bb.getShort(eocd + 6) & 0xffff;
        long onDisk = bb.getShort(eocd + 8) & 0xffff, total = bb.getShort(eocd + 10) & 0xffff;
        long cdSize = bb.getInt(eocd + 12) & MARK32, cdOffset = bb.getInt(eocd + 16) & MARK32;
        long cdEnd = eocd;
        if (eocd >= LOCATOR_SIZE && bb.getInt(eocd - LOCATOR_SIZE) == LOCATOR64) {
            // Python's zipfile takes the zip64 record to sit right before its locator; so must it here
            int loc = eocd - LOCATOR_SIZE, rec = loc - END64_SIZE;
            if (bb.getInt(loc + 4) != 0 || (bb.getInt(loc + 16) & MARK32) > 1) throw fail(source, "a multi-disk zip64 archive");
            if (rec < 0 || bb.getInt(rec) != END64) throw fail(source, "a zip64 locator without its zip64 end record before it");
            if (bb.getLong(loc + 8) != rec) throw fail(source, "the zip64 locator points at byte " + bb.getLong(loc + 8) + ", the zip64 end record is at " + rec);
            if (bb.getLong(rec + 4) != END64_SIZE - 12) throw fail(source, "a zip64 end record with extensible data");
            long d64 = bb.getInt(rec + 16) & MARK32, cd64 = bb.getInt(rec + 20) & MARK32;
            long on64 = bb.getLong(rec + 24), total64 = bb.getLong(rec + 32), size64 = bb.getLong(rec + 40), off64 = bb.getLong(rec + 48);
            if (!agrees(disk, d64, 0xffff) || !agrees(cdDisk, cd64, 0xffff) || !agrees(onDisk, on64, 0xffff) || !agrees(total, total64, 0xffff)
                    || !agrees(cdSize, size64, MARK32) || !agrees(cdOffset, off64, MARK32)) {
                throw fail(source, "the end record and the zip64 end record disagree");
            }
            disk = d64;
            cdDisk = cd64;
            onDisk = on64;
            total = total64;
            cdSize = size64;
            cdOffset = off64;
            cdEnd = rec;
        }
        if (disk != 0 || cdDisk != 0 || onDisk != total) throw fail(source, "a multi-disk archive");
        if (cdOffset < 0 || cdSize < 0 || cdOffset + cdSize != cdEnd) {
            throw fail(source, "the central directory (" + cdSize + " bytes at " + cdOffset + ") does not end where the end record starts (byte " + cdEnd + ")");
        }
        if (total > cdSize / CENTRAL_SIZE) throw fail(source, total + " entries cannot fit in a central directory of " + cdSize + " bytes");
        List<Entry> entries = new ArrayList<>();
        Map<String, Entry> byName = new LinkedHashMap<>();
        int at = (int) cdOffset;
        for (long i = 0; i < total; i++) {
            if (at + CENTRAL_SIZE > cdEnd || bb.getInt(at) != CENTRAL) throw fail(source, "central entry " + i + " at byte " + at + " is not a central directory header");
            int version = bb.get(at + 6) & 0xff, flags = bb.getShort(at + 8) & 0xffff, method = bb.getShort(at + 10) & 0xffff;
            long crc = bb.getInt(at + 16) & MARK32, csize = bb.getInt(at + 20) & MARK32, size = bb.getInt(at + 24) & MARK32;
            int nameLen = bb.getShort(at + 28) & 0xffff, extraLen = bb.getShort(at + 30) & 0xffff, commentLen = bb.getShort(at + 32) & 0xffff;
            long diskStart = bb.getShort(at + 34) & 0xffff, offset = bb.getInt(at + 42) & MARK32;
            int next = at + CENTRAL_SIZE + nameLen + extraLen + commentLen;
            if (next > cdEnd) throw fail(source, "central entry " + i + " runs past the central directory");
            byte[] rawName = java.util.Arrays.copyOfRange(b, at + CENTRAL_SIZE, at + CENTRAL_SIZE + nameLen);
            String name = name(rawName, source, "central entry " + i);
            if (version > MAX_VERSION) throw fail(source, "entry '" + name + "' needs zip version " + version / 10 + "." + version % 10);
            if ((flags & ~FLAGS_KNOWN) != 0) throw fail(source, "entry '" + name + "' has flags 0x" + Integer.toHexString(flags) + " (encrypted or another feature not read)");
            if (method != 0 && method != 8) throw fail(source, "entry '" + name + "' is compressed with method " + method + "; stored (0) and deflate (8) are read");
            if (diskStart != 0) throw fail(source, "entry '" + name + "' starts on another disk");
            long[] z64 = zip64(bb, at + CENTRAL_SIZE + nameLen, extraLen, size == MARK32, csize == MARK32, offset == MARK32, source, name);
            if (size == MARK32) size = z64[0];
            if (csize == MARK32) csize = z64[1];
            if (offset == MARK32) offset = z64[2];
            Entry e = new Entry(name, flags, method, crc, csize, size, offset, rawName);
            if (byName.put(name, e) != null) throw fail(source, "two entries named '" + name + "'");
            entries.add(e);
            at = next;
        }
        if (at != cdEnd) throw fail(source, "the central directory holds " + (cdEnd - at) + " bytes after its " + total + " entries");
        List<Entry> byOffset = new ArrayList<>(entries);
        byOffset.sort(Comparator.comparingLong(Entry::offset));
        long expect = 0, sum = 0;
        Map<Entry, byte[]> data = new LinkedHashMap<>();
        for (Entry e : byOffset) {
            if (e.offset != expect) {
                throw fail(source, "entry '" + e.name + "' starts at byte " + e.offset + ", " + (e.offset < expect ? "inside the entry before it" : "after a gap from byte " + expect));
            }
            if (e.size > maxTotal - sum) throw fail(source, "entry '" + e.name + "' is " + e.size + " bytes, past the " + maxTotal + "-byte limit");
            if (e.method == 0 && e.csize != e.size) throw fail(source, "stored entry '" + e.name + "' has compressed size " + e.csize + " and size " + e.size);
            if (e.method == 8 && e.size > Math.max(e.csize, 1) * MAX_RATIO) throw fail(source, "entry '" + e.name + "' claims " + e.size + " bytes from " + e.csize + " compressed");
            int dataAt = local(bb, e, cdOffset, source);
            if (dataAt + e.csize > cdOffset) throw fail(source, "entry '" + e.name + "' runs into the central directory");
            byte[] out = e.method == 0 ? java.util.Arrays.copyOfRange(b, dataAt, (int) (dataAt + e.size)) : inflate(b, dataAt, e, source);
            CRC32 crc = new CRC32();
            crc.update(out);
            if (crc.getValue() != e.crc) throw fail(source, "entry '" + e.name + "': crc32 " + Long.toHexString(crc.getValue()) + " of its data, " + Long.toHexString(e.crc) + " in the directory");
            expect = dataAt + e.csize;
            if ((e.flags & 0x0008) != 0) expect = descriptor(bb, (int) expect, e, cdOffset, source);
            sum += e.size;
            data.put(e, out);
        }
        if (expect != cdOffset) throw fail(source, "bytes " + expect + ".." + cdOffset + " belong to no entry");
        Map<String, byte[]> out = new LinkedHashMap<>();
        for (Entry e : entries) out.put(e.name, data.get(e));
        return out;
    }

    /**
     * Python's zipfile: the last end-record signature within the final 64 KiB + 22 bytes; one too close to the end
     * for a whole record makes the file no zip to it, and so here.
     */
    private static int findEnd(byte[] b) {
        ByteBuffer bb = le(b);
        for (int i = b.length - 4; i >= Math.max(0, b.length - END_SIZE - 65535); i--) {
            if (bb.getInt(i) == END) return i <= b.length - END_SIZE ? i : -1;
        }
        return -1;
    }

    private static boolean agrees(long plain, long wide, long mark) {
        return plain == wide || plain == mark;
    }

    /** The zip64 extra field's values for the fields marked 0xffffffff, in the order the format gives: size, compressed size, offset. */
    private static long[] zip64(ByteBuffer bb, int at, int len, boolean size, boolean csize, boolean offset, String source, String name) {
        long[] v = new long[3];
        int need = (size ? 8 : 0) + (csize ? 8 : 0) + (offset ? 8 : 0);
        boolean seen = false;
        for (int p = at, end = at + len; p < end; ) {
            if (p + 4 > end) throw fail(source, "entry '" + name + "': a truncated extra field");
            int id = bb.getShort(p) & 0xffff, n = bb.getShort(p + 2) & 0xffff;
            if (p + 4 + n > end) throw fail(source, "entry '" + name + "': extra field 0x" + Integer.toHexString(id) + " runs past the extra data");
            if (id == 1) {
                if (seen) throw fail(source, "entry '" + name + "': two zip64 extra fields");
                seen = true;
                if (n != need) throw fail(source, "entry '" + name + "': a zip64 extra field of " + n + " bytes where its marked sizes need " + need);
                int q = p + 4;
                if (size) v[0] = positive(bb.getLong(q), source, name);
                if (size) q += 8;
                if (csize) v[1] = positive(bb.getLong(q), source, name);
                if (csize) q += 8;
                if (offset) v[2] = positive(bb.getLong(q), source, name);
            }
            p += 4 + n;
        }
        if (need > 0 && !seen) throw fail(source, "entry '" + name + "': sizes marked zip64 without a zip64 extra field");
        return v;
    }

    private static long positive(long v, String source, String name) {
        if (v < 0 || v > Integer.MAX_VALUE) throw fail(source, "entry '" + name + "': a zip64 value " + Long.toUnsignedString(v) + " past what is read");
        return v;
    }

    /** Checks the local header of {@code e} against it; returns where its data starts. */
    private static int local(ByteBuffer bb, Entry e, long limit, String source) {
        int at = (int) e.offset;
        if (at + LOCAL_SIZE > limit || bb.getInt(at) != LOCAL) throw fail(source, "entry '" + e.name + "': no local header at byte " + at);
        int flags = bb.getShort(at + 6) & 0xffff, method = bb.getShort(at + 8) & 0xffff;
        long crc = bb.getInt(at + 14) & MARK32, csize = bb.getInt(at + 18) & MARK32, size = bb.getInt(at + 22) & MARK32;
        int nameLen = bb.getShort(at + 26) & 0xffff, extraLen = bb.getShort(at + 28) & 0xffff;
        int dataAt = at + LOCAL_SIZE + nameLen + extraLen;
        if (dataAt > limit) throw fail(source, "entry '" + e.name + "': its local header runs into the central directory");
        byte[] rawName = new byte[nameLen];
        bb.get(at + LOCAL_SIZE, rawName);
        if (!java.util.Arrays.equals(rawName, e.rawName)) throw fail(source, "entry '" + e.name + "': the local header names it '" + printable(rawName) + "'");
        if (flags != e.flags) throw fail(source, "entry '" + e.name + "': local flags 0x" + Integer.toHexString(flags) + ", central 0x" + Integer.toHexString(e.flags));
        if (method != e.method) throw fail(source, "entry '" + e.name + "': local method " + method + ", central " + e.method);
        if ((e.flags & 0x0008) != 0) {
            if (crc != 0 && crc != e.crc || csize != 0 && csize != e.csize || size != 0 && size != e.size) {
                throw fail(source, "entry '" + e.name + "': its local header and central entry disagree on crc or sizes");
            }
            return dataAt;
        }
        if (size == MARK32 && csize == MARK32) {
            long[] z = localZip64(bb, at + LOCAL_SIZE + nameLen, extraLen, source, e.name);
            size = z[0];
            csize = z[1];
        }
        if (crc != e.crc || csize != e.csize || size != e.size) {
            throw fail(source, "entry '" + e.name + "': local header crc " + Long.toHexString(crc) + ", sizes " + csize + "/" + size + "; central " + Long.toHexString(e.crc)
                    + ", " + e.csize + "/" + e.size);
        }
        return dataAt;
    }

    /** A local zip64 extra field: both sizes, size first. */
    private static long[] localZip64(ByteBuffer bb, int at, int len, String source, String name) {
        long[] v = null;
        for (int p = at, end = at + len; p < end; ) {
            if (p + 4 > end) throw fail(source, "entry '" + name + "': a truncated local extra field");
            int id = bb.getShort(p) & 0xffff, n = bb.getShort(p + 2) & 0xffff;
            if (p + 4 + n > end) throw fail(source, "entry '" + name + "': local extra field 0x" + Integer.toHexString(id) + " runs past the extra data");
            if (id == 1) {
                if (v != null || n < 16) throw fail(source, "entry '" + name + "': a bad local zip64 extra field");
                v = new long[] {bb.getLong(p + 4), bb.getLong(p + 12)};
            }
            p += 4 + n;
        }
        if (v == null) throw fail(source, "entry '" + name + "': local sizes marked zip64 without a zip64 extra field");
        return v;
    }

    /** A data descriptor after the data (signature required; 8-byte sizes only when the sizes need them). */
    private static long descriptor(ByteBuffer bb, int at, Entry e, long limit, String source) {
        boolean wide = e.size >= MARK32 || e.csize >= MARK32;
        int len = wide ? 24 : 16;
        if (at + len > limit || bb.getInt(at) != DESCRIPTOR) throw fail(source, "entry '" + e.name + "': no data descriptor after its data");
        long crc = bb.getInt(at + 4) & MARK32;
        long csize = wide ? bb.getLong(at + 8) : bb.getInt(at + 8) & MARK32, size = wide ? bb.getLong(at + 16) : bb.getInt(at + 12) & MARK32;
        if (crc != e.crc || csize != e.csize || size != e.size) throw fail(source, "entry '" + e.name + "': its data descriptor and central entry disagree");
        return at + len;
    }

    private static byte[] inflate(byte[] b, int at, Entry e, String source) {
        Inflater inf = new Inflater(true);
        try {
            inf.setInput(b, at, (int) e.csize);
            byte[] out = new byte[(int) e.size];
            int n = 0;
            while (n < out.length && !inf.finished()) {
                int k = inf.inflate(out, n, out.length - n);
                if (k == 0 && (inf.needsInput() || inf.needsDictionary())) break;
                n += k;
            }
            byte[] probe = new byte[1];
            if (n == out.length && !inf.finished() && inf.inflate(probe) > 0) throw fail(source, "entry '" + e.name + "' inflates past its size " + e.size);
            if (n != out.length || !inf.finished()) throw fail(source, "entry '" + e.name + "': its deflate stream gives " + n + " bytes" + (inf.finished() ? "" : " and does not end") + ", the directory says " + e.size);
            if (inf.getRemaining() != 0) throw fail(source, "entry '" + e.name + "': " + inf.getRemaining() + " compressed bytes after its deflate stream ends");
            return out;
        } catch (DataFormatException x) {
            throw fail(source, "entry '" + e.name + "': a corrupt deflate stream (" + x.getMessage() + ")");
        } finally {
            inf.end();
        }
    }

    private static String name(byte[] raw, String source, String where) {
        if (raw.length == 0) throw fail(source, where + " has an empty name");
        for (byte c : raw) if (c < 0x20 || c > 0x7e) throw fail(source, where + " has a name that is not printable ASCII: '" + printable(raw) + "'");
        return new String(raw, StandardCharsets.US_ASCII);
    }

    private static String printable(byte[] raw) {
        StringBuilder s = new StringBuilder();
        for (byte c : raw) s.append(c >= 0x20 && c <= 0x7e ? String.valueOf((char) c) : String.format("\\x%02x", c & 0xff));
        return s.toString();
    }

    private static ByteBuffer le(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static ZipFormatException fail(String source, String why) {
        return new ZipFormatException(source + ": " + why);
    }
}
