package k3j.state;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.trunk.DataBinding;
import k3j.kernels.Layers;
import k3j.kernels.MlaKv;
import k3j.model.DecodeState;

/**
 * A conversation state file (docs/formats.md §14): the ids absorbed so far and everything incremental decoding
 * carries — every KDA layer's recurrent state and three conv histories, every MLA layer's cached keys, rope
 * keys and values for those positions — behind a header that binds it to the architecture, the checkpoint's
 * layout and data ({@link Binding}) and (for a chat) the conversation's history, and ahead of a SHA-256 of every
 * byte before it. Loading anything else is refused: another binding, a flipped bit (the checksum), a NaN or an
 * infinity in the payload (no decode step produces one). Saving is atomic.
 */
public final class StateFile {
    static final byte[] MAGIC = {'K', '3', 'J', 'S', 'T', 'A', 'T', 'E'};
    /** 2: trunk digest, shard identities and the trailing SHA-256 (1 bound by headers alone, without a checksum). */
    static final int VERSION = 2;
    private static final int IDENTITY_LONGS = 5;
    private static final int CHUNK = 1 << 20;   // floats per write

    /** What a loaded file held besides the caches it filled in: every id so far (the state absorbed the first cached()). */
    public record Loaded(int[] ids, byte[] conversation) {}

    /**
     * The number of ids a state file holds, read from its header without loading it (to size the state it is
     * loaded into): refused when the file is too short to hold them or when they exceed {@code limit}, the
     * positions the run may still hold ({@code what} says why), before anything is sized from it.
     */
    public static int idCount(Path file, int limit, String what) {
        try (FileChannel ch = k3j.io.SafeFiles.open(file, "a state file (--load-state)")) {
            In in = new In(ch, file);
            if (!Arrays.equals(MAGIC, in.bytes(MAGIC.length))) throw new StateException(file + ": not a k3j state file (bad magic)");
            int version = in.ints(1)[0];
            if (version != VERSION) throw new StateException(file + ": state file version " + version + ", this build reads " + VERSION);
            int nArch = in.ints(1)[0];
            in.ints(nArch);
            in.bytes(32);
            in.identities(in.ints(1)[0]);
            in.bytes(64);
            int n = in.ints(1)[0];
            if (n < 1 || 4L * n > ch.size() - ch.position()) throw new StateException(file + ": the header declares " + n + " ids, but the file holds "
                    + (ch.size() - ch.position()) + " bytes after it: not a whole state file (truncated or damaged)");
            if (n > limit) throw new StateException(file + ": holds " + n + " ids, more than the " + Math.max(0, limit) + " positions " + what
                    + ": refused before any state is sized from it (a shorter --gen, or a state of this model's limits)");
            return n;
        } catch (IOException e) {
            throw new StateException(file + ": cannot read the state: " + k3j.io.SafeFiles.why(e), e);
        }
    }

    private StateFile() {}

    /**
     * @param conversation sha256 of the chat history this state follows (32 bytes), or 32 zero bytes outside a chat
     * @param ids          every id so far: the state absorbed the first st.cached(), the rest are still to be fed
     */
    public static void save(Path file, Binding binding, byte[] conversation, int[] ids, DecodeState st) {
        if (ids.length < st.cached()) throw new IllegalArgumentException(ids.length + " ids for a state of " + st.cached() + " positions");
        try {
            k3j.io.AtomicWrite.replace(file, ch -> {
                Out o = new Out(ch);
                o.bytes(MAGIC);
                o.ints(new int[] {VERSION, binding.architecture().length});
                o.ints(binding.architecture());
                o.bytes(binding.checkpoint());
                List<DataBinding.FileIdentity> ids0 = binding.identities();
                o.ints(new int[] {ids0.size()});
                for (DataBinding.FileIdentity id : ids0) o.longs(id.device(), id.inode(), id.size(), id.mtimeNanos(), id.ctimeNanos());
                o.bytes(binding.data());
                o.bytes(conversation);
                o.ints(new int[] {ids.length, st.cached()});
                o.ints(ids);
                for (int l = 0; l < st.layers(); l++) {
                    Layers.KdaState k = st.kda(l);
                    if (k != null) {
                        o.floats(k.recurrent(), k.recurrent().length);
                        o.floats(k.qConv(), k.qConv().length);
                        o.floats(k.kConv(), k.kConv().length);
                        o.floats(k.vConv(), k.vConv().length);
                    } else {
                        mla(st.mla(l), st.cached(), o, null);
                    }
                }
                o.flush();
                o.trailer();
            });
        } catch (IOException e) {
            throw new StateException(file + ": cannot save the state (--save-state): " + k3j.io.SafeFiles.why(e), e);
        }
    }

    /** Fills the fresh state {@code into} from {@code file} after checking it belongs to {@code binding}. */
    public static Loaded load(Path file, Binding binding, DecodeState into) {
        try (FileChannel ch = k3j.io.SafeFiles.open(file, "a state file (--load-state)")) {
            In in = new In(ch, file);
            if (!Arrays.equals(MAGIC, in.bytes(MAGIC.length))) throw new StateException(file + ": not a k3j state file (bad magic)");
            int version = in.ints(1)[0];
            if (version != VERSION) throw new StateException(file + ": state file version " + version + ", this build reads " + VERSION);
            int nArch = in.ints(1)[0];
            if (nArch != binding.architecture().length) throw new StateException(file + ": a header of " + nArch + " architecture fields, expected " + binding.architecture().length);
            String why = binding.layoutMismatch(in.ints(nArch), in.bytes(32));
            if (why != null) throw new StateException(file + ": refusing the state: " + why);
            List<DataBinding.FileIdentity> shards = in.identities(in.ints(1)[0]);
            why = binding.dataMismatch(shards, in.bytes(32));
            if (why != null) throw new StateException(file + ": refusing the state: " + why);
            byte[] conversation = in.bytes(32);
            int[] counts = in.ints(2);
            int n = counts[1];
            if (n < 1 || n > counts[0]) throw new StateException(file + ": " + n + " absorbed positions of " + counts[0] + " ids");
            if (n > into.capacity()) throw new StateException(file + ": " + n + " positions, this run has room for " + into.capacity());
            int[] ids = in.ints(counts[0]);
            for (int l = 0; l < into.layers(); l++) {
                Layers.KdaState k = into.kda(l);
                if (k != null) {
                    in.floats(k.recurrent());
                    in.floats(k.qConv());
                    in.floats(k.kConv());
                    in.floats(k.vConv());
                } else {
                    mla(into.mla(l), n, null, in);
                }
            }
            in.trailer();
            if (ch.position() != ch.size()) throw new StateException(file + ": " + (ch.size() - ch.position()) + " bytes after the checksum");
            into.restored(n);
            return new Loaded(ids, conversation);
        } catch (IOException e) {
            throw new StateException(file + ": cannot read the state: " + k3j.io.SafeFiles.why(e), e);
        }
    }

    /**
     * One MLA layer's positions 0..n−1, written to {@code o} or read from {@code in}, in chunks of positions: the
     * chunk's kv rows ({@link MlaKv#put}'s layout), then its rope keys.
     */
    private static void mla(MlaKv kv, int n, Out o, In in) throws IOException {
        int w = kv.kvWidth(), r = kv.ropeWidth(), per = Math.max(1, CHUNK / Math.max(1, w + r));
        float[] kvBuf = new float[per * w], ropeBuf = new float[per * r];
        for (int s0 = 0; s0 < n; s0 += per) {
            int m = Math.min(per, n - s0);
            if (o != null) {
                for (int s = 0; s < m; s++) kv.get(s0 + s, kvBuf, s * w, ropeBuf, s * r);
                o.floats(kvBuf, m * w);
                o.floats(ropeBuf, m * r);
            } else {
                in.floats(kvBuf, m * w);
                in.floats(ropeBuf, m * r);
                for (int s = 0; s < m; s++) kv.put(s0 + s, kvBuf, s * w, ropeBuf, s * r);
            }
        }
    }

    /** Little-endian writes through one buffer. */
    private static final class Out {
        private final FileChannel ch;
        private final ByteBuffer buf = ByteBuffer.allocateDirect(1 << 22).order(ByteOrder.LITTLE_ENDIAN);

        Out(FileChannel ch) {
            this.ch = ch;
        }

        void room(int bytes) throws IOException {
            if (buf.remaining() < bytes) flush();
        }

        private final MessageDigest md = sha256();

        void flush() throws IOException {
            buf.flip();
            md.update(buf.duplicate());
            while (buf.hasRemaining()) ch.write(buf);
            buf.clear();
        }

        void longs(long... v) throws IOException {
            for (long x : v) {
                room(8);
                buf.putLong(x);
            }
        }

        /** The SHA-256 of every byte written before it (call after the last flush). */
        void trailer() throws IOException {
            ByteBuffer t = ByteBuffer.wrap(md.digest());
            while (t.hasRemaining()) ch.write(t);
        }

        void bytes(byte[] b) throws IOException {
            room(b.length);
            buf.put(b);
        }

        void ints(int[] v) throws IOException {
            for (int x : v) {
                room(4);
                buf.putInt(x);
            }
        }

        void floats(float[] v, int n) throws IOException {
            for (int i = 0; i < n; ) {
                room(4);
                int m = Math.min(n - i, buf.remaining() / 4);
                buf.asFloatBuffer().put(v, i, m);
                buf.position(buf.position() + 4 * m);
                i += m;
            }
        }
    }

    /** Little-endian reads that refuse a short file. */
    private static final class In {
        private final FileChannel ch;
        private final Path file;

        In(FileChannel ch, Path file) {
            this.ch = ch;
            this.file = file;
        }

        private final MessageDigest md = sha256();

        private ByteBuffer read(int bytes) throws IOException {
            ByteBuffer b = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
            while (b.hasRemaining()) if (ch.read(b) < 0) throw new StateException(file + ": truncated (ends at byte " + ch.position() + ")");
            b.flip();
            md.update(b.duplicate());
            return b;
        }

        List<DataBinding.FileIdentity> identities(int n) throws IOException {
            if (n < 0 || n > 1 << 16) throw new StateException(file + ": implausible shard count " + n + " in the header");
            ByteBuffer b = read(8 * IDENTITY_LONGS * n);
            List<DataBinding.FileIdentity> out = new ArrayList<>(n);
            for (int i = 0; i < n; i++) out.add(new DataBinding.FileIdentity(b.getLong(), b.getLong(), b.getLong(), b.getLong(), b.getLong()));
            return out;
        }

        /** Reads the trailing SHA-256 and refuses the file when it is not the digest of every byte before it. */
        void trailer() throws IOException {
            byte[] want = md.digest();
            ByteBuffer b = ByteBuffer.allocate(want.length);
            while (b.hasRemaining()) if (ch.read(b) < 0) throw new StateException(file + ": truncated (no checksum at the end)");
            if (!java.util.Arrays.equals(want, b.array())) {
                throw new StateException(file + ": the checksum does not match its contents (a flipped bit, a partial copy or an edit): refusing the state");
            }
        }

        byte[] bytes(int n) throws IOException {
            byte[] out = new byte[n];
            read(n).get(out);
            return out;
        }

        int[] ints(int n) throws IOException {
            if (n < 0 || 4L * n > ch.size() - ch.position()) {
                throw new StateException(file + ": the header declares " + n + " values, but " + (ch.size() - ch.position()) + " bytes follow: truncated or damaged");
            }
            int[] out = new int[n];
            read(4 * n).asIntBuffer().get(out);
            return out;
        }

        void floats(float[] v) throws IOException {
            floats(v, v.length);
        }

        void floats(float[] v, int n) throws IOException {
            for (int i = 0; i < n; i += CHUNK) {
                int m = Math.min(CHUNK, n - i);
                read(4 * m).asFloatBuffer().get(v, i, m);
                for (int j = i; j < i + m; j++) {
                    if (!Float.isFinite(v[j])) {
                        throw new StateException(file + ": holds " + v[j] + " at byte " + (ch.position() - 4L * (i + m - j))
                                + "; no decode step produces a non-finite state: refusing it");
                    }
                }
            }
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
