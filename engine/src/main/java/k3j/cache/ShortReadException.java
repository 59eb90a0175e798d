package k3j.cache;

import java.io.IOException;

/** Fewer bytes arrived than the expert needs: the slot must not be published (pitfall 15). */
public final class ShortReadException extends IOException {
    public ShortReadException(String message) {
        super(message);
    }
}
