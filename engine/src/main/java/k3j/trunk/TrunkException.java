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
    private final boolean corrupt;

    public TrunkException(Path file, int layer, String detail) {
        this(file, layer, detail, null);
    }

    public TrunkException(Path file, int layer, String detail, Throwable cause) {
        this(file, layer, detail, cause, cause instanceof TrunkException t && t.corrupt);
    }

    private TrunkException(Path file, int layer, String detail, Throwable cause, boolean corrupt) {
        super(file + ": " + (layer == NO_LAYER ? "" : "layer " + layer + ": ") + detail, cause);
        this.file = file;
        this.layer = layer;
        this.corrupt = corrupt;
    }

    /** Bytes that arrived but are not the packed ones (a CRC-32C mismatch): the run is invalid, not merely failed. */
    public static TrunkException corrupt(Path file, int layer, String detail) {
        return new TrunkException(file, layer, detail, null, true);
    }

    /** Whether this (or the failure it wraps) is {@link #corrupt}. */
    public boolean corrupt() {
        return corrupt;
    }

    public Path file() {
        return file;
    }

    /** The layer at fault, or {@link #NO_LAYER}. */
    public int layer() {
        return layer;
    }
}
