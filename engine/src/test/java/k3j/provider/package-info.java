/** Unit tests of k3j.provider. */
package k3j.provider;
