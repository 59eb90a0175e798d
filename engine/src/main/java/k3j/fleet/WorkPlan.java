package k3j.fleet;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.config.ModelConfig;
import k3j.io.TensorInfo;

/**
 * How N shards split one conformance: the layers in order, then the logit part (full recompute, incremental, greedy
 * generation), cut into N contiguous parts balanced by work, on AttnRes block boundaries where that costs little.
 *
 * <p>Work is counted in weight bytes: the bytes a part reads from disk plus, for every token it runs, the weight bytes
 * that token multiplies in (docs/formats.md §18.2). A layer run alone reads its trunk tensors and the routed experts its
 * tokens select (at most min(E, tokens × K)) and runs every token through its trunk and K experts; {@code --experts}
 * adds every expert read once and run on the probes. The logit part reads every layer and the embedding and head once
 * per mode and runs the prompt twice and the generated ids once through all of them.
 *
 * @param layers   the model's layer count
 * @param layerWork work of each layer alone
 * @param layerBytes bytes each layer alone reads
 * @param logitWork work of the logit part, 0 without one
 * @param logitBytes bytes the logit part reads
 * @param parts    the N parts, shard 0 first
 */
public record WorkPlan(int layers, long[] layerWork, long[] layerBytes, long logitWork, long logitBytes, List<Part> parts) {
    /** A part may weigh this much over the best balance to put its cuts on AttnRes block boundaries. */
    public static final double BLOCK_SLACK = 0.05;

    /** One shard's part: its layers (ascending, contiguous), whether it holds the logit part, its work and bytes read. */
    public record Part(int shard, List<Integer> layers, boolean logits, long work, long bytesRead) {
        public Part {
            layers = List.copyOf(layers);
        }
    }

    public WorkPlan {
        layerWork = layerWork.clone();
        layerBytes = layerBytes.clone();
        parts = List.copyOf(parts);
    }

    public Part part(int shard) {
        return parts.get(shard);
    }

    /** Work per item from the checkpoint's tensor sizes (headers only). */
    public static WorkPlan of(List<TensorInfo> tensors, ModelConfig cfg, int tokens, int generated, boolean logits, boolean experts, int shards) {
        int n = cfg.layerCount();
        long[] trunk = new long[n], expertBytes = new long[n];
        long outside = 0;
        for (TensorInfo t : tensors) {
            int layer = layerOf(t.name());
            if (layer < 0 || layer >= n) outside += t.length();
            else if (t.name().contains(".experts.")) expertBytes[layer] += t.length();
            else trunk[layer] += t.length();
        }
        long[] work = new long[n], read = new long[n];
        long allRead = outside, perToken = outside;
        int e = Math.max(1, cfg.expertCount()), k = cfg.topK();
        for (int l = 0; l < n; l++) {
            long perExpert = expertBytes[l] / e;
            long touched = expertBytes[l] == 0 ? 0 : Math.min(e, (long) tokens * k);
            long active = trunk[l] + (expertBytes[l] == 0 ? 0 : k * perExpert);
            read[l] = trunk[l] + touched * perExpert + (experts ? expertBytes[l] : 0);
            work[l] = read[l] + tokens * active + (experts ? expertBytes[l] : 0);
            allRead += trunk[l] + touched * perExpert;
            perToken += active;
        }
        long lRead = logits ? 3 * allRead : 0;
        long lWork = logits ? lRead + (2L * tokens + generated) * perToken : 0;
        return balance(n, work, read, lWork, lRead, cfg.attnResBlockSize(), shards);
    }

    /**
     * The N contiguous parts of the items (layers, then the logit part when {@code logitWork > 0}) with the smallest
     * heaviest part; among the cuttings within {@link #BLOCK_SLACK} of it, the one with the most cuts on block
     * boundaries (a layer that is a multiple of {@code block}, or the logit part), then the lightest heaviest part. When
     * the logit part alone outweighs that heaviest part, it takes the last shard and the layers are balanced over the rest.
     */
    public static WorkPlan balance(int layers, long[] work, long[] read, long logitWork, long logitBytes, int block, int shards) {
        int m = layers + (logitWork > 0 ? 1 : 0);
        if (shards > m) throw new IllegalArgumentException(shards + " shards for " + m + " parts of work (" + layers + " layers"
                + (logitWork > 0 ? " and the logits" : "") + "): give at most " + m);
        long[] w = Arrays.copyOf(work, m), b = Arrays.copyOf(read, m);
        if (m > layers) {
            w[layers] = logitWork;
            b[layers] = logitBytes;
        }
        long[] pre = new long[m + 1];
        for (int i = 0; i < m; i++) pre[i + 1] = pre[i] + Math.max(1, w[i]);
        long best = minMax(pre, m, shards);
        if (m > layers && shards > 1 && w[layers] >= best) {
            // the logit part alone is the longest pole: it gets the last shard, the layers are balanced over the others
            WorkPlan rest = balance(layers, work, read, 0, 0, block, shards - 1);
            List<Part> parts = new ArrayList<>(rest.parts());
            parts.add(new Part(shards - 1, List.of(), true, logitWork, logitBytes));
            return new WorkPlan(layers, work, read, logitWork, logitBytes, parts);
        }
        long cap = (long) Math.floor(best * (1 + BLOCK_SLACK));
        // score[k][j]: the first j items in k parts, each within cap: {aligned cuts, -heaviest part}, best first
        long[][] aligned = new long[shards + 1][m + 1], heavy = new long[shards + 1][m + 1];
        int[][] from = new int[shards + 1][m + 1];
        for (long[] row : aligned) Arrays.fill(row, -1);
        aligned[0][0] = 0;
        for (int k = 1; k <= shards; k++) {
            for (int j = k; j <= m; j++) {
                for (int i = k - 1; i < j; i++) {
                    if (aligned[k - 1][i] < 0 || pre[j] - pre[i] > cap) continue;
                    long a = aligned[k - 1][i] + (i > 0 && (i == layers || i % block == 0) ? 1 : 0);
                    long h = Math.max(heavy[k - 1][i], pre[j] - pre[i]);
                    if (a > aligned[k][j] || (a == aligned[k][j] && h < heavy[k][j])) {
                        aligned[k][j] = a;
                        heavy[k][j] = h;
                        from[k][j] = i;
                    }
                }
            }
        }
        int[] cut = new int[shards + 1];
        cut[shards] = m;
        for (int k = shards; k > 0; k--) cut[k - 1] = from[k][cut[k]];
        List<Part> parts = new ArrayList<>();
        for (int k = 0; k < shards; k++) {
            List<Integer> ls = new ArrayList<>();
            long pw = 0, pb = 0;
            boolean lg = false;
            for (int i = cut[k]; i < cut[k + 1]; i++) {
                if (i == layers) lg = true;
                else ls.add(i);
                pw += w[i];
                pb += b[i];
            }
            parts.add(new Part(k, ls, lg, pw, pb));
        }
        return new WorkPlan(layers, work, read, logitWork, logitBytes, parts);
    }

    /** The smallest heaviest part over all cuttings of the items into {@code k} contiguous nonempty parts. */
    private static long minMax(long[] pre, int m, int k) {
        long[][] d = new long[k + 1][m + 1];
        for (long[] row : d) Arrays.fill(row, Long.MAX_VALUE);
        d[0][0] = 0;
        for (int p = 1; p <= k; p++) {
            for (int j = p; j <= m; j++) {
                for (int i = p - 1; i < j; i++) {
                    if (d[p - 1][i] == Long.MAX_VALUE) continue;
                    d[p][j] = Math.min(d[p][j], Math.max(d[p - 1][i], pre[j] - pre[i]));
                }
            }
        }
        return d[k][m];
    }

    /** The layer of a tensor named "...layers.N....", or -1. */
    static int layerOf(String name) {
        int at = name.indexOf("layers.");
        if (at < 0) return -1;
        int s = at + "layers.".length(), e = s;
        while (e < name.length() && Character.isDigit(name.charAt(e))) e++;
        if (e == s || e - s > 6) return -1;
        return Integer.parseInt(name, s, e, 10);
    }
}
