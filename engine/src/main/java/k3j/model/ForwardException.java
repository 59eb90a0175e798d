package k3j.model;

/** A forward pass that must not be argmaxed: a dropped routed expert, a KV cache overflow. */
public class ForwardException extends RuntimeException {
    public ForwardException(String message) {
        super(message);
    }
}
