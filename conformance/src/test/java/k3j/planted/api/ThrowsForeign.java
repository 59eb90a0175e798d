package k3j.planted.api;

import k3j.planted.dump.DumpRefused;

/** Planted: an API method that throws a lower package's exception at its caller (the API throws only its own types). */
public final class ThrowsForeign {
    public float[] stage(int layer) {
        if (layer < 0) throw new DumpRefused("no layer " + layer);
        return new float[] {layer};
    }
}
