package k3j.planted.api;

import k3j.planted.cli.Command;

/** Breaks the layering: the API reaches up into a front door (what k3j.api.Internals once did with k3j.cli). */
public final class BackDoor {
    private BackDoor() {}

    public static int run() {
        return new Command().call();
    }
}
