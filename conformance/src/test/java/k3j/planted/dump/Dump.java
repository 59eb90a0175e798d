package k3j.planted.dump;

/** The planted dump reader (legal: it depends on nothing above it). */
public final class Dump {
    private Dump() {}

    public static float[] stage(int layer) {
        return new float[] {layer};
    }
}
