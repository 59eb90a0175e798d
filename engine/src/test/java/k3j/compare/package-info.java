/** Unit tests of checkpoint comparison and {@code k3 conform} on the 93-layer oracle and its dump. */
package k3j.compare;
