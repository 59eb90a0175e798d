/** Test support shared by the engine's unit tests: {@link k3j.Repo} finds the repository's fixtures. */
package k3j;
