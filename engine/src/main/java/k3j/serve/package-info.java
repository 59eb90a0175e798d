/**
 * k3 serve's HTTP layer: an OpenAI-compatible server (Javalin on Jetty 12, Jackson) over {@link k3j.api.Serving},
 * a front door beside k3j.cli that uses only k3j.api. Request bodies are checked whole before anything reaches the
 * batch; every refusal is an OpenAI error object with its status.
 */
package k3j.serve;
