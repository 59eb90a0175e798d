package k3j.bisect;

import java.util.List;
import java.util.stream.Collectors;
import k3j.cache.ExpertPart;
import k3j.model.LayerTensor;

/**
 * One mix-up of a layer's weights that bisect tries: if re-running the failing layer with it applied makes
 * the failing stage pass, the checkpoint (or the binding) has exactly this mix-up. Tensors are named by
 * their suffix after {@code layers.<L>.}.
 */
public sealed interface Candidate {
    /** "q_proj and k_proj are swapped": the sentence the verdict prints. */
    String describe();

    /** The layer suffixes whose values this candidate changes (experts: {@code block_sparse_moe.experts.<M>.}). */
    List<String> touches();

    /** Whether re-running {@code stage} could see this candidate: it changes a tensor the stage reads. */
    default boolean reaches(Stage stage) {
        return touches().stream().anyMatch(stage::reads);
    }

    /** Two tensors of the same shape and dtype hold each other's values. */
    record Swap(String a, String b) implements Candidate {
        @Override
        public String describe() {
            return shortName(a) + " and " + shortName(b) + " are swapped";
        }

        @Override
        public List<String> touches() {
            return List.of(a, b);
        }
    }

    /**
     * A 2-D tensor [r][c] holds its transpose: its bytes are the row-major [c][r] matrix (a converter that
     * transposed the data and kept the shape; for a square matrix, an ordinary missing transpose).
     */
    record Transpose(String tensor) implements Candidate {
        @Override
        public String describe() {
            return shortName(tensor) + " is stored transposed";
        }

        @Override
        public List<String> touches() {
            return List.of(tensor);
        }
    }

    /** The packed FP4 bytes of these parts of one routed expert hold their two elements in the other nibble order. */
    record NibbleFlip(int expert, List<ExpertPart> parts) implements Candidate {
        @Override
        public String describe() {
            return "expert " + expert + "'s nibble order is flipped ("
                    + parts.stream().map(p -> p.name().toLowerCase().replace("_packed", "")).collect(Collectors.joining(", ")) + ")";
        }

        @Override
        public List<String> touches() {
            return List.of(LayerTensor.expert(expert));
        }
    }

    /** One routed expert's gate (w1) and up (w3) projections hold each other's packed bytes and scales. */
    record GateUpSwap(int expert) implements Candidate {
        @Override
        public String describe() {
            return "expert " + expert + "'s w1 and w3 are swapped";
        }

        @Override
        public List<String> touches() {
            return List.of(LayerTensor.expert(expert));
        }
    }

    /** Two routed experts of the layer hold each other's six tensors (an expert-id mix-up). */
    record ExpertSwap(int a, int b) implements Candidate {
        @Override
        public String describe() {
            return "experts " + a + " and " + b + " are swapped";
        }

        @Override
        public List<String> touches() {
            return List.of(LayerTensor.expert(a), LayerTensor.expert(b));
        }
    }

    /** {@code self_attn.q_proj.weight} → {@code q_proj}; {@code mlp_res_norm.weight} → {@code mlp_res_norm}. */
    static String shortName(String suffix) {
        String s = suffix.endsWith(".weight") ? suffix.substring(0, suffix.length() - ".weight".length()) : suffix;
        for (String p : List.of("self_attn.", "block_sparse_moe.", "mlp.")) if (s.startsWith(p)) return s.substring(p.length());
        return s;
    }
}
