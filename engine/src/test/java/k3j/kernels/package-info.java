/** Unit tests of kernel building blocks that the kernel gates do not reach on their own. */
package k3j.kernels;
