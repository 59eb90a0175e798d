package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Epic;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import k3j.harness.Evidence;
import k3j.kernels.AttnRes;
import k3j.kernels.Argmax;
import k3j.kernels.Embedding;
import k3j.kernels.Fp;
import k3j.kernels.Kda;
import k3j.kernels.KernelPath;
import k3j.kernels.Matrix;
import k3j.kernels.MatVec;
import k3j.kernels.MlaAttention;
import k3j.kernels.MlaKv;
import k3j.kernels.Mxfp4;
import k3j.kernels.Norms;
import k3j.kernels.Router;
import k3j.kernels.Workers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: every kernel's fast path (Vector API, threads) gives the SAME BITS as its scalar reference path,
 * for ragged shapes (widths not a multiple of 16, odd, 1), scale byte 255, exact zeros in k and q, and
 * 1, 2 and 3 threads; a batch of T tokens equals T single calls. Metric: the number of elements whose
 * raw float bits differ (NaNs compared as NaN). Each case also runs a plausible wrong fast path (the
 * "mutant": reduceLanes, mul+add for FMA, another tree, v1's double accumulation, an MXFP4 table without the scale,
 * a byte-255 group multiplied as zeros, FMA in KDA, the C peer's one-chain MXFP4 order, a router score from a float
 * logit) and demands it DIFFERS, so the inputs
 * are proven able to catch an order change. Every non-mutant case runs again on the scalar path
 * ({@code scalar_path_*}), which {@code k3 run} takes for small calls.
 */
@Tag("bitidentity")
@Epic("bitidentity")
class KernelBitIdentityGate {
    private static final long SEED = 0x6b336a_0001L;
    private static final Workers[] POOLS = {Workers.serial(), Workers.of(2), Workers.of(3)};

    /** One case: computes the reference and the fast outputs (and optionally a mutant that must differ). */
    interface Check {
        float[][] run();
    }

    record Case(String name, Check check, boolean mutant) {
        @Override
        public String toString() {
            return name;
        }
    }

    @AfterAll
    static void closePools() {
        for (Workers w : POOLS) w.close();
    }

    static Stream<Arguments> cases() {
        List<Case> c = new ArrayList<>();
        int[][] mv = {{257, 129}, {1, 1}, {16, 3}, {15, 5}, {33, 7}, {1000, 37}, {7, 2}};
        for (int[] s : mv) {
            for (int th = 0; th < 3; th++) {
                int in = s[0], out = s[1], t = th;
                c.add(new Case("matvec_bf16_" + in + "x" + out + "_" + (t + 1) + "t", () -> matvec(in, out, 1, true, POOLS[t]), false));
                c.add(new Case("matvec_f32_" + in + "x" + out + "_" + (t + 1) + "t", () -> matvec(in, out, 1, false, POOLS[t]), false));
            }
            for (int tokens : new int[] {2, 3, 4, 5, 7, 9}) {
                int in = s[0], out = s[1];
                c.add(new Case("matmul_bf16_T" + tokens + "_" + in + "x" + out + "_equals_single_calls", () -> batchEqualsSingles(in, out, tokens, true), false));
                c.add(new Case("matmul_f32_T" + tokens + "_" + in + "x" + out + "_equals_single_calls", () -> batchEqualsSingles(in, out, tokens, false), false));
            }
            c.add(new Case("matvec_bf16_equals_f32_over_widened_" + s[0] + "x" + s[1], () -> bf16EqualsF32(s[0], s[1]), false));
        }
        // several matrices over the same x in one pass (a layer's projections): each output as its own matmul's
        for (int th = 0; th < 3; th++) {
            for (int tokens : new int[] {1, 3, 7}) {
                int t = th;
                c.add(new Case("matmul_all_bf16_T" + tokens + "_257x{1,7,33,129}_" + (t + 1) + "t_equals_separate_calls",
                        () -> allEqualsSeparate(257, new int[] {1, 7, 33, 129}, tokens, true, POOLS[t]), false));
                c.add(new Case("matmul_all_f32_T" + tokens + "_33x{5,2,16}_" + (t + 1) + "t_equals_separate_calls",
                        () -> allEqualsSeparate(33, new int[] {5, 2, 16}, tokens, false, POOLS[t]), false));
            }
        }
        // more than one column panel, row block and token chunk of the batched kernels
        c.add(new Case("matmul_bf16_T61_2100x70_equals_single_calls", () -> batchEqualsSingles(2100, 70, 61, true), false));
        c.add(new Case("mutant_matvec_reduceLanes_differs", KernelBitIdentityGate::matvecReduceLanesMutant, true));
        c.add(new Case("mutant_matvec_mul_then_add_instead_of_fma_differs", () -> matvecMutant(KernelBitIdentityGate::mulThenAdd, MatVec::tree), true));
        c.add(new Case("mutant_matvec_tree_in_another_order_differs", () -> matvecMutant(Math::fma, KernelBitIdentityGate::sequentialTree), true));
        c.add(new Case("mutant_matvec_v1_double_accumulation_differs", KernelBitIdentityGate::matvecDoubleMutant, true));
        int[][] mx = {{1, 2}, {3, 34}, {5, 64}, {9, 100}, {13, 96}, {64, 512}, {7, 30}, {13, 2100}};
        for (int[] s : mx) {
            for (int th = 0; th < 3; th++) {
                for (int tokens : new int[] {1, 2, 3, 9}) {
                    int rows = s[0], in = s[1], t = th;
                    for (Mxfp4.Codes codes : Mxfp4.Codes.values()) {
                        String form = codes == Mxfp4.Codes.NIBBLES ? "" : "_" + codes.name().toLowerCase(java.util.Locale.ROOT);
                        c.add(new Case("mxfp4" + form + "_" + rows + "x" + in + "_T" + tokens + "_" + (t + 1) + "t", () -> mxfp4(rows, in, tokens, codes, POOLS[t]), false));
                    }
                }
            }
        }
        c.add(new Case("mutant_mxfp4_one_chain_per_group_differs", KernelBitIdentityGate::mxfp4OneChainMutant, true));
        c.add(new Case("mutant_mxfp4_table_without_the_scale_differs", KernelBitIdentityGate::mxfp4UnscaledTableMutant, true));
        c.add(new Case("mutant_mxfp4_byte255_group_multiplied_as_zero_differs", KernelBitIdentityGate::mxfp4ZeroGroupMutant, true));
        for (int n : new int[] {1, 7, 8, 257, 7168}) {
            c.add(new Case("rmsnorm_" + n, () -> rmsnorm(n), false));
            c.add(new Case("l2norm_" + n, () -> l2norm(n), false));
            c.add(new Case("embedding_" + n, () -> embedding(n), false));
        }
        for (int d : new int[] {1, 5, 8, 16, 20, 24, 64, 128}) {
            for (int th = 0; th < 3; th++) {
                int t = th;
                c.add(new Case("kda_recurrence_d" + d + "_" + (t + 1) + "t", () -> kda(d, 3, 4, POOLS[t]), false));
            }
        }
        c.add(new Case("mutant_kda_fma_differs", KernelBitIdentityGate::kdaFmaMutant, true));
        int[][] mla = {{3, 5, 3, 7, 0}, {3, 8, 2, 16, 15}, {2, 8, 2, 16, 16}, {4, 16, 8, 9, 40}, {1, 1, 0, 1, 3}};
        for (int[] s : mla) {
            for (int th = 0; th < 3; th++) {
                int t = th;
                c.add(new Case("mla_attention_h" + s[0] + "_nope" + s[1] + "_rope" + s[2] + "_v" + s[3] + "_p" + s[4] + "_" + (t + 1) + "t",
                        () -> mla(s[0], s[1], s[2], s[3], s[4], POOLS[t]), false));
            }
        }
        for (int ns : new int[] {1, 3, 9}) {
            for (int n : new int[] {9, 64}) c.add(new Case("attn_res_s" + ns + "_n" + n, () -> attnRes(ns, n), false));
        }
        for (int th = 0; th < 3; th++) {
            for (int k : new int[] {1, 4}) {
                int t = th;
                c.add(new Case("router_n13_e33_k" + k + "_" + (t + 1) + "t", () -> router(13, 33, k, POOLS[t]), false));
            }
        }
        c.add(new Case("mutant_router_score_from_a_float_logit_differs", KernelBitIdentityGate::routerFloatLogitMutant, true));
        for (int n : new int[] {1, 7, 8, 100}) c.add(new Case("argmax_" + n, () -> argmax(n), false));
        c.add(new Case("mutant_matmul_512_bit_blocks_of_32_split_even_odd_differs", KernelBitIdentityGate::matvecBlocksOf32Mutant, true));
        // the batched kernels at the other vector width (512-bit tiles or two 256-bit halves, chosen once per machine)
        int every = sampleEvery(), k = 0;
        for (Case v : List.copyOf(c)) {
            if (!v.mutant() && (v.name().startsWith("matmul_") || v.name().startsWith("mxfp4")) && k++ % every == 0) {
                c.add(new Case("other_width_" + v.name(), () -> atOtherWidth(v.check()), false));
            }
        }
        // the same claims for the scalar path the run command takes for small calls (KernelPath.ADAPTIVE)
        k = 0;
        for (Case v : List.copyOf(c)) {
            if (!v.mutant() && k++ % every == 0) c.add(new Case("scalar_path_" + v.name(), () -> onScalarPath(v.check()), false));
        }
        return c.stream().map(x -> Arguments.of(x));
    }

    /**
     * Which of the derived cases (other width, scalar path) run: {@code -Dk3.bitidentity=all} (-Pslow, and an IDE run
     * without the property) every one, {@code sample} (ci/test) every fourth, in the order of the list above.
     */
    static int sampleEvery() {
        String mode = System.getProperty("k3.bitidentity", "");
        return switch (mode) {
            case "", "all" -> 1;
            case "sample" -> 4;
            default -> throw new IllegalArgumentException("-Dk3.bitidentity must be all or sample, got '" + mode + "'");
        };
    }

    private static float[][] onScalarPath(Check check) {
        KernelPath.set(KernelPath.Mode.SCALAR);
        try {
            return check.run();
        } finally {
            KernelPath.set(KernelPath.Mode.VECTOR);
        }
    }

    private static float[][] atOtherWidth(Check check) {
        boolean wide = KernelPath.wide();
        KernelPath.wide(!wide);
        try {
            return check.run();
        } finally {
            KernelPath.wide(wide);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void fastPathHasTheReferenceBits(Case c) {
        float[][] r = c.check().run();
        int diff = differing(r[0], r[1]);
        Evidence.parameter("elements", r[0].length);
        Evidence.parameter("differing", diff);
        if (c.mutant()) {
            assertTrue(diff > 0, c.name() + ": the plausible wrong fast path gives the reference bits on these inputs; make them adversarial");
        } else {
            assertEquals(r[0].length, r[1].length, c.name() + ": output lengths");
            assertEquals(0, diff, c.name() + ": " + diff + " of " + r[0].length + " elements differ in their bits from the reference");
        }
    }

    // ------------------------------------------------------------------ inputs

    static SplittableRandom rng(String salt) {
        return new SplittableRandom(SEED ^ salt.hashCode());
    }

    /** Activations uniform in [-2, 2) with a few exact zeros. */
    static float[] activations(SplittableRandom r, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = r.nextInt(23) == 0 ? 0.0f : (float) (r.nextDouble() * 4 - 2);
        return x;
    }

    /** bf16 weights with random sign, exponents over a 16x range and a full 7-bit mantissa (rounding-rich). */
    static short[] bf16Weights(SplittableRandom r, int n) {
        short[] w = new short[n];
        for (int i = 0; i < n; i++) w[i] = (short) ((r.nextInt(2) << 15) | ((117 + r.nextInt(8)) << 7) | r.nextInt(128));
        return w;
    }

    /**
     * Makes order visible through the float rounding: x[2m+1] = x[2m], and in every row a few pairs
     * (2m, 2m+1) get weights +B, −B with B ~ 2^40, so the big products cancel exactly in the math while
     * the small products are rounded against B-sized partial sums, differently in every order.
     */
    static void cancelling(SplittableRandom r, short[] w, float[] x, int in, int out) {
        for (int t = 0; t + 1 < x.length; t += 2) x[t + 1] = x[t];
        if (in < 2) return;
        for (int o = 0; o < out; o++) {
            for (int pair = 0; pair < 4; pair++) {
                int m = r.nextInt(in / 2);
                short big = (short) ((r.nextInt(2) << 15) | ((127 + 36 + r.nextInt(8)) << 7) | r.nextInt(128));
                w[o * in + 2 * m] = big;
                w[o * in + 2 * m + 1] = (short) (big ^ 0x8000);
            }
        }
    }

    static float[] widen(short[] bits) {
        float[] f = new float[bits.length];
        for (int i = 0; i < f.length; i++) f[i] = Fp.bf16(bits[i]);
        return f;
    }

    static int differing(float[] a, float[] b) {
        if (a.length != b.length) return Math.max(a.length, b.length);
        int d = 0;
        for (int i = 0; i < a.length; i++) {
            boolean same = Float.isNaN(a[i]) ? Float.isNaN(b[i]) : Float.floatToRawIntBits(a[i]) == Float.floatToRawIntBits(b[i]);
            if (!same) d++;
        }
        return d;
    }

    // ------------------------------------------------------------------ cases

    static float[][] matvec(int in, int out, int tokens, boolean bf16, Workers pool) {
        SplittableRandom r = rng("mv" + in + "x" + out);
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in * tokens);
        cancelling(r, w, x, in, out);
        Matrix m = bf16 ? Matrix.bf16(w, out, in) : Matrix.f32(widen(w), out, in);
        float[] ref = new float[out * tokens], fast = new float[out * tokens];
        MatVec.reference(ref, x, tokens, m);
        MatVec.matmul(pool, fast, x, tokens, m);
        return new float[][] {ref, fast};
    }

    static float[][] batchEqualsSingles(int in, int out, int tokens, boolean bf16) {
        SplittableRandom r = rng("mm" + in + "x" + out);
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in * tokens);
        cancelling(r, w, x, in, out);
        Matrix m = bf16 ? Matrix.bf16(w, out, in) : Matrix.f32(widen(w), out, in);
        float[] singles = new float[out * tokens], batch = new float[out * tokens];
        float[] xt = new float[in], yt = new float[out];
        for (int t = 0; t < tokens; t++) {
            System.arraycopy(x, t * in, xt, 0, in);
            MatVec.matvec(POOLS[1], yt, xt, m);
            System.arraycopy(yt, 0, singles, t * out, out);
        }
        MatVec.matmul(POOLS[2], batch, x, tokens, m);
        float[] ref = new float[out * tokens];
        MatVec.reference(ref, x, tokens, m);
        if (differing(ref, batch) != 0) return new float[][] {ref, batch};
        return new float[][] {singles, batch};
    }

    /** {@link MatVec#matmulAll} over matrices of {@code rows[i]} x in against each matrix's reference, outputs concatenated. */
    static float[][] allEqualsSeparate(int in, int[] rows, int tokens, boolean bf16, Workers pool) {
        SplittableRandom r = rng("all" + in + "x" + rows.length);
        float[] x = activations(r, in * tokens);
        Matrix[] ms = new Matrix[rows.length];
        float[][] ys = new float[rows.length][];
        int total = 0;
        for (int i = 0; i < rows.length; i++) {
            short[] w = bf16Weights(r, in * rows[i]);
            cancelling(r, w, x.clone(), in, rows[i]);
            ms[i] = bf16 ? Matrix.bf16(w, rows[i], in) : Matrix.f32(widen(w), rows[i], in);
            ys[i] = new float[rows[i] * tokens];
            total += rows[i] * tokens;
        }
        MatVec.matmulAll(pool, x, tokens, ms, ys);
        float[] ref = new float[total], all = new float[total];
        for (int i = 0, at = 0; i < rows.length; at += ys[i].length, i++) {
            float[] one = new float[rows[i] * tokens];
            MatVec.reference(one, x, tokens, ms[i]);
            System.arraycopy(one, 0, ref, at, one.length);
            System.arraycopy(ys[i], 0, all, at, one.length);
        }
        return new float[][] {ref, all};
    }

    static float[][] bf16EqualsF32(int in, int out) {
        SplittableRandom r = rng("eq" + in + "x" + out);
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in), a = new float[out], b = new float[out];
        cancelling(r, w, x, in, out);
        MatVec.matvec(POOLS[0], a, x, Matrix.bf16(w, out, in));
        MatVec.matvec(POOLS[0], b, x, Matrix.f32(widen(w), out, in));
        return new float[][] {a, b};
    }

    /** Mutant: the same sixteen accumulators reduced with reduceLanes (unspecified order). */
    static float[][] matvecReduceLanesMutant() {
        int in = 1000, out = 257;
        SplittableRandom r = rng("mutant-mv");
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in);
        cancelling(r, w, x, in, out);
        Matrix m = Matrix.bf16(w, out, in);
        float[] wf = widen(w), ref = new float[out], mutant = new float[out];
        MatVec.reference(ref, x, 1, m);
        for (int o = 0; o < out; o++) {
            double acc = 0.0;
            int i = 0;
            for (; i + 4 <= in; i += 4) {
                DoubleVector p = ((DoubleVector) FloatVector.fromArray(FloatVector.SPECIES_128, wf, o * in + i).convertShape(VectorOperators.F2D, DoubleVector.SPECIES_256, 0))
                        .mul((DoubleVector) FloatVector.fromArray(FloatVector.SPECIES_128, x, i).convertShape(VectorOperators.F2D, DoubleVector.SPECIES_256, 0));
                acc = acc + p.reduceLanes(VectorOperators.ADD);
            }
            for (; i < in; i++) acc = acc + (double) wf[o * in + i] * x[i];
            mutant[o] = (float) acc;
        }
        return new float[][] {ref, mutant};
    }

    interface Fma {
        float apply(float w, float x, float acc);
    }

    interface Tree {
        float apply(float[] a);
    }

    static float mulThenAdd(float w, float x, float acc) {
        return acc + w * x;
    }

    /** The sixteen accumulators added in one chain, a0 first: a plausible other tree. */
    static float sequentialTree(float[] a) {
        float s = 0.0f;
        for (float v : a) s += v;
        return s;
    }

    /** Mutant: the v2 map with one rule changed (the multiply-add, or the tree), on the adversarial bf16 inputs. */
    static float[][] matvecMutant(Fma fma, Tree tree) {
        int in = 1000, out = 257;
        SplittableRandom r = rng("mutant-mv2");
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in);
        cancelling(r, w, x, in, out);
        Matrix m = Matrix.bf16(w, out, in);
        float[] wf = widen(w), ref = new float[out], mutant = new float[out], a = new float[16];
        MatVec.reference(ref, x, 1, m);
        for (int o = 0; o < out; o++) {
            java.util.Arrays.fill(a, 0.0f);
            int i = 0;
            for (; i + 16 <= in; i += 16) {
                for (int l = 0; l < 16; l++) a[l] = fma.apply(wf[o * in + i + l], x[i + l], a[l]);
            }
            float acc = tree.apply(a);
            for (; i < in; i++) acc = fma.apply(wf[o * in + i], x[i], acc);
            mutant[o] = acc;
        }
        return new float[][] {ref, mutant};
    }

    /**
     * Mutant: a plausible 512-bit bf16 kernel that loads 32 bf16 as 16 ints and splits them into even and odd elements,
     * so lane k of the even vector sums elements 2k of BOTH halves of each block of 32 (32 chains, folded pairwise).
     */
    static float[][] matvecBlocksOf32Mutant() {
        int in = 1000, out = 257;
        SplittableRandom r = rng("mutant-mv32");
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in);
        cancelling(r, w, x, in, out);
        float[] wf = widen(w), ref = new float[out], mutant = new float[out], a = new float[32], b = new float[16];
        MatVec.reference(ref, x, 1, Matrix.bf16(w, out, in));
        for (int o = 0; o < out; o++) {
            java.util.Arrays.fill(a, 0.0f);
            int i = 0;
            for (; i + 32 <= in; i += 32) {
                for (int k = 0; k < 16; k++) {
                    a[k] = Math.fma(wf[o * in + i + 2 * k], x[i + 2 * k], a[k]);
                    a[16 + k] = Math.fma(wf[o * in + i + 2 * k + 1], x[i + 2 * k + 1], a[16 + k]);
                }
            }
            for (int k = 0; k < 8; k++) {
                b[2 * k] = a[k] + a[k + 8];
                b[2 * k + 1] = a[16 + k] + a[24 + k];
            }
            float acc = MatVec.tree(b);
            for (; i < in; i++) acc = Math.fma(wf[o * in + i], x[i], acc);
            mutant[o] = acc;
        }
        return new float[][] {ref, mutant};
    }

    /** Mutant: the v1 contract (sixteen double accumulators, the same tree shape, one rounding at the end). */
    static float[][] matvecDoubleMutant() {
        int in = 1000, out = 257;
        SplittableRandom r = rng("mutant-mv1");
        short[] w = bf16Weights(r, in * out);
        float[] x = activations(r, in);
        cancelling(r, w, x, in, out);
        float[] wf = widen(w), ref = new float[out], mutant = new float[out];
        MatVec.reference(ref, x, 1, Matrix.bf16(w, out, in));
        double[] a = new double[16];
        for (int o = 0; o < out; o++) {
            java.util.Arrays.fill(a, 0.0);
            int i = 0;
            for (; i + 16 <= in; i += 16) {
                for (int l = 0; l < 16; l++) a[l] += (double) wf[o * in + i + l] * x[i + l];
            }
            double acc = ((a[0] + a[8]) + (a[4] + a[12]) + ((a[2] + a[10]) + (a[6] + a[14]))) + ((a[1] + a[9]) + (a[5] + a[13]) + ((a[3] + a[11]) + (a[7] + a[15])));
            for (; i < in; i++) acc += (double) wf[o * in + i] * x[i];
            mutant[o] = (float) acc;
        }
        return new float[][] {ref, mutant};
    }

    record Mx(MemorySegment packed, MemorySegment scales) {}

    /**
     * Random codes and scales (one group in 9 with scale byte 255 in rows 4-7, 12-15, … and the rows after the last
     * multiple of four, none in the other four-row tiles, which the batched kernels tile; one in 13 with byte 0), and x made
     * adversarial like the matvec's: where x[2m] = x[2m+1] = 2^30 the byte holds opposite codes, so the
     * big products cancel and the small ones are rounded against them, differently in every order.
     */
    static Mx mxfp4Bytes(SplittableRandom r, int rows, int in, float[] x) {
        byte[] p = new byte[rows * in / 2], s = new byte[rows * Mxfp4.groups(in)];
        for (int t = 0; t + 1 < x.length; t += 2) {
            if (r.nextInt(6) == 0) x[t] = x[t + 1] = (r.nextInt(2) == 0 ? 1 : -1) * 0x1p30f;
        }
        for (int i = 0; i < p.length; i++) {
            int lo = r.nextInt(16);
            boolean big = Math.abs(x[(2 * i) % in]) == 0x1p30f;
            p[i] = (byte) (big ? (lo | ((lo ^ 8) << 4)) : r.nextInt(256));
        }
        int ng = Mxfp4.groups(in), quads = rows & ~3;
        for (int i = 0; i < s.length; i++) {
            int row = i / ng;
            boolean zeroable = (row / 4) % 2 == 1 || row >= quads;   // every other four rows clean: the batched kernels' 4-row tiles
            s[i] = (byte) (zeroable && r.nextInt(9) == 0 ? 255 : r.nextInt(13) == 0 ? 0 : 118 + r.nextInt(10));
        }
        return new Mx(MemorySegment.ofArray(p), MemorySegment.ofArray(s));
    }

    static float[][] mxfp4(int rows, int in, int tokens, Mxfp4.Codes codes, Workers pool) {
        SplittableRandom r = rng("mx" + rows + "x" + in);
        float[] x = activations(r, in * tokens);
        Mx m = mxfp4Bytes(r, rows, in, x);
        float[] ref = new float[rows * tokens], fast = new float[rows * tokens];
        Mxfp4.reference(ref, x, tokens, m.packed(), m.scales(), rows, in);
        Mxfp4.matmul(pool, fast, x, tokens, Mxfp4.repack(m.packed(), m.scales(), rows, in, codes));
        return new float[][] {ref, fast};
    }

    /** Mutant: the C peer's order (one sequential chain per group) instead of eight accumulators. */
    static float[][] mxfp4OneChainMutant() {
        int rows = 64, in = 512;
        SplittableRandom r = rng("mutant-mx");
        float[] x = activations(r, in);
        Mx m = mxfp4Bytes(r, rows, in, x);
        float[] ref = new float[rows], mutant = new float[rows];
        Mxfp4.reference(ref, x, 1, m.packed(), m.scales(), rows, in);
        float[] w = Mxfp4.dequant(m.packed(), m.scales(), rows, in);
        for (int o = 0; o < rows; o++) {
            double acc = 0.0;
            for (int g = 0; g < in / 32; g++) {
                float s = Mxfp4.scale(m.scales().getAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, (long) o * (in / 32) + g));
                if (s == 0.0f) continue;
                double part = 0.0;
                for (int k = 0; k < 32; k++) part = part + (double) x[g * 32 + k] * (double) (w[o * in + g * 32 + k] / s);
                acc = acc + part * s;
            }
            mutant[o] = (float) acc;
        }
        return new float[][] {ref, mutant};
    }

    /** Mutant: the table built without the scale (E2M1 values summed per group, the group's sum then scaled by FMA into the row). */
    static float[][] mxfp4UnscaledTableMutant() {
        int rows = 64, in = 512;
        SplittableRandom r = rng("mutant-mx2");
        float[] x = activations(r, in);
        Mx m = mxfp4Bytes(r, rows, in, x);
        float[] ref = new float[rows], mutant = new float[rows], a = new float[16];
        Mxfp4.reference(ref, x, 1, m.packed(), m.scales(), rows, in);
        float[] w = Mxfp4.dequant(m.packed(), m.scales(), rows, in);
        for (int o = 0; o < rows; o++) {
            float acc = 0.0f;
            for (int g = 0; g < in / 32; g++) {
                float s = Mxfp4.scale(m.scales().getAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, (long) o * (in / 32) + g));
                if (s == 0.0f) continue;
                java.util.Arrays.fill(a, 0.0f);
                for (int k = 0; k < 32; k++) a[k % 16] = Math.fma(w[o * in + g * 32 + k] / s, x[g * 32 + k], a[k % 16]);
                acc = Math.fma(MatVec.tree(a), s, acc);
            }
            mutant[o] = acc;
        }
        return new float[][] {ref, mutant};
    }

    /**
     * Mutant: a byte-255 group's weights taken as zeros and multiplied (0 · x) instead of skipped. An infinite
     * activation in such a group of row 0 makes the difference: 0 · Inf is NaN.
     */
    static float[][] mxfp4ZeroGroupMutant() {
        int rows = 13, in = 96;
        SplittableRandom r = rng("mutant-mx3");
        float[] x = activations(r, in);
        Mx m = mxfp4Bytes(r, rows, in, x);
        int ng = in / 32, g255 = -1;
        for (int g = 0; g < ng && g255 < 0; g++) {
            if ((m.scales().getAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, g) & 0xFF) == 255) g255 = g;
        }
        if (g255 < 0) {
            m.scales().setAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, 1, (byte) 255);
            g255 = 1;
        }
        x[g255 * 32 + 5] = Float.POSITIVE_INFINITY;
        float[] ref = new float[rows], mutant = new float[rows], a = new float[16];
        Mxfp4.reference(ref, x, 1, m.packed(), m.scales(), rows, in);
        float[] w = Mxfp4.dequant(m.packed(), m.scales(), rows, in); // a byte-255 group dequantises to zeros
        for (int o = 0; o < rows; o++) {
            java.util.Arrays.fill(a, 0.0f);
            for (int i = 0; i < in; i++) a[i % 16] = Math.fma(w[o * in + i], x[i], a[i % 16]);
            mutant[o] = MatVec.tree(a);
        }
        return new float[][] {ref, mutant};
    }

    static float[][] rmsnorm(int n) {
        SplittableRandom r = rng("rms" + n);
        float[] x = activations(r, 3 * n), w = activations(r, n), a = new float[3 * n], b = x.clone();
        Norms.rmsnormReference(a, x, w, 3, n, 1e-5f);
        Norms.rmsnorm(b, b, w, 3, n, 1e-5f);
        return new float[][] {a, b};
    }

    static float[][] l2norm(int n) {
        SplittableRandom r = rng("l2" + n);
        float[] x = activations(r, 3 * n), a = new float[3 * n], b = new float[3 * n];
        Norms.l2normReference(a, x, 3, n);
        Norms.l2norm(b, x, 3, n);
        return new float[][] {a, b};
    }

    static float[][] embedding(int n) {
        SplittableRandom r = rng("emb" + n);
        Matrix table = Matrix.bf16(bf16Weights(r, 5 * n), 5, n);
        float[] a = new float[2 * n], b = new float[2 * n];
        Embedding.rowReference(a, 0, table, 3);
        Embedding.rowReference(a, n, table, 0);
        Embedding.row(b, 0, table, 3);
        Embedding.row(b, n, table, 0);
        return new float[][] {a, b};
    }

    record KdaInputs(float[] q, float[] k, float[] v, float[] g, float[] beta, float[] state) {}

    static KdaInputs kdaInputs(int d, int heads, int tokens) {
        SplittableRandom r = rng("kda" + d);
        int p = heads * d;
        float[] q = activations(r, tokens * p), k = activations(r, tokens * p), v = activations(r, tokens * p);
        for (int i = 0; i < k.length; i += 5) k[i] = 0.0f;
        for (int i = 3; i < q.length; i += 7) q[i] = 0.0f;
        Norms.l2norm(q, q, tokens * heads, d);
        Norms.l2norm(k, k, tokens * heads, d);
        float[] g = new float[tokens * p];
        for (int i = 0; i < g.length; i++) g[i] = (float) (-5 * r.nextDouble());
        float[] beta = new float[tokens * heads];
        for (int i = 0; i < beta.length; i++) beta[i] = (float) r.nextDouble();
        float[] state = activations(r, heads * d * d);
        return new KdaInputs(q, k, v, g, beta, state);
    }

    static float[][] kda(int d, int heads, int tokens, Workers pool) {
        KdaInputs in = kdaInputs(d, heads, tokens);
        float[] sa = in.state().clone(), sb = in.state().clone();
        float[] oa = new float[tokens * heads * d], ob = new float[tokens * heads * d];
        Kda.recurrence(Workers.serial(), false, sa, oa, in.q(), in.k(), in.v(), in.g(), in.beta(), tokens, heads, d);
        Kda.recurrence(pool, true, sb, ob, in.q(), in.k(), in.v(), in.g(), in.beta(), tokens, heads, d);
        return new float[][] {concat(oa, sa), concat(ob, sb)};
    }

    /** Mutant: the reference step with the u accumulation fused into an FMA. */
    static float[][] kdaFmaMutant() {
        int d = 128, heads = 2, tokens = 3;
        KdaInputs in = kdaInputs(d, heads, tokens);
        float[] sa = in.state().clone(), sb = in.state().clone();
        float[] oa = new float[tokens * heads * d], ob = new float[tokens * heads * d];
        Kda.recurrence(Workers.serial(), false, sa, oa, in.q(), in.k(), in.v(), in.g(), in.beta(), tokens, heads, d);
        float qs = Kda.queryScale(d);
        int p = heads * d;
        for (int h = 0; h < heads; h++) {
            for (int t = 0; t < tokens; t++) {
                int off = t * p + h * d, so = h * d * d;
                float[] u = new float[d];
                for (int i = 0; i < d; i++) {
                    float a = Fp.exp(in.g()[off + i]);
                    for (int j = 0; j < d; j++) sb[so + i * d + j] *= a;
                }
                for (int i = 0; i < d; i++) {
                    float ki = in.k()[off + i];
                    if (ki != 0.0f) for (int j = 0; j < d; j++) u[j] = Math.fma(ki, sb[so + i * d + j], u[j]);
                }
                float b = in.beta()[t * heads + h];
                for (int i = 0; i < d; i++) {
                    float ki = in.k()[off + i];
                    if (ki != 0.0f) for (int j = 0; j < d; j++) sb[so + i * d + j] += (ki * b) * (in.v()[off + j] - u[j]);
                }
                for (int j = 0; j < d; j++) ob[off + j] = 0.0f;
                for (int i = 0; i < d; i++) {
                    float qi = in.q()[off + i] * qs;
                    if (qi != 0.0f) for (int j = 0; j < d; j++) ob[off + j] += qi * sb[so + i * d + j];
                }
            }
        }
        return new float[][] {concat(oa, sa), concat(ob, sb)};
    }

    static float[][] mla(int heads, int nope, int rope, int value, int p, Workers pool) {
        SplittableRandom r = rng("mla" + heads + nope + rope + value + p);
        MlaKv kv = new MlaKv(heads, nope, rope, value, p + 1);
        for (int s = 0; s <= p; s++) kv.put(s, activations(r, heads * (nope + value)), 0, activations(r, Math.max(rope, 1)), 0);
        float[] q = activations(r, heads * (nope + rope));
        float sc = MlaAttention.scale(nope, rope);
        float[] a = new float[heads * value], b = new float[heads * value];
        MlaAttention.attend(Workers.serial(), false, a, 0, q, 0, kv, p, sc);
        MlaAttention.attend(pool, true, b, 0, q, 0, kv, p, sc);
        return new float[][] {a, b};
    }

    static float[][] attnRes(int sources, int n) {
        SplittableRandom r = rng("ar" + sources + "x" + n);
        int tokens = 2;
        float[][] src = new float[sources][];
        for (int s = 0; s < sources; s++) src[s] = activations(r, tokens * n);
        float[] fold = AttnRes.fold(activations(r, n), activations(r, n));
        float[] a = new float[tokens * n], b = new float[tokens * n];
        AttnRes.mixReference(a, src, tokens, n, fold, 1e-5f);
        AttnRes.mix(b, src, tokens, n, fold, 1e-5f);
        return new float[][] {a, b};
    }

    static float[][] router(int experts, int width, int k, Workers pool) {
        SplittableRandom r = rng("router" + experts + "x" + width);
        int tokens = 3;
        Matrix wg = Matrix.bf16(bf16Weights(r, experts * width), experts, width);
        float[] x = activations(r, tokens * width), bias = activations(r, experts);
        bias[4] = bias[7];
        int[] ia = new int[tokens * k], ib = new int[tokens * k];
        float[] wa = new float[tokens * k], wb = new float[tokens * k];
        Router.route(Workers.serial(), false, ia, wa, x, tokens, wg, bias, k, true, 2.5f);
        Router.route(pool, true, ib, wb, x, tokens, wg, bias, k, true, 2.5f);
        float[] fa = new float[2 * ia.length], fb = new float[2 * ib.length];
        for (int i = 0; i < ia.length; i++) {
            fa[i] = ia[i];
            fb[i] = ib[i];
            fa[ia.length + i] = wa[i];
            fb[ia.length + i] = wb[i];
        }
        return new float[][] {fa, fb};
    }

    /**
     * Mutant: the router as before the double score (the logit rounded to float, a float sigmoid, a float inverse sum
     * multiplied in, then the scaling), for the experts the router picked; logits of magnitude 4-12, where the float
     * logit costs several ulps of the score.
     */
    static float[][] routerFloatLogitMutant() {
        SplittableRandom r = rng("mutant-router");
        int experts = 16, width = 64, k = 4, tokens = 3;
        short[] w = new short[experts * width];   // weights of magnitude 0.5-2: logits of several units
        for (int i = 0; i < w.length; i++) w[i] = (short) ((r.nextInt(2) << 15) | ((126 + r.nextInt(2)) << 7) | r.nextInt(128));
        Matrix wg = Matrix.bf16(w, experts, width);
        float[] x = activations(r, tokens * width);
        int[] idx = new int[tokens * k];
        float[] got = new float[tokens * k], old = new float[tokens * k];
        Router.route(Workers.serial(), false, idx, got, x, tokens, wg, null, k, true, 2.5f);
        for (int t = 0; t < tokens; t++) {
            double sum = 0.0;
            for (int j = 0; j < k; j++) {
                int e = idx[t * k + j];
                double acc = 0.0;
                for (int i = 0; i < width; i++) acc = acc + (double) wg.get(e, i) * (double) x[t * width + i];
                old[t * k + j] = Fp.sigmoid((float) acc);
                sum = sum + (double) old[t * k + j];
            }
            float inv = (float) (1.0 / (sum + 1e-20));
            for (int j = 0; j < k; j++) old[t * k + j] = (old[t * k + j] * inv) * 2.5f;
        }
        return new float[][] {got, old};
    }

    static float[][] argmax(int n) {
        SplittableRandom r = rng("argmax" + n);
        float[][] inputs = new float[5][];
        inputs[0] = activations(r, n);
        inputs[1] = new float[n];
        java.util.Arrays.fill(inputs[1], Float.NEGATIVE_INFINITY);
        inputs[2] = new float[n];
        java.util.Arrays.fill(inputs[2], Float.NaN);
        inputs[3] = activations(r, n);
        inputs[3][n - 1] = 3.0f;
        inputs[3][n / 2] = 3.0f;
        inputs[3][0] = Float.NaN;
        inputs[4] = new float[n];
        for (int i = 0; i < n; i++) inputs[4][i] = (i % 3 == 0) ? Float.NaN : 1.0f;
        float[] a = new float[5], b = new float[5];
        for (int i = 0; i < 5; i++) {
            a[i] = Argmax.reference(inputs[i], 0, n);
            b[i] = Argmax.fast(inputs[i], 0, n);
        }
        return new float[][] {a, b};
    }

    static float[] concat(float[] a, float[] b) {
        float[] c = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }
}
