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

    /**
     * One shard's part: its layers (ascending, contiguous), whether it holds the logit part, its expert ranges of the
     * sweep (with {@code --experts}), its work and bytes read.
     */
    public record Part(int shard, List<Integer> layers, boolean logits, List<ExpertRange> experts, long work, long bytesRead) {
        public Part {
            layers = List.copyOf(layers);
            experts = List.copyOf(experts);
        }

        public Part(int shard, List<Integer> layers, boolean logits, long work, long bytesRead) {
            this(shard, layers, logits, List.of(), work, bytesRead);
        }

        /** "12-23 + logits + experts L3:0-383,L4:0-99": what the plan string holds of this part. */
        public String text() {
            return (layers.isEmpty() ? "-" : k3j.compare.LayerSelection.format(layers)) + (logits ? " + logits" : "")
                    + (experts.isEmpty() ? "" : " + experts " + String.join(",", experts.stream().map(ExpertRange::text).toList()));
        }

        /** Reads {@link #text()} back (work and bytes are not in it: 0). */
        public static Part parse(int shard, String text) {
            String[] bits = text.split(" \\+ ");
            List<Integer> layers = bits[0].equals("-") ? List.of() : k3j.compare.LayerSelection.parse(bits[0], k3j.config.ModelConfig.MAX_LAYERS);
            boolean logits = false;
            List<ExpertRange> experts = new ArrayList<>();
            for (int i = 1; i < bits.length; i++) {
                if (bits[i].equals("logits")) logits = true;
                else if (bits[i].startsWith("experts ")) for (String r : bits[i].substring(8).split(",")) experts.add(ExpertRange.parse(r));
                else throw new IllegalArgumentException("plan part '" + text + "': '" + bits[i] + "' is neither logits nor experts");
            }
            return new Part(shard, layers, logits, experts, 0, 0);
        }
    }

    /** Experts {@code from} (inclusive) to {@code to} (exclusive) of one MoE layer's sweep. */
    public record ExpertRange(int layer, int from, int to) {
        public ExpertRange {
            if (layer < 0 || from < 0 || to <= from) throw new IllegalArgumentException("expert range L" + layer + ":" + from + ".." + to);
        }

        /** "L5:0-191" (the last expert inclusive). */
        public String text() {
            return "L" + layer + ":" + from + "-" + (to - 1);
        }

        public static ExpertRange parse(String s) {
            var m = java.util.regex.Pattern.compile("L(\\d{1,6}):(\\d{1,7})-(\\d{1,7})").matcher(s.trim());
            if (!m.matches()) throw new IllegalArgumentException("expert range '" + s + "' is not L<layer>:<first>-<last>");
            return new ExpertRange(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)) + 1);
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
        long[] work = new long[n], read = new long[n], sweepPerExpert = new long[n];
        long allRead = outside, perToken = outside;
        int e = Math.max(1, cfg.expertCount()), k = cfg.topK();
        for (int l = 0; l < n; l++) {
            long perExpert = expertBytes[l] / e;
            long touched = expertBytes[l] == 0 ? 0 : Math.min(e, (long) tokens * k);
            long active = trunk[l] + (expertBytes[l] == 0 ? 0 : k * perExpert);
            read[l] = trunk[l] + touched * perExpert;
            work[l] = read[l] + tokens * active;
            if (experts && expertBytes[l] > 0) sweepPerExpert[l] = perExpert;
            allRead += trunk[l] + touched * perExpert;
            perToken += active;
        }
        long lRead = logits ? 3 * allRead : 0;
        long lWork = logits ? lRead + (2L * tokens + generated) * perToken : 0;
        WorkPlan p = balance(n, work, read, lWork, lRead, cfg.attnResBlockSize(), shards);
        return experts ? p.withSweep(sweepPerExpert, e) : p;
    }

    /**
     * The expert sweep spread over the parts: every MoE layer's experts in layer then expert order, each weighing its
     * bytes twice (read once, run once on the probes), cut into contiguous expert ranges so that every part's work is
     * raised to one common level (the parts lighter than the level filled up to it; a part already heavier gets none).
     */
    WorkPlan withSweep(long[] perExpert, int expertsPerLayer) {
        int n = parts.size();
        long total = 0;
        for (long b : perExpert) total += 2 * b * expertsPerLayer;
        if (total == 0) return this;
        // the level T with sum over parts of max(0, T - work) = total
        long[] w = parts.stream().mapToLong(Part::work).sorted().toArray();
        double level = 0;
        long below = 0;
        for (int k = 0; k < n; k++) {
            below += w[k];
            double t = (double) (total + below) / (k + 1);
            if (k == n - 1 || t <= w[k + 1]) {
                level = t;
                break;
            }
        }
        double[] end = new double[n];
        double at = 0;
        for (int i = 0; i < n; i++) end[i] = at += Math.max(0, level - parts.get(i).work());
        List<List<ExpertRange>> ranges = new ArrayList<>();
        long[] addWork = new long[n], addRead = new long[n];
        for (int i = 0; i < n; i++) ranges.add(new ArrayList<>());
        double pos = 0;
        int shard = 0;
        for (int l = 0; l < perExpert.length; l++) {
            if (perExpert[l] == 0) continue;
            for (int e = 0; e < expertsPerLayer; e++) {
                double mid = pos + perExpert[l];   // the expert's midpoint in the stream: it goes to the part holding it
                pos += 2 * perExpert[l];
                while (shard < n - 1 && mid > end[shard]) shard++;
                List<ExpertRange> mine = ranges.get(shard);
                ExpertRange last = mine.isEmpty() ? null : mine.getLast();
                if (last != null && last.layer() == l && last.to() == e) mine.set(mine.size() - 1, new ExpertRange(l, last.from(), e + 1));
                else mine.add(new ExpertRange(l, e, e + 1));
                addWork[shard] += 2 * perExpert[l];
                addRead[shard] += perExpert[l];
            }
        }
        List<Part> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Part p = parts.get(i);
            out.add(new Part(p.shard(), p.layers(), p.logits(), ranges.get(i), p.work() + addWork[i], p.bytesRead() + addRead[i]));
        }
        return new WorkPlan(layers, layerWork, layerBytes, logitWork, logitBytes, out);
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

    /** One line per shard (its part, bytes read, work against the heaviest part), then the totals. */
    public String table() {
        long max = parts.stream().mapToLong(Part::work).max().orElse(1), read = 0, work = 0;
        StringBuilder sb = new StringBuilder();
        for (Part p : parts) {
            long experts = p.experts().stream().mapToLong(r -> r.to() - r.from()).sum();
            sb.append(String.format(java.util.Locale.ROOT, "shard %d/%d  %2d layers%s%s  read %s  work %.3f of the heaviest%n    %s%n", p.shard(), parts.size(), p.layers().size(),
                    p.logits() ? " + logits" : "", experts > 0 ? " + " + experts + " experts" : "", k3j.plan.Human.bytes(p.bytesRead()), p.work() / (double) max, p.text()));
            read += p.bytesRead();
            work += p.work();
        }
        sb.append(String.format(java.util.Locale.ROOT, "total read %s; the heaviest shard %.3f of the mean%n", k3j.plan.Human.bytes(read), max / (work / (double) parts.size())));
        return sb.toString();
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
