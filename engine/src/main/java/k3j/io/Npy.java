package k3j.io;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One NumPy {@code .npy} array, read as numpy's own reader reads it or refused (docs/formats.md, "npy and npz").
 * Format versions 1.0, 2.0 and 3.0 only; the header is the Python dict literal numpy writes, parsed here as a
 * strict subset of Python's literal syntax: exactly the keys {@code descr}, {@code fortran_order} and {@code shape},
 * each once; descr {@code '<f4'} or {@code '<i4'}; fortran_order {@code False}; shape a tuple of decimal integers.
 * Whatever numpy would read another way (a key given twice: numpy takes the last; an escape, a comment, a hex or
 * {@code True} dimension, a big-endian or Fortran-order array) or refuse (an extra key, a missing one, another
 * version) is refused with {@link NpyException}. The data must be exactly the shape's bytes: none short, none after.
 *
 * @param descr  "&lt;f4" or "&lt;i4"
 * @param shape  the dimensions (empty: a scalar)
 * @param data   the array's bytes, little-endian, C order
 */
public record Npy(String descr, long[] shape, ByteBuffer data) {
    /** A file or entry that is not an .npy this reader accepts. */
    public static final class NpyException extends RuntimeException {
        public NpyException(String message) {
            super(message);
        }
    }

    private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
    /** numpy refuses a header longer than this many characters (its max_header_size default). */
    static final int MAX_HEADER = 10000;
    private static final List<String> KEYS = List.of("descr", "fortran_order", "shape");

    public static boolean hasMagic(byte[] b) {
        return b.length >= MAGIC.length && Arrays.equals(b, 0, MAGIC.length, MAGIC, 0, MAGIC.length);
    }

    /** Parses {@code b} (a whole .npy); {@code source} names it in errors. */
    public static Npy parse(byte[] b, String source) {
        if (!hasMagic(b)) throw new NpyException(source + ": no NumPy magic (\\x93NUMPY)");
        if (b.length < 8) throw new NpyException(source + ": truncated .npy header");
        int major = b[6] & 0xff, minor = b[7] & 0xff;
        if (minor != 0 || major < 1 || major > 3) {
            throw new NpyException(source + ": .npy format version " + major + "." + minor + " (numpy reads 1.0, 2.0 and 3.0 only)");
        }
        int start = major == 1 ? 10 : 12;
        if (b.length < start) throw new NpyException(source + ": truncated .npy header");
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        long headerLen = major == 1 ? bb.getShort(8) & 0xffff : bb.getInt(8) & 0xffffffffL;
        if (headerLen > MAX_HEADER) throw new NpyException(source + ": .npy header of " + headerLen + " bytes, more than numpy's limit of " + MAX_HEADER);
        if (start + headerLen > b.length) throw new NpyException(source + ": .npy header runs past the end of the file");
        Map<String, Object> d = new HeaderParser(b, start, (int) (start + headerLen), source).dict();
        if (!d.keySet().equals(new java.util.HashSet<>(KEYS))) {
            throw new NpyException(source + ": .npy header keys " + d.keySet() + "; numpy reads exactly 'descr', 'fortran_order' and 'shape'");
        }
        if (!(d.get("descr") instanceof String descr) || !(descr.equals("<f4") || descr.equals("<i4"))) {
            throw new NpyException(source + ": dtype " + HeaderParser.show(d.get("descr")) + "; only little-endian float32 ('<f4') and int32 ('<i4') are read");
        }
        if (!Boolean.FALSE.equals(d.get("fortran_order"))) {
            throw new NpyException(source + ": fortran_order " + HeaderParser.show(d.get("fortran_order")) + (Boolean.TRUE.equals(d.get("fortran_order")) ? ": Fortran order" : "") + "; only C order (False) is read");
        }
        if (!(d.get("shape") instanceof long[] shape)) throw new NpyException(source + ": .npy shape " + HeaderParser.show(d.get("shape")) + " is not a tuple of integers");
        long need = 4;
        for (long dim : shape) {
            if (dim != 0 && need > Long.MAX_VALUE / dim) throw new NpyException(source + ": .npy shape " + Arrays.toString(shape) + " overflows");
            need *= dim;
        }
        long data = b.length - start - headerLen;
        if (data != need) throw new NpyException(source + ": .npy data is " + data + " bytes, shape " + Arrays.toString(shape) + " needs " + need);
        return new Npy(descr, shape, ByteBuffer.wrap(b, (int) (start + headerLen), (int) need).slice().order(ByteOrder.LITTLE_ENDIAN));
    }

    /** The data's bytes as a new array. */
    public byte[] bytes() {
        byte[] out = new byte[data.remaining()];
        data.duplicate().get(out);
        return out;
    }

    /**
     * The header dict: the subset of Python literal syntax numpy's writer uses, so that whatever this accepts Python's
     * {@code ast.literal_eval} reads to the same dict. Printable ASCII only; tokens separated by spaces; strings in
     * single or double quotes without a backslash; integers decimal without a leading zero; {@code True}/{@code False};
     * a tuple holds integers and has a comma (a parenthesised lone integer is an int in Python, not a tuple). After
     * the closing brace: spaces and one newline, nothing else.
     */
    private static final class HeaderParser {
        private final byte[] b;
        private final int end;
        private final String source;
        private int at;

        HeaderParser(byte[] b, int start, int end, String source) {
            this.b = b;
            this.at = start;
            this.end = end;
            this.source = source;
            for (int i = start; i < end; i++) {
                int c = b[i] & 0xff;
                if ((c < 0x20 || c > 0x7e) && !(c == '\n' && i == end - 1)) {
                    throw fail("byte 0x" + Integer.toHexString(c) + " at byte " + i + " (a header is printable ASCII ending in one newline)");
                }
            }
        }

        Map<String, Object> dict() {
            expect('{');
            Map<String, Object> d = new LinkedHashMap<>();
            while (true) {
                if (peek() == '}') break;
                String key = string();
                expect(':');
                Object value = value();
                if (d.put(key, value) != null) throw fail("key '" + key + "' given twice (numpy would take the last)");
                if (peek() == ',') {
                    at++;
                    continue;
                }
                if (peek() != '}') throw fail("expected ',' or '}' at byte " + at);
            }
            at++;
            while (at < end && b[at] == ' ') at++;
            if (at < end && b[at] == '\n') at++;
            if (at != end) throw fail("text after the dict's closing brace");
            return d;
        }

        private Object value() {
            int c = peek();
            if (c == '\'' || c == '"') return string();
            if (c == '(') return tuple();
            if (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') {
                int s = at;
                while (at < end && (Character.isLetterOrDigit(b[at]) || b[at] == '_')) at++;
                String name = new String(b, s, at - s, java.nio.charset.StandardCharsets.US_ASCII);
                if (name.equals("True")) return Boolean.TRUE;
                if (name.equals("False")) return Boolean.FALSE;
                throw fail("'" + name + "' is not a literal numpy's header holds");
            }
            throw fail("unexpected '" + (char) c + "' at byte " + at);
        }

        private long[] tuple() {
            expect('(');
            List<Long> dims = new ArrayList<>();
            boolean comma = false;
            while (peek() != ')') {
                dims.add(integer());
                comma = false;
                if (peek() == ',') {
                    at++;
                    comma = true;
                } else if (peek() != ')') {
                    throw fail("expected ',' or ')' in the shape");
                }
            }
            at++;
            if (dims.size() == 1 && !comma) throw fail("shape '(" + dims.get(0) + ")' is an integer in Python, not a tuple");
            return dims.stream().mapToLong(Long::longValue).toArray();
        }

        private long integer() {
            int s = at;
            while (at < end && b[at] >= '0' && b[at] <= '9') at++;
            if (at == s) throw fail("shape entry at byte " + s + " is not a decimal integer");
            if (at < end && (Character.isLetterOrDigit(b[at]) || b[at] == '_' || b[at] == '.')) throw fail("shape entry at byte " + s + " is not a plain decimal integer");
            String digits = new String(b, s, at - s, java.nio.charset.StandardCharsets.US_ASCII);
            if (digits.length() > 1 && digits.charAt(0) == '0') throw fail("shape entry '" + digits + "' has a leading zero");
            if (digits.length() > 18) throw fail("shape entry '" + digits + "' is too large");
            return Long.parseLong(digits);
        }

        private String string() {
            int q = peek();
            if (q != '\'' && q != '"') throw fail("expected a quoted key at byte " + at);
            int s = ++at;
            while (at < end && b[at] != q) {
                if (b[at] == '\\') throw fail("a backslash escape in a header string");
                at++;
            }
            if (at >= end) throw fail("unterminated string");
            String v = new String(b, s, at - s, java.nio.charset.StandardCharsets.US_ASCII);
            at++;
            return v;
        }

        private int peek() {
            while (at < end && b[at] == ' ') at++;
            if (at >= end) throw fail("the header ends inside the dict");
            return b[at] & 0xff;
        }

        private void expect(char c) {
            if (peek() != c) throw fail("expected '" + c + "' at byte " + at);
            at++;
        }

        private NpyException fail(String why) {
            return new NpyException(source + ": .npy header refused: " + why);
        }

        static String show(Object v) {
            return v instanceof long[] l ? Arrays.toString(l) : v instanceof String s ? "'" + s + "'" : String.valueOf(v);
        }
    }
}
