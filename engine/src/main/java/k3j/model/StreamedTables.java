package k3j.model;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicLong;
import k3j.io.CheckpointException;
import k3j.io.CheckpointException.Rule;
import k3j.io.DType;
import k3j.io.TensorInfo;
import k3j.kernels.Embedding;
import k3j.kernels.MatVec;
import k3j.kernels.Matrix;
import k3j.kernels.WeightType;
import k3j.kernels.Workers;

/**
 * The embedding and LM-head tables read from the checkpoint on demand instead of held (the ultra preset,
 * docs/semantics.md §7.2): one embedding row per token, and the LM head in chunks of rows through ONE buffer of at
 * most {@code chunkBytes}. Reads go through the page cache, which the kernel may drop; nothing of the tables
 * stays in the process. Same bits as the resident tables: an embedding row is widened exactly either way, and
 * every logit is its own row's dot product in the contract's order whatever rows share the call
 * (docs/fp-contract.md §2, dense matvec), so a chunk boundary changes nothing. One forward at a time: the chunk
 * buffer is shared.
 */
public final class StreamedTables implements AutoCloseable {
    /** The chunk the ultra preset plans (64 MiB: 4681 rows of the released 7168-wide LM head). */
    public static final long DEFAULT_CHUNK_BYTES = 64L << 20;

    private final Table embed, lmHead;
    private final byte[] chunk;
    private final int chunkRows;
    private final AtomicLong embedRead = new AtomicLong(), headRead = new AtomicLong();

    private StreamedTables(Table embed, Table lmHead, long chunkBytes) {
        this.embed = embed;
        this.lmHead = lmHead;
        long rowBytes = lmHead.rowBytes();
        if (chunkBytes < rowBytes) {
            throw new IllegalArgumentException("the LM-head chunk of " + chunkBytes + " bytes holds no row of " + rowBytes + " bytes");
        }
        this.chunkRows = Math.toIntExact(k3j.plan.MemoryPlan.streamedChunk(chunkBytes, lmHead.rows, rowBytes) / rowBytes);   // what the plan counts
        this.chunk = new byte[Math.toIntExact(chunkRows * rowBytes)];
    }

    /** The bound model's {@code embed_tokens} and {@code lm_head}, streamed through a chunk of at most {@code chunkBytes}. */
    public static StreamedTables open(ModelBinding b, long chunkBytes) {
        Table embed = Table.open(b.tensor(Binder.EMBED).info()), head = null;
        try {
            head = Table.open(b.tensor(Binder.LM_HEAD).info());
            return new StreamedTables(embed, head, chunkBytes);
        } catch (RuntimeException e) {
            embed.close();
            if (head != null) head.close();
            throw e;
        }
    }

    /** LM-head rows per chunk. */
    public int chunkRows() {
        return chunkRows;
    }

    /** Bytes of the one chunk buffer. */
    public long chunkBytes() {
        return chunk.length;
    }

    public long embeddingBytesRead() {
        return embedRead.get();
    }

    public long lmHeadBytesRead() {
        return headRead.get();
    }

    /** Row {@code id} of the embedding, widened into dst[off .. off + E). */
    public void embedRow(float[] dst, int off, int id) {
        if (id < 0 || id >= embed.rows) throw new IllegalArgumentException("token id " + id + " outside [0, " + embed.rows + ")");
        byte[] row = new byte[Math.toIntExact(embed.rowBytes())];
        embed.read(row, id, 1);
        embedRead.addAndGet(row.length);
        Embedding.row(dst, off, new Matrix(MemorySegment.ofArray(row), embed.type, 1, embed.cols), 0);
    }

    /** logits[t][V] = lm_head x[t] for {@code tokens} rows of x, chunk by chunk. */
    public void lmHead(Workers workers, float[] logits, float[] x, int tokens) {
        int v = lmHead.rows, cols = lmHead.cols;
        float[] y = new float[tokens * chunkRows];
        for (int lo = 0; lo < v; lo += chunkRows) {
            int n = Math.min(chunkRows, v - lo);
            lmHead.read(chunk, lo, n);
            headRead.addAndGet(n * lmHead.rowBytes());
            Matrix m = new Matrix(MemorySegment.ofArray(chunk).asSlice(0, n * lmHead.rowBytes()), lmHead.type, n, cols);
            MatVec.matmul(workers, y, x, tokens, m);
            for (int t = 0; t < tokens; t++) System.arraycopy(y, t * n, logits, t * v + lo, n);
        }
    }

    @Override
    public void close() {
        embed.close();
        lmHead.close();
    }

    /** One [rows][cols] table of a shard, read by rows. */
    private record Table(TensorInfo info, FileChannel channel, WeightType type, int rows, int cols) {
        static Table open(TensorInfo t) {
            WeightType type = switch (t.dtype()) {
                case BF16 -> WeightType.BF16;
                case F32 -> WeightType.F32;
                default -> throw new CheckpointException(Rule.IO, t.file(), t.name(),
                        "the ultra preset streams BF16 or F32 tables; this one is " + t.dtype() + " (run without --preset ultra)");
            };
            try {
                FileChannel ch = k3j.io.SafeFiles.open(t.file(), "a checkpoint shard");
                return new Table(t, ch, type, Math.toIntExact(t.shape()[0]), Math.toIntExact(t.shape()[1]));
            } catch (IOException e) {
                throw new CheckpointException(Rule.IO, t.file(), t.name(), "cannot open: " + e, e);
            }
        }

        long rowBytes() {
            return (long) cols * type.bytes;
        }

        /** Rows [first, first + n) into dst[0 ..). */
        void read(byte[] dst, int first, int n) {
            ByteBuffer bb = ByteBuffer.wrap(dst, 0, Math.toIntExact(n * rowBytes()));
            long at = info.offset() + first * rowBytes();
            try {
                while (bb.hasRemaining()) {
                    int got = channel.read(bb, at + bb.position());
                    if (got < 0) {
                        throw new CheckpointException(Rule.SHORT_READ, info.file(), info.name(),
                                "short read: file ended after " + bb.position() + " of " + bb.limit() + " bytes of rows " + first + ".." + (first + n - 1));
                    }
                }
            } catch (IOException e) {
                throw new CheckpointException(Rule.IO, info.file(), info.name(), "read failed: " + e, e);
            }
        }

        void close() {
            try {
                channel.close();
            } catch (IOException ignored) {
                // read-only: nothing to flush
            }
        }
    }
}
