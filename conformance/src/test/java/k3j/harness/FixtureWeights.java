package k3j.harness;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Arrays;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertPart;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.model.LayerTensor;
import k3j.model.WeightLoader;

/**
 * A fixture's arrays as the engine's weight sources, so layer-sized fixtures run through the production
 * path: its tensors by checkpoint suffix for {@link WeightLoader}, its MXFP4 experts as an {@link ExpertSource}.
 */
public final class FixtureWeights {
    private FixtureWeights() {}

    /** The fixture's inputs named by checkpoint suffix. */
    public static WeightLoader.LayerTensors tensors(KernelFixtures.Fixture fx) {
        return new WeightLoader.LayerTensors() {
            @Override
            public k3j.kernels.Matrix matrix(String suffix) {
                return fx.in(suffix).matrix();
            }

            @Override
            public float[] vector(String suffix, int take) {
                float[] f = fx.in(suffix).floats();
                return take < 0 ? f : Arrays.copyOf(f, take);
            }
        };
    }

    /** The fixture's routed experts of {@code layer}, each one's six parts laid out canonically, resident. */
    public static ExpertSource experts(KernelFixtures.Fixture fx, int layer) {
        ExpertPart[] parts = ExpertPart.values();
        return new ExpertSource() {
            @Override
            public ResidentExpert get(int l, int expert) throws ExpertLoadException {
                String base = LayerTensor.expert(expert);
                if (l != layer || !fx.hasInput(base + parts[0].suffix())) throw new ExpertLoadException(l, expert, "not in fixture " + fx.name());
                byte[][] b = new byte[parts.length][];
                long[] off = new long[parts.length], len = new long[parts.length];
                long at = 0;
                for (int i = 0; i < parts.length; i++) {
                    b[i] = fx.in(base + parts[i].suffix()).bytes();
                    off[i] = at;
                    len[i] = b[i].length;
                    at += b[i].length;
                }
                byte[] all = new byte[(int) at];
                for (int i = 0; i < parts.length; i++) System.arraycopy(b[i], 0, all, (int) off[i], b[i].length);
                return new ResidentExpert(l, expert, MemorySegment.ofArray(all), ExpertLocation.contiguous(Path.of(fx.name()), 0, off, len));
            }

            @Override
            public int getMany(int l, int... experts) {
                return 0;
            }
        };
    }
}
