/** Unit tests of corruptions (k3 corrupt) and of bisect's candidate table on the 93-layer oracle. */
package k3j.bisect;
