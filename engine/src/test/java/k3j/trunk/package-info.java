/** Unit tests of trunk packing and the pinned-set plan, and two opt-in benchmarks of streaming. */
package k3j.trunk;
