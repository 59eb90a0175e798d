package k3j.planted.provider;

import k3j.planted.verdict.Verdict;

/** The planted provider grading (legal: it renders its grade through the verdict below it). */
public final class Grade {
    private Grade() {}

    public static boolean within(Verdict v) {
        return v.exitCode() == 0;
    }
}
