package k3j.model;

import java.util.List;

/**
 * The checkpoint does not provide what the model needs: a missing tensor, a wrong shape or dtype, an expert
 * whose six tensors do not fit together. One exception lists every layer that cannot bind (a partial
 * download is reported whole, not one tensor at a time).
 */
public final class BindException extends RuntimeException {
    private final List<Integer> layers;
    private final List<String> problems;

    public BindException(String summary, List<Integer> layers, List<String> problems) {
        super(summary + (problems.isEmpty() ? "" : ":\n  " + String.join("\n  ", problems)));
        this.layers = List.copyOf(layers);
        this.problems = List.copyOf(problems);
    }

    /** The zero-based layers that cannot bind (empty when only model-level tensors are at fault). */
    public List<Integer> layers() {
        return layers;
    }

    /** Every problem found, one line each, naming the tensor, what was found and what was expected. */
    public List<String> problems() {
        return problems;
    }
}
