/** Unit tests of the dump readers (candidates, one-file candidates). */
package k3j.dump;
