/** JMH benchmarks of the kernels, and the C peer's inputs and bit check ({@code ci/bench}). */
package k3j.kernels;
