/**
 * The engine-internal view of {@link k3j.api}'s objects for k3j's own front doors (the {@code k3} command and its
 * servers) and gates: registered by the API itself, so every arrow runs down, front door → API → the rest.
 * Not part of the API.
 */
package k3j.api.internal;
