/** JMH benchmark of indexing the released layout's headers ({@code ci/bench-index}). */
package k3j.io;
