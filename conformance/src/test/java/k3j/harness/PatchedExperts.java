package k3j.harness;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertPart;
import k3j.cache.ExpertSource;
import k3j.cache.FileExpertReader;
import k3j.cache.ReadMode;
import k3j.cache.ResidentExpert;
import k3j.model.Model;

/**
 * An expert source over a model's checkpoint that serves its experts as stored (an expert cache of its own, in the
 * stored form: the forward repacks per call), except the one a {@link Patch} names, which it serves as a patched
 * COPY of its bytes (the checkpoint is never written). Plants thousands of small corruptions at the released
 * widths without a corrupted checkpoint on disk per corruption: the bytes the kernels see are the checkpoint's
 * with one byte, or one row, changed, as {@code k3 corrupt} would write them.
 */
public final class PatchedExperts implements ExpertSource, AutoCloseable {
    /** One change to one expert's bytes; {@code spec} in {@code k3 corrupt}'s notation. */
    public record Patch(int layer, int expert, String kind, String spec, java.util.function.Consumer<ResidentExpert> apply) {}

    private final FileExpertReader reader = new FileExpertReader(ReadMode.DIRECT, n -> {});
    private final ExpertCache real;
    private volatile Patch patch;

    /** Over {@code model}'s checkpoint, through a stored-form cache of {@code cacheBytes}. */
    public PatchedExperts(Model model, long cacheBytes) throws ExpertLoadException {
        this.real = new ExpertCache(model.experts(), reader, ExpertCache.Settings.of(cacheBytes, model.config().topK()), null);
    }

    @Override
    public void close() throws IOException {
        real.close();
        reader.close();
    }

    /** Serves {@code p}'s expert patched from now on (null: none). */
    public void plant(Patch p) {
        patch = p;
    }

    @Override
    public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
        ResidentExpert r = real.get(layer, expert);
        Patch p = patch;
        if (p == null || p.layer() != layer || p.expert() != expert) return r;
        MemorySegment copy = Arena.ofAuto().allocate(r.bytes().byteSize(), 64);
        copy.copyFrom(r.bytes());
        ResidentExpert c = new ResidentExpert(layer, expert, copy, r.location());
        p.apply().accept(c);
        return c;
    }

    @Override
    public int getMany(int layer, int... experts) {
        return real.getMany(layer, experts);
    }

    /** {@code part}'s byte {@code index} XOR {@code mask} (the {@code byte:} corruption). */
    public static Patch xorByte(int layer, int expert, ExpertPart part, long index, int mask) {
        String name = part.name().toLowerCase(java.util.Locale.ROOT);
        return new Patch(layer, expert, "byte " + name.split("_")[1], "byte:" + layer + ":" + expert + ":" + name + ":" + index + ":" + mask, r -> {
            MemorySegment s = r.part(part);
            s.set(ValueLayout.JAVA_BYTE, index, (byte) (s.get(ValueLayout.JAVA_BYTE, index) ^ mask));
        });
    }

    /** Packed row {@code row} of {@code matrix} [rows][cols] holding the next row's bytes (the {@code row:} corruption). */
    public static Patch row(int layer, int expert, ExpertPart matrix, int row, int rows) {
        String w = matrix.name().toLowerCase(java.util.Locale.ROOT).split("_")[0];
        return new Patch(layer, expert, "row", "row:" + layer + ":" + expert + ":" + w + ":" + row, r -> {
            MemorySegment s = r.part(matrix);
            long cols = s.byteSize() / rows;
            MemorySegment.copy(s, ((row + 1L) % rows) * cols, s, row * cols, cols);
        });
    }

    /**
     * A random small corruption of (layer, expert) at widths {@code lt} (latent) and {@code inter}: a packed byte XOR
     * a random mask (60%: one or two FP4 elements), a scale byte's lowest bit (25%: one group of 32 halved or
     * doubled), one packed row shifted (15%).
     */
    public static Patch random(Random rnd, int layer, int expert, int lt, int inter) {
        int m = rnd.nextInt(3);
        ExpertPart packed = m == 0 ? ExpertPart.W1_PACKED : m == 1 ? ExpertPart.W2_PACKED : ExpertPart.W3_PACKED;
        ExpertPart scale = m == 0 ? ExpertPart.W1_SCALE : m == 1 ? ExpertPart.W2_SCALE : ExpertPart.W3_SCALE;
        int rows = m == 1 ? lt : inter, cols = m == 1 ? inter : lt;
        double u = rnd.nextDouble();
        if (u < 0.6) return xorByte(layer, expert, packed, rnd.nextLong((long) rows * cols / 2), 1 + rnd.nextInt(255));
        if (u < 0.85) return xorByte(layer, expert, scale, rnd.nextLong((long) rows * cols / 32), 1);
        return row(layer, expert, packed, rnd.nextInt(rows), rows);
    }
}
