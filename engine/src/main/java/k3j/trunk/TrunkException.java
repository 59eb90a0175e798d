package k3j.trunk;

import java.nio.file.Path;

/**
 * A trunk that cannot be packed, opened or read as it claims: names the file, the layer (when one is
 * at fault) and what is wrong. The message reads {@code FILE: layer L: DETAIL}. A failed read is
 * always this exception: the forward fails and the run exits non-zero (docs/semantics.md §5.5).
 */
public final class TrunkException extends RuntimeException {
    /** No layer at fault: the file's, or the manifest's as a whole. */
    public static final int NO_LAYER = -1;

    private final Path file;
    private final int layer;

    public TrunkException(Path file, int layer, String detail) {
        this(file, layer, detail, null);
    }

    public TrunkException(Path file, int layer, String detail, Throwable cause) {
        super(file + ": " + (layer == NO_LAYER ? "" : "layer " + layer + ": ") + detail, cause);
        this.file = file;
        this.layer = layer;
    }

    public Path file() {
        return file;
    }

    /** The layer at fault, or {@link #NO_LAYER}. */
    public int layer() {
        return layer;
    }
}
