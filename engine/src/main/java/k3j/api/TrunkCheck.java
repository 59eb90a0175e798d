package k3j.api;

import k3j.trunk.DataBinding;

/** How a streamed trunk's binding to the checkpoint's data is checked when it is opened (docs/formats.md, "Trunk binding"). */
public enum TrunkCheck {
    /** Sizes, offsets and the sampled checksums recorded at packing: quick, and the default. */
    FAST,
    /** Every byte of the packed trunk read and compared with the checkpoint's own: slow, and certain. */
    FULL;

    DataBinding.Check check() {
        return DataBinding.Check.valueOf(name());
    }
}
