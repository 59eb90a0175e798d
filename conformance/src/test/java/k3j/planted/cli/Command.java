package k3j.planted.cli;

import k3j.planted.api.Door;

/** A legal front door: it judges through the API and exits by the verdict's own code. */
public final class Command {
    public int call() {
        return new Door().judge(true).exitCode();
    }
}
