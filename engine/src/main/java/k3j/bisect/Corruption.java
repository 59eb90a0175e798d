package k3j.bisect;

import java.util.List;
import java.util.Locale;

/**
 * One corruption {@link Corruptions} writes into a checkpoint copy: data only, every header stays as it was
 * (so the copy still binds, and still matches the reference dump's header hashes). Tensors are named by
 * their suffix after {@code language_model.model.layers.<L>.}. The text form ({@link #spec()}) is what
 * {@code k3 corrupt --corruption} takes.
 */
public sealed interface Corruption {
    int layer();

    /** "swap:37:self_attn.q_proj.weight,self_attn.k_proj.weight" */
    String spec();

    /** Two same-shape, same-dtype tensors exchange their bytes. */
    record Swap(int layer, String a, String b) implements Corruption {
        @Override
        public String spec() {
            return "swap:" + layer + ":" + a + "," + b;
        }
    }

    /** Every packed byte (w1, w2, w3) of one routed expert holds its two FP4 elements in the other nibble order. */
    record NibbleFlip(int layer, int expert) implements Corruption {
        @Override
        public String spec() {
            return "nibbles:" + layer + ":" + expert;
        }
    }

    /** Elements {@code from} .. end of a float tensor are set to {@code value} (e.g. A_log's padding tail). */
    record Fill(int layer, String tensor, long from, float value) implements Corruption {
        @Override
        public String spec() {
            return "fill:" + layer + ":" + tensor + ":" + from + ":" + fmt(value);
        }
    }

    /** Every element of a float tensor multiplied by {@code factor} (re-rounded to the tensor's dtype). */
    record Scale(int layer, String tensor, float factor) implements Corruption {
        @Override
        public String spec() {
            return "scale:" + layer + ":" + tensor + ":" + fmt(factor);
        }
    }

    /** A 2-D tensor [r][c] rewritten to hold its transpose's bytes (row-major [c][r]) under the same header. */
    record Transpose(int layer, String tensor) implements Corruption {
        @Override
        public String spec() {
            return "transpose:" + layer + ":" + tensor;
        }
    }

    /**
     * One byte of one routed expert's tensor XORed with {@code mask}: on a {@code weight_scale} tensor (E8M0) mask 1
     * halves or doubles a group of 32 weights; on {@code weight_packed} it changes one or two FP4 elements.
     * {@code part} is "w1_packed", "w1_scale", ... "w3_scale".
     */
    record ExpertByte(int layer, int expert, String part, long index, int mask) implements Corruption {
        public ExpertByte {
            expertTensor(expert, part);
            if (mask < 1 || mask > 255) throw new BisectException("byte mask " + mask + " is outside 1..255");
        }

        @Override
        public String spec() {
            return "byte:" + layer + ":" + expert + ":" + part + ":" + index + ":" + mask;
        }
    }

    /** Row {@code row} of one routed expert's packed matrix holds row {@code row + 1}'s bytes (the last row: row 0's), scales untouched. */
    record ExpertRow(int layer, int expert, String matrix, int row) implements Corruption {
        public ExpertRow {
            expertTensor(expert, matrix + "_packed");
        }

        @Override
        public String spec() {
            return "row:" + layer + ":" + expert + ":" + matrix + ":" + row;
        }
    }

    /** "w1_scale" → "block_sparse_moe.experts.6.w1.weight_scale". */
    static String expertTensor(int expert, String part) {
        String[] p = part.split("_");
        if (p.length != 2 || !List.of("w1", "w2", "w3").contains(p[0]) || !List.of("packed", "scale").contains(p[1])) {
            throw new BisectException("expert part '" + part + "': expected w1|w2|w3 followed by _packed or _scale");
        }
        return "block_sparse_moe.experts." + expert + "." + p[0] + ".weight_" + p[1];
    }

    /** Parses {@link #spec()}'s form; a malformed spec is an error quoting it and naming the field that is wrong. */
    static Corruption parse(String spec) {
        String[] p = spec.split(":", -1);
        String form = FORMS.stream().filter(f -> f.startsWith(p[0] + ":")).findFirst().orElse(null);
        if (form == null || p.length < 2) throw new BisectException("bad corruption '" + spec + "': expected one of " + String.join(" | ", FORMS));
        if (p.length != form.split(":").length) throw new BisectException("bad corruption '" + spec + "': " + p[0] + " takes " + form);
        SpecFields f = new SpecFields(spec, form.split(":"), p);
        int layer = f.integer(1);
        return switch (p[0]) {
            case "swap" -> {
                String[] ab = p[2].split(",");
                if (ab.length != 2 || ab[0].isEmpty() || ab[1].isEmpty()) throw f.bad(2, "two tensor names separated by a comma");
                yield new Swap(layer, ab[0], ab[1]);
            }
            case "nibbles" -> new NibbleFlip(layer, f.integer(2));
            case "fill" -> new Fill(layer, p[2], f.whole(3), f.decimal(4));
            case "scale" -> new Scale(layer, p[2], f.decimal(3));
            case "transpose" -> new Transpose(layer, p[2]);
            case "byte" -> new ExpertByte(layer, f.integer(2), p[3], f.whole(4), f.mask(5));
            case "row" -> new ExpertRow(layer, f.integer(2), p[3], f.integer(4));
            default -> throw new IllegalStateException(p[0]);
        };
    }

    List<String> FORMS = List.of("swap:L:A,B", "nibbles:L:EXPERT", "fill:L:TENSOR:FROM:VALUE", "scale:L:TENSOR:FACTOR", "transpose:L:TENSOR",
            "byte:L:EXPERT:PART:INDEX:MASK", "row:L:EXPERT:MATRIX:ROW");

    private static String fmt(float v) {
        return v == Math.rint(v) && Math.abs(v) < 1e6 ? String.valueOf((long) v) : String.format(Locale.ROOT, "%s", v);
    }
}
