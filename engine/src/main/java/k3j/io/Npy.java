package k3j.io;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One NumPy {@code .npy} array (format versions 1 and 2), its untrusted header checked before anything is sized by
 * it: little-endian float32 ({@code '<f4'}) or int32 ({@code '<i4'}), C order, a shape whose element count matches
 * the data exactly (no byte short, none left over). Anything else is refused with {@link NpyException}.
 *
 * @param descr  "&lt;f4" or "&lt;i4"
 * @param shape  the dimensions (empty: a scalar)
 * @param data   the array's bytes, little-endian
 */
public record Npy(String descr, long[] shape, ByteBuffer data) {
    /** A file or entry that is not an .npy this reader accepts. */
    public static final class NpyException extends RuntimeException {
        public NpyException(String message) {
            super(message);
        }
    }

    private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};

    public static boolean hasMagic(byte[] b) {
        return b.length >= MAGIC.length && Arrays.equals(b, 0, MAGIC.length, MAGIC, 0, MAGIC.length);
    }

    /** Parses {@code b} (a whole .npy); {@code source} names it in errors. */
    public static Npy parse(byte[] b, String source) {
        if (!hasMagic(b)) throw new NpyException(source + ": no NumPy magic");
        if (b.length < 10) throw new NpyException(source + ": truncated .npy header");
        int major = b[6] & 0xff;
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        long headerLen;
        int start;
        if (major == 1) {
            headerLen = bb.getShort(8) & 0xffff;
            start = 10;
        } else if (major == 2) {
            if (b.length < 12) throw new NpyException(source + ": truncated .npy header");
            headerLen = bb.getInt(8) & 0xffffffffL;
            start = 12;
        } else {
            throw new NpyException(source + ": .npy format version " + major + "." + (b[7] & 0xff) + " (only 1.x and 2.x are read)");
        }
        if (start + headerLen > b.length) throw new NpyException(source + ": .npy header runs past the end of the file");
        String h = new String(b, start, (int) headerLen, major == 1 ? StandardCharsets.ISO_8859_1 : StandardCharsets.UTF_8);
        String descr = field(h, "descr", "'([^']*)'", source);
        if (!descr.equals("<f4") && !descr.equals("<i4")) {
            throw new NpyException(source + ": dtype '" + descr + "'; only little-endian float32 ('<f4') and int32 ('<i4') are read");
        }
        if (!field(h, "fortran_order", "(True|False)", source).equals("False")) throw new NpyException(source + ": Fortran order; only C order is read");
        String[] dims = field(h, "shape", "\\(([^)]*)\\)", source).replace(" ", "").split(",");
        long[] shape = Arrays.stream(dims).filter(d -> !d.isEmpty()).mapToLong(d -> {
            try {
                long v = Long.parseLong(d);
                if (v < 0) throw new NpyException(source + ": .npy shape entry " + d + " is negative");
                return v;
            } catch (NumberFormatException e) {
                throw new NpyException(source + ": .npy shape entry '" + d + "'");
            }
        }).toArray();
        long need = 4;
        for (long d : shape) {
            if (d != 0 && need > Long.MAX_VALUE / d) throw new NpyException(source + ": .npy shape " + Arrays.toString(shape) + " overflows");
            need *= d;
        }
        long data = b.length - start - headerLen;
        if (data != need) throw new NpyException(source + ": .npy data is " + data + " bytes, shape " + Arrays.toString(shape) + " needs " + need);
        return new Npy(descr, shape, ByteBuffer.wrap(b, (int) (start + headerLen), (int) need).slice().order(ByteOrder.LITTLE_ENDIAN));
    }

    private static String field(String header, String key, String valuePattern, String source) {
        Matcher m = Pattern.compile("'" + key + "'\\s*:\\s*" + valuePattern).matcher(header);
        if (!m.find()) throw new NpyException(source + ": .npy header has no '" + key + "': " + header.strip());
        return m.group(1);
    }

    /** The data's bytes as a new array. */
    public byte[] bytes() {
        byte[] out = new byte[data.remaining()];
        data.duplicate().get(out);
        return out;
    }
}
