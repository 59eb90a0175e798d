/**
 * A miniature of the engine's package tree, compiled with the gates and never run: each rule of ArchitectureGate is
 * evaluated over it as over {@code k3j} itself, and must report exactly the classes here that break it (each class
 * says which rule it breaks, or that it breaks none).
 */
package k3j.planted;
