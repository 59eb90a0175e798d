package k3j.model;

import k3j.io.TensorInfo;

/**
 * One checkpoint tensor bound to one kernel argument: where it is (from the header, never read here), how
 * it is kept, and how many leading elements are taken (only A_log takes fewer than it has).
 */
public record TensorBinding(String role, TensorInfo info, Storage storage, long take) {
    public String name() {
        return info.name();
    }
}
