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

    /** The family this candidate belongs to (what the evidence ranks before any candidate runs). */
    default Family family() {
        return switch (this) {
            case Swap s -> Family.SAME_SHAPE_SWAP;
            case Transpose t -> Family.STORED_TRANSPOSE;
            case NibbleFlip f -> Family.EXPERT_NIBBLE_FLIP;
            case GateUpSwap g -> Family.EXPERT_W1_W3_SWAP;
            case ExpertSwap x -> Family.EXPERT_SWAP;
        };
    }

    /** The routed experts this candidate rewrites (empty for a dense tensor's). */
    default List<Integer> experts() {
        return switch (this) {
            case NibbleFlip f -> List.of(f.expert());
            case GateUpSwap g -> List.of(g.expert());
            case ExpertSwap x -> List.of(x.a(), x.b());
            case Swap s -> List.of();
            case Transpose t -> List.of();
        };
    }

    /** The kinds of mix-up bisect tries, dense first in table order; {@link Triage} orders them per failing layer. */
    enum Family {
        SAME_SHAPE_SWAP("same-shape swaps", false),
        STORED_TRANSPOSE("stored transposes", false),
        EXPERT_NIBBLE_FLIP("expert nibble flips", true),
        EXPERT_W1_W3_SWAP("expert w1/w3 swaps", true),
        EXPERT_SWAP("expert swaps", true);

        public final String plural;
        public final boolean routed;

        Family(String plural, boolean routed) {
            this.plural = plural;
            this.routed = routed;
        }
    }

    /** Whether re-running {@code stage} could see this candidate: it changes a tensor the stage reads. */
    default boolean reaches(FaultStage stage) {
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
