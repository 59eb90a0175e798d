package k3j.planted.conform;

import k3j.planted.api.Door;

/** Breaks the layering: a package below the API reaches up into it. */
public final class CallsUp {
    private CallsUp() {}

    public static Door open() {
        return new Door();
    }
}
