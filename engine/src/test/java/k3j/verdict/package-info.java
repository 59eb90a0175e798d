/** Unit tests of k3j.verdict. */
package k3j.verdict;
