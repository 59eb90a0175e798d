package k3j.tokenizer;

import java.util.Arrays;

/**
 * Bytes decoded token by token, released only in whole UTF-8 sequences: a character split across two tokens
 * is held back until its last byte arrives. Bytes that can never become well-formed are released as they are.
 */
public final class Utf8Stream {
    private byte[] pending = new byte[0];

    /** The bytes that can be shown now; the tail of an unfinished sequence stays pending. */
    public byte[] push(byte[] more) {
        byte[] b = Arrays.copyOf(pending, pending.length + more.length);
        System.arraycopy(more, 0, b, pending.length, more.length);
        int i = 0;
        while (i < b.length) {
            int len = Utf8.wellFormed(b, i, b.length);
            if (len < 0) break;
            i += Math.max(len, 1);
        }
        pending = Arrays.copyOfRange(b, i, b.length);
        return Arrays.copyOf(b, i);
    }

    /** Whatever is still pending (an unfinished sequence at the end of the output). */
    public byte[] finish() {
        byte[] rest = pending;
        pending = new byte[0];
        return rest;
    }
}
