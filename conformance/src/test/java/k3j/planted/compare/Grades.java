package k3j.planted.compare;

import k3j.planted.provider.Grade;

/** Breaks "the decision below the evidence": the comparison reaches up into provider grading. */
public final class Grades {
    private Grades() {}

    public static boolean within(int i) {
        return Grade.within(Compare.layer(i));
    }
}
