package k3j.planted.fleet;

/** Breaks "no package cycles" with {@link k3j.planted.compare.LoopBack}: fleet → compare → fleet. */
public final class Loop {
    private Loop() {}

    public static int layers() {
        return k3j.planted.compare.LoopBack.count() + 1;
    }
}
