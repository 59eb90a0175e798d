package k3j.api;

import java.util.Arrays;
import k3j.model.DecodeState;

/**
 * An incremental state and the ids it follows: {@code decode} has absorbed the first {@code decode.cached()}
 * of {@code ids}; the rest (the last generated id) are fed first by the next generation that continues it.
 */
public record State(int[] ids, DecodeState decode) {
    public State {
        if (decode.cached() > ids.length) throw new IllegalArgumentException("the state holds " + decode.cached() + " positions for " + ids.length + " ids");
        ids = ids.clone();
    }

    @Override
    public int[] ids() {
        return ids.clone();
    }

    @Override
    public String toString() {
        return "State[" + positions() + " position(s) absorbed, " + (ids.length - positions()) + " id(s) pending]";
    }

    /** The positions absorbed. */
    public int positions() {
        return decode.cached();
    }

    /** The ids not absorbed yet: fed before the next prompt. */
    public int[] pending() {
        return Arrays.copyOfRange(ids, decode.cached(), ids.length);
    }
}
