/** Unit tests of the expert cache: slot geometry, replacement policies, the simulator and the cache itself. */
package k3j.cache;
