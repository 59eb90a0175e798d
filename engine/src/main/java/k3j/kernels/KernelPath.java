package k3j.kernels;

import java.util.Locale;

/**
 * Which implementation the kernels' fast entry points run. The scalar path and the Vector API path give the
 * same bits (docs/fp-contract.md; the bit-identity gate proves it), so the choice is one of speed alone.
 *
 * <p>The Vector API is fast only once C2 has compiled the calling loop: before that every vector operation is
 * an allocating Java call, 20-100x slower than scalar code (a 13-layer oracle spent 68 % of a 20-token run
 * there, and its first three tokens took 0.2-0.8 s each). A large call (a real-width projection) reaches C2
 * within itself by on-stack replacement; a small one never amortises the warm-up, and its per-call set-up
 * (widening x, lane order) weighs as much as its arithmetic. {@link Mode#ADAPTIVE}, what {@code k3 run}
 * uses, therefore sends a call down the Vector API path only when its work is at least
 * {@link #ADAPTIVE_MIN_WORK} multiply-adds, and down the scalar path otherwise.
 */
public final class KernelPath {
    private KernelPath() {}

    public enum Mode {
        /** Always the Vector API path (the default; what the kernel gates and benchmarks exercise). */
        VECTOR,
        /** Always the scalar path. */
        SCALAR,
        /** The Vector API for calls of at least {@link #ADAPTIVE_MIN_WORK} multiply-adds, scalar below. */
        ADAPTIVE;

        /** Parses a mode name, case-insensitive. */
        public static Mode parse(String s) {
            try {
                return valueOf(s.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("kernel path must be vector, scalar or adaptive, got '" + s + "'");
            }
        }
    }

    /** Work per call (multiply-adds or elements) from which {@link Mode#ADAPTIVE} takes the Vector API. */
    public static final long ADAPTIVE_MIN_WORK = 1L << 20;

    private static volatile Mode mode = Mode.parse(System.getProperty("k3j.kernels", "vector"));

    /** Sets the process-wide mode (the run command does, once, before the first forward). */
    public static void set(Mode m) {
        mode = m;
    }

    public static Mode mode() {
        return mode;
    }

    /**
     * Whether the batched (several-token) kernels hold a (row, token)'s sixteen accumulators in ONE 512-bit
     * FloatVector (AVX-512) or in two 256-bit ones (AVX2). Chosen once from the machine's preferred vector width
     * ({@code -Dk3j.kernels.width=256|512} overrides); both give the contract's bits, and the bit-identity gate runs
     * both. A width the CPU lacks is correct but runs the Vector API's slow Java fallback.
     */
    private static volatile boolean wide = parseWidth(System.getProperty("k3j.kernels.width", "auto"));

    static boolean parseWidth(String s) {
        return switch (s.trim()) {
            case "auto" -> jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.vectorBitSize() >= 512;
            case "512" -> true;
            case "256" -> false;
            default -> throw new IllegalArgumentException("kernel width must be auto, 256 or 512, got '" + s + "'");
        };
    }

    /** True when the batched kernels run 512-bit vectors. */
    public static boolean wide() {
        return wide;
    }

    /** Sets the batched kernels' vector width (tests run both; same bits). */
    public static void wide(boolean on) {
        wide = on;
    }

    /** True when a call of {@code work} multiply-adds (or elements) should take the Vector API path. */
    static boolean vector(long work) {
        Mode m = mode;
        return m == Mode.VECTOR || m == Mode.ADAPTIVE && work >= ADAPTIVE_MIN_WORK;
    }
}
