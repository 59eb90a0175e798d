package k3j.kernels;

/**
 * The transcendental-bound elementwise kernels: SiTU-GLU (docs/semantics.md §3.8), ShortConv with fused SiLU (§3.9)
 * and the KDA safe gate (§3.11). Their cost is the StrictMath call per element, which has no vector form
 * with the same bits, so each has ONE path (the contract's scalar order); the bit-identity gate still
 * runs them through the dispatcher to pin that they stay deterministic.
 */
public final class Activations {
    private Activations() {}

    /** y[i] = ((b1 · tanh(g / b1)) · sigmoid(g)) · (b2 · tanh(u / b2)), float; the sigmoid takes the uncapped g. */
    public static void situGlu(float[] y, float[] gate, float[] up, int n, float beta, float linearBeta) {
        for (int i = 0; i < n; i++) {
            float g = gate[i];
            float a = (beta * Fp.tanh(g / beta)) * Fp.sigmoid(g);
            float u = linearBeta * Fp.tanh(up[i] / linearBeta);
            y[i] = a * u;
        }
    }

    /**
     * Causal depthwise conv with fused SiLU over T tokens, carrying state. w [channels][k] (taps oldest →
     * newest, w[c][k−1] multiplies the current input), x and y [T][channels] (y may be x), state
     * [channels][k−1] oldest first (updated). Per channel: acc = w[c][k−1]·cur, then + w[c][j]·buf[j] for
     * j in order (float), y = acc · sigmoid(acc).
     */
    public static void shortConv(float[] y, float[] x, float[] w, float[] state, int channels, int k, int tokens) {
        int hist = k - 1;
        float[] buf = new float[Math.max(hist, 1)];
        for (int c = 0; c < channels; c++) {
            System.arraycopy(state, c * hist, buf, 0, hist);
            for (int t = 0; t < tokens; t++) {
                float cur = x[t * channels + c];
                float acc = w[c * k + hist] * cur;
                for (int j = 0; j < hist; j++) acc = acc + w[c * k + j] * buf[j];
                if (hist > 0) {
                    System.arraycopy(buf, 1, buf, 0, hist - 1);
                    buf[hist - 1] = cur;
                }
                y[t * channels + c] = acc * Fp.sigmoid(acc);
            }
            System.arraycopy(buf, 0, state, c * hist, hist);
        }
    }

    /**
     * KDA safe gate, per token: for head h, a = exp(A_log[h]) (A_log read PER HEAD: the first {@code heads}
     * entries of the checkpoint's zero-padded tensor); g[i] = lb · sigmoid(a · (graw[i] + dt_bias[i])),
     * i = h·D + d. g ∈ (lb, 0]; alpha = exp(g) is taken by the recurrence.
     */
    public static void kdaGate(float[] g, float[] graw, float[] aLog, float[] dtBias, int heads, int headDim, float lowerBound, int tokens) {
        if (aLog.length < heads) throw new IllegalArgumentException("A_log has " + aLog.length + " entries, need >= " + heads + " (one per head)");
        int p = heads * headDim;
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < heads; h++) {
                float a = Fp.exp(aLog[h]);
                for (int d = 0; d < headDim; d++) {
                    int i = h * headDim + d;
                    float u = a * (graw[t * p + i] + dtBias[i]);
                    g[t * p + i] = lowerBound * Fp.sigmoid(u);
                }
            }
        }
    }
}
