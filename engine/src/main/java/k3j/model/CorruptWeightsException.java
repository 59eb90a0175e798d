package k3j.model;

/**
 * The bytes under the forward are not the bytes that were indexed or packed: a trunk layer whose CRC-32C
 * differs from its manifest, a shard that shrank under its memory map. Whatever the forward would compute
 * is corrupt, so the run is INVALID (exit 4), like an expert drop, and no further token is produced.
 */
public final class CorruptWeightsException extends ForwardException {
    public CorruptWeightsException(String message) {
        super(message);
    }
}
