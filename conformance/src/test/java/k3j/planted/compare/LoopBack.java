package k3j.planted.compare;

/** The other half of the planted cycle (see {@link k3j.planted.fleet.Loop}). */
public final class LoopBack {
    private LoopBack() {}

    public static int count() {
        return k3j.planted.fleet.Loop.class.getSimpleName().length();
    }
}
