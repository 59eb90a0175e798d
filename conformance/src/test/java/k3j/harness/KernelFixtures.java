package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.kernels.Activations;
import k3j.kernels.AttnRes;
import k3j.kernels.Kda;
import k3j.kernels.Layers;
import k3j.kernels.Matrix;
import k3j.kernels.MatVec;
import k3j.kernels.MlaKv;
import k3j.kernels.Mxfp4;
import k3j.kernels.Norms;
import k3j.kernels.Router;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.LayerTensor;
import k3j.model.Mlp;
import k3j.model.ModelWeights;
import k3j.model.WeightLoader;

/**
 * The kernel fixtures of oracle-fixtures/ops (format k3j-ops/1, see OPS-FORMAT): reading them (a missing,
 * short or corrupt file FAILS, naming it) and running one through a kernel path. Shared by KernelGate and
 * the interpreter-determinism check.
 */
public final class KernelFixtures {
    private KernelFixtures() {}

    public static final String MANIFEST = "ops/MANIFEST.json";

    /** One manifest entry. */
    public record Fixture(String name, String kernel, String level, JsonNode node) {
        @Override
        public String toString() {
            return name;
        }

        public JsonNode params() {
            return node.path("params");
        }

        public int i(String p) {
            JsonNode v = params().get(p);
            if (v == null || !v.isNumber()) fail(name + ": param '" + p + "' missing or not a number");
            return v.intValue();
        }

        public float f(String p) {
            JsonNode v = params().get(p);
            if (v == null || !v.isNumber()) fail(name + ": param '" + p + "' missing or not a number");
            return (float) v.doubleValue();
        }

        public boolean b(String p) {
            JsonNode v = params().get(p);
            if (v == null || !v.isBoolean()) fail(name + ": param '" + p + "' missing or not a boolean");
            return v.booleanValue();
        }

        public boolean hasInput(String n) {
            return node.path("inputs").has(n);
        }

        public Array in(String n) {
            return read(this, "inputs", n);
        }

        public Array want(String n) {
            return read(this, "outputs", n);
        }

        public List<String> outputs() {
            List<String> l = new ArrayList<>();
            node.path("outputs").fieldNames().forEachRemaining(l::add);
            if (l.isEmpty()) fail(name + ": no outputs in the manifest, so nothing to compare");
            return l;
        }

        /** {atol, rtol} for an output, or null when the output must be exact. */
        public double[] tolerance(String output) {
            JsonNode t = node.path("tolerance");
            if (t.has(output)) t = t.get(output);
            if (t.path("exact").asBoolean(false)) return null;
            if (!t.has("atol") || !t.has("rtol")) fail(name + ": no tolerance for output '" + output + "' in the manifest");
            return new double[] {t.get("atol").doubleValue(), t.get("rtol").doubleValue()};
        }
    }

    /** A raw array as stored: bytes plus dtype and shape. */
    public record Array(String what, String dtype, int[] shape, byte[] bytes) {
        public int count() {
            int n = 1;
            for (int s : shape) n *= s;
            return n;
        }

        public ByteBuffer buf() {
            return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        }

        public float[] f32() {
            if (!dtype.equals("f32")) fail(what + ": dtype " + dtype + ", expected f32");
            float[] f = new float[count()];
            buf().asFloatBuffer().get(f);
            return f;
        }

        /** bf16 or f32, widened to float. */
        public float[] floats() {
            if (dtype.equals("f32")) return f32();
            if (!dtype.equals("bf16")) fail(what + ": dtype " + dtype + ", expected bf16 or f32");
            float[] f = new float[count()];
            ByteBuffer b = buf();
            for (int i = 0; i < f.length; i++) f[i] = k3j.kernels.Fp.bf16(b.getShort(2 * i));
            return f;
        }

        public double[] f64() {
            double[] d = new double[count()];
            if (dtype.equals("f64")) buf().asDoubleBuffer().get(d);
            else if (dtype.equals("i32")) {
                ByteBuffer b = buf();
                for (int i = 0; i < d.length; i++) d[i] = b.getInt(4 * i);
            } else fail(what + ": dtype " + dtype + ", expected f64 or i32");
            return d;
        }

        /** A weight matrix [rows][cols] where rows = shape[0] and cols = the rest (conv [P,1,k] → [P][k]). */
        public Matrix matrix() {
            int rows = shape.length == 1 ? 1 : shape[0], cols = count() / rows;
            MemorySegment seg = MemorySegment.ofArray(bytes.clone());
            return switch (dtype) {
                case "bf16" -> new Matrix(seg, k3j.kernels.WeightType.BF16, rows, cols);
                case "f32" -> new Matrix(seg, k3j.kernels.WeightType.F32, rows, cols);
                default -> fail(what + ": dtype " + dtype + " is not a dense weight type");
            };
        }

        public MemorySegment u8() {
            if (!dtype.equals("u8")) fail(what + ": dtype " + dtype + ", expected u8");
            return MemorySegment.ofArray(bytes.clone());
        }
    }

    public static List<Fixture> all() {
        JsonNode m = Project.json(Project.fixture(MANIFEST));
        if (!"k3j-ops/1".equals(m.path("format").asText())) fail(MANIFEST + ": format '" + m.path("format").asText() + "', expected k3j-ops/1");
        List<Fixture> l = new ArrayList<>();
        for (JsonNode f : m.path("fixtures")) {
            Fixture fx = new Fixture(f.path("name").asText(), f.path("kernel").asText(), f.path("level").asText(), f);
            if (!fx.level().equals("kernel") && !fx.level().equals("layer")) fail(MANIFEST + ": fixture '" + fx.name() + "' has level '" + fx.level() + "' (kernel or layer)");
            l.add(fx);
        }
        if (l.isEmpty()) fail(MANIFEST + " lists no fixtures");
        return l;
    }

    public static List<Fixture> kernelLevel() {
        return all().stream().filter(f -> f.level().equals("kernel")).toList();
    }

    public static Array read(Fixture fx, String side, String name) {
        JsonNode a = fx.node().path(side).get(name);
        if (a == null) return fail(fx.name() + ": " + side + " '" + name + "' not in the manifest");
        Path p = Project.fixture("ops/" + a.path("file").asText());
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(p);
        } catch (IOException e) {
            return fail("cannot read " + p + ": " + e.getMessage());
        }
        int[] shape = new int[a.path("shape").size()];
        for (int i = 0; i < shape.length; i++) shape[i] = a.path("shape").get(i).intValue();
        String dtype = a.path("dtype").asText();
        int size = switch (dtype) {
            case "f32", "i32" -> 4;
            case "f64" -> 8;
            case "bf16" -> 2;
            case "u8" -> 1;
            default -> fail(p + ": unknown dtype '" + dtype + "'");
        };
        Array arr = new Array(fx.name() + "/" + name, dtype, shape, bytes);
        if ((long) arr.count() * size != bytes.length) fail(p + ": " + bytes.length + " bytes, shape " + java.util.Arrays.toString(shape) + " " + dtype + " needs " + (long) arr.count() * size);
        String sha = a.path("sha256").asText("");
        if (sha.isEmpty()) fail(fx.name() + ": " + side + " '" + name + "' has no sha256 in the manifest");
        if (!sha.equals(sha256(bytes))) fail(p + ": sha256 differs from the manifest (corrupt or stale fixture)");
        return arr;
    }

    public static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public static double[] widen(float[] f) {
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) d[i] = f[i];
        return d;
    }

    public static double[] widen(int[] v) {
        double[] d = new double[v.length];
        for (int i = 0; i < v.length; i++) d[i] = v[i];
        return d;
    }

    /** Runs a fixture through one path; returns its outputs by manifest name (as double). */
    public static Map<String, double[]> run(Fixture fx, boolean fast, Workers w) {
        Map<String, double[]> out = new LinkedHashMap<>();
        switch (fx.kernel()) {
            case "rmsnorm" -> {
                int n = fx.i("n");
                float[] x = fx.in("x").f32(), y = new float[x.length];
                if (fast) Norms.rmsnorm(y, x, fx.in("w").floats(), x.length / n, n, fx.f("eps"));
                else Norms.rmsnormReference(y, x, fx.in("w").floats(), x.length / n, n, fx.f("eps"));
                out.put("y", widen(y));
            }
            case "l2norm" -> {
                int n = fx.i("n");
                if (fx.f("eps") != Norms.L2_EPS) fail(fx.name() + ": l2norm eps " + fx.f("eps") + ", the contract hard-codes 1e-6");
                float[] x = fx.in("x").f32(), y = new float[x.length];
                if (fast) Norms.l2norm(y, x, x.length / n, n);
                else Norms.l2normReference(y, x, x.length / n, n);
                out.put("y", widen(y));
            }
            case "matvec" -> {
                Matrix m = fx.in("w").matrix();
                float[] x = fx.in("x").f32();
                int tokens = x.length / m.cols();
                float[] y = new float[tokens * m.rows()];
                if (fast) MatVec.matmul(w, y, x, tokens, m);
                else MatVec.reference(y, x, tokens, m);
                out.put("y", widen(y));
            }
            case "mxfp4_dequant" -> {
                int rows = fx.i("rows"), in = fx.i("in");
                MemorySegment p = fx.in("packed").u8(), s = fx.in("scales").u8();
                out.put("w", widen(fast ? Mxfp4.dequant(Mxfp4.repack(p, s, rows, in)) : Mxfp4.dequant(p, s, rows, in)));
            }
            case "mxfp4_matvec" -> {
                int rows = fx.i("rows"), in = fx.i("in");
                MemorySegment p = fx.in("packed").u8(), s = fx.in("scales").u8();
                float[] x = fx.in("x").f32();
                int tokens = x.length / in;
                float[] y = new float[tokens * rows];
                if (fast) Mxfp4.matmul(w, y, x, tokens, Mxfp4.repack(p, s, rows, in));
                else Mxfp4.reference(y, x, tokens, p, s, rows, in);
                out.put("y", widen(y));
            }
            case "situ_glu" -> {
                float[] g = fx.in("gate").f32(), u = fx.in("up").f32(), y = new float[g.length];
                Activations.situGlu(y, g, u, g.length, fx.f("beta"), fx.f("linear_beta"));
                out.put("y", widen(y));
            }
            case "short_conv" -> {
                int ch = fx.i("channels"), k = fx.i("kernel");
                float[] x = fx.in("x").f32(), state = fx.in("state_in").f32(), y = new float[x.length];
                Activations.shortConv(y, x, fx.in("w").floats(), state, ch, k, x.length / ch);
                out.put("y", widen(y));
                out.put("state_out", widen(state));
            }
            case "kda_gate" -> {
                int h = fx.i("heads"), d = fx.i("head_dim");
                float[] graw = fx.in("graw").f32(), g = new float[graw.length];
                Activations.kdaGate(g, graw, fx.in("a_log").f32(), fx.in("dt_bias").f32(), h, d, fx.f("lower_bound"), graw.length / (h * d));
                out.put("g", widen(g));
            }
            case "kda_recurrence" -> {
                int h = fx.i("heads"), d = fx.i("head_dim");
                float[] q = fx.in("q").f32(), state = fx.in("state_in").f32(), o = new float[q.length];
                Kda.recurrence(w, fast, state, o, q, fx.in("k").f32(), fx.in("v").f32(), fx.in("g").f32(), fx.in("beta").f32(), q.length / (h * d), h, d);
                out.put("o", widen(o));
                out.put("state_out", widen(state));
            }
            case "router" -> {
                int k = fx.i("top_k");
                Matrix g = fx.in("gate_w").matrix();
                float[] x = fx.in("x").f32();
                int tokens = x.length / g.cols();
                int[] idx = new int[tokens * k];
                float[] wt = new float[tokens * k];
                Router.route(w, fast, idx, wt, x, tokens, g, fx.hasInput("bias") ? fx.in("bias").f32() : null, k, fx.b("renormalize"), fx.f("scaling"));
                out.put("indices", widen(idx));
                out.put("weights", widen(wt));
            }
            case "attn_res" -> {
                Array src = fx.in("sources");
                int ns = src.shape()[0], tokens = src.shape()[1], n = src.shape()[2];
                float[] all = src.f32();
                float[][] s = new float[ns][];
                for (int i = 0; i < ns; i++) s[i] = java.util.Arrays.copyOfRange(all, i * tokens * n, (i + 1) * tokens * n);
                float[] fold = AttnRes.fold(fx.in("norm_w").floats(), fx.in("proj_w").floats()), y = new float[tokens * n];
                if (fast) AttnRes.mix(y, s, tokens, n, fold, fx.f("eps"));
                else AttnRes.mixReference(y, s, tokens, n, fold, fx.f("eps"));
                out.put("y", widen(y));
            }
            case "dense_mlp" -> {
                float[] x = fx.in("x").f32();
                Layers.MlpWeights m = WeightLoader.dense(FixtureWeights.tensors(fx), fx.f("beta"), fx.f("linear_beta"));
                int e = m.gate().cols();
                float[] y = new float[x.length / e * m.down().rows()];
                Layers.mlp(w, fast, y, x, x.length / e, m);
                out.put("y", widen(y));
            }
            case "kda_layer" -> {
                Layers.KdaWeights l = WeightLoader.kda(FixtureWeights.tensors(fx), fx.i("heads"), fx.i("head_dim"), fx.i("conv_kernel"),
                        fx.f("lower_bound"), fx.f("rms_eps"));
                Layers.KdaState st = new Layers.KdaState(fx.in("recurrent_state_in").f32(), fx.in("q_conv_state_in").f32(),
                        fx.in("k_conv_state_in").f32(), fx.in("v_conv_state_in").f32());
                float[] x = fx.in("x").f32();
                int e = l.q().cols(), tokens = x.length / e;
                float[] y = new float[tokens * l.o().rows()];
                Layers.kda(w, fast, y, x, tokens, l, st);
                out.put("out", widen(y));
                out.put("recurrent_state_out", widen(st.recurrent()));
                out.put("q_conv_state_out", widen(st.qConv()));
                out.put("k_conv_state_out", widen(st.kConv()));
                out.put("v_conv_state_out", widen(st.vConv()));
            }
            case "mla_layer" -> {
                Layers.MlaWeights l = WeightLoader.mla(FixtureWeights.tensors(fx), fx.i("heads"), fx.i("qk_nope"), fx.i("qk_rope"), fx.i("v_head"),
                        fx.hasInput(LayerTensor.MLA_G.suffix()));
                if (l.kvaNorm().length != fx.i("kv_lora") || l.qa().rows() != fx.i("q_lora")) fail(fx.name() + ": LoRA ranks disagree with the tensors");
                float[] x = fx.in("x").f32();
                int e = l.qa().cols(), tokens = x.length / e;
                float[] y = new float[tokens * l.o().rows()];
                Layers.mla(w, fast, y, x, tokens, l, new MlaKv(l.heads(), l.nope(), l.rope(), l.value(), tokens), 0);
                out.put("out", widen(y));
            }
            case "latent_moe" -> {
                // the production LatentMoE (Forward.moe, batched over the union of selected experts); it has one path,
                // so the "reference" run is the same code. The fixture's reference applies the latent norm.
                Mlp.LatentMoe m = WeightLoader.latentMoe(FixtureWeights.tensors(fx), new WeightLoader.MoeParams(fx.i("experts"), fx.i("top_k"),
                        fx.i("latent"), fx.i("moe_inter"), fx.b("renormalize"), true, fx.f("scaling"), fx.f("rms_eps"), fx.f("beta"), fx.f("linear_beta")));
                float[] x = fx.in("x").f32();
                int e = m.gate().cols(), tokens = x.length / e, k = m.topK();
                float[] y = new float[tokens * e], wt = new float[tokens * k];
                int[] idx = new int[tokens * k];
                new Forward(new ModelWeights(null, null, List.of(), null, null, null), FixtureWeights.experts(fx, 0), w).moe(0, m, y, idx, wt, x, tokens);
                out.put("y", widen(y));
                out.put("indices", widen(idx));
                out.put("weights", widen(wt));
            }
            default -> fail(fx.name() + ": kernel '" + fx.kernel() + "' is not known to the kernel gate (add it, never skip it)");
        }
        for (String o : fx.outputs()) if (!out.containsKey(o)) fail(fx.name() + ": the kernel produced no output '" + o + "'");
        return out;
    }

    /** A digest of every output's bits (for the interpreter comparison). */
    public static String digest(Map<String, double[]> outputs) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            for (var e : outputs.entrySet()) {
                md.update(e.getKey().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                ByteBuffer b = ByteBuffer.allocate(8 * e.getValue().length);
                for (double d : e.getValue()) b.putLong(Double.doubleToRawLongBits(d));
                md.update(b.array());
            }
            return HexFormat.of().formatHex(md.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Prints "fixture path digest" lines for every kernel-level fixture, both paths: the child JVM's entry point. */
    public static void main(String[] args) {
        try (Workers w = Workers.of(2)) {
            for (Fixture fx : kernelLevel()) {
                System.out.println(fx.name() + " reference " + digest(run(fx, false, Workers.serial())));
                System.out.println(fx.name() + " fast " + digest(run(fx, true, w)));
            }
        }
    }
}
