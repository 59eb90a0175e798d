package k3j.planted.compare;

import k3j.planted.api.Door;

/** Breaks the layering: a package below the API reaches up into it. */
public final class CallsUp {
    private CallsUp() {}

    public static Door open() {
        return new Door();
    }
}
