package k3j.planted.fleet;

/** Breaks "no package cycles" with {@link k3j.planted.conform.LoopBack}: fleet → conform → fleet. */
public final class Loop {
    private Loop() {}

    public static int layers() {
        return k3j.planted.conform.LoopBack.count() + 1;
    }
}
