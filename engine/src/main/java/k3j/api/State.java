package k3j.api;

import java.util.Arrays;
import k3j.model.DecodeState;

/**
 * An incremental state and the ids it follows: the state has absorbed the first {@link #positions()} of
 * {@link #ids()}; the rest (the last generated id) are fed first by the next generation that continues it.
 * Returned by {@link Engine#generate} and {@link Engine#loadState}, written by {@link Engine#saveState}.
 */
public final class State {
    private final int[] ids;
    private final DecodeState decode;

    State(int[] ids, DecodeState decode) {
        if (decode.cached() > ids.length) throw new IllegalArgumentException("the state holds " + decode.cached() + " positions for " + ids.length + " ids");
        this.ids = ids.clone();
        this.decode = decode;
    }

    DecodeState decode() {
        return decode;
    }

    /** {@return every id the state follows, absorbed or pending (a copy)} */
    public int[] ids() {
        return ids.clone();
    }

    /** {@return the positions absorbed} */
    public int positions() {
        return decode.cached();
    }

    /** {@return the ids not absorbed yet: fed before the next prompt} */
    public int[] pending() {
        return Arrays.copyOfRange(ids, decode.cached(), ids.length);
    }

    /** One line: the positions absorbed and the ids pending. */
    @Override
    public String toString() {
        return "State[" + positions() + " position(s) absorbed, " + (ids.length - positions()) + " id(s) pending]";
    }
}
